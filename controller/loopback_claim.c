/* loopback_claim.c — see loopback_claim.h. */
#include "controller/loopback_claim.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LOOPBACK_NETS 254u /* 127.1 .. 127.254 */

/* Binds the abstract name of N: the fd, or -1 with errno. */
static int claim_one(unsigned n)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    /* sun_path[0] = '\0': the abstract namespace, no file. */
    int len = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "hiernet-loopback-%u", n);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    if (bind(fd, (struct sockaddr *)&sa, salen) == 0) return fd;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int loopback_claim(unsigned first, unsigned *n)
{
    for (unsigned i = 0; i < LOOPBACK_NETS; i++) {
        unsigned candidate = 1 + (first - 1 + i) % LOOPBACK_NETS;
        int fd = claim_one(candidate);
        if (fd >= 0) {
            *n = candidate;
            return fd;
        }
        if (errno != EADDRINUSE) return -1;
    }
    errno = EADDRINUSE;
    return -1;
}
