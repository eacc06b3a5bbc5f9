/* template_wire.c — controller <-> peer template messages (see template_wire.h). */
#include "proto/template_wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int peer_template_send_request(int sock, uint32_t id, const char *const *args, int control_fd,
                               int netns_fd)
{
    char buf[PEER_TEMPLATE_MAX_REQUEST];
    size_t len = sizeof id;
    memcpy(buf, &id, sizeof id);
    for (int i = 0; args[i]; i++) {
        size_t n = strlen(args[i]) + 1;
        if (i >= PEER_TEMPLATE_MAX_ARGS || len + n > sizeof buf) return errno = E2BIG, -1;
        memcpy(buf + len, args[i], n);
        len += n;
    }
    int fds[2] = {control_fd, netns_fd};
    size_t nfds = netns_fd >= 0 ? 2 : 1;
    union {
        char space[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {buf, len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.space,
                         .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(cmsg), fds, nfds * sizeof(int));
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    return n == (ssize_t)len ? 0 : -1;
}

/* Takes the descriptors out of the message: up to two. */
static size_t take_fds(struct msghdr *msg, int fds[2])
{
    size_t n = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (n < 2)
                fds[n++] = fd;
            else
                close(fd);
        }
    }
    return n;
}

/* Splits buf[4..len) into argv; false when it is not NUL-terminated strings. */
static bool split_args(struct peer_template_request *req, size_t len)
{
    size_t at = sizeof req->id;
    req->argc = 0;
    if (len <= at || req->buf[len - 1] != '\0') return false;
    while (at < len) {
        if (req->argc >= PEER_TEMPLATE_MAX_ARGS) return false;
        req->argv[req->argc++] = req->buf + at;
        at += strlen(req->buf + at) + 1;
    }
    req->argv[req->argc] = NULL;
    return true;
}

int peer_template_recv_request(int sock, struct peer_template_request *req)
{
    union {
        char space[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {req->buf, sizeof req->buf};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.space,
                         .msg_controllen = sizeof control.space};
    ssize_t len = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (len <= 0) return (int)len;
    int fds[2] = {-1, -1};
    size_t nfds = take_fds(&msg, fds);
    req->control_fd = fds[0];
    req->netns_fd = fds[1];
    memcpy(&req->id, req->buf, (size_t)len >= sizeof req->id ? sizeof req->id : 0);
    if (nfds == 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !split_args(req, (size_t)len)) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        return errno = EBADMSG, -1;
    }
    return 1;
}

int peer_template_send_reply(int sock, const struct peer_template_reply *reply)
{
    return send(sock, reply, sizeof *reply, MSG_NOSIGNAL) == (ssize_t)sizeof *reply ? 0 : -1;
}

int peer_template_recv_reply(int sock, struct peer_template_reply *reply)
{
    ssize_t n = recv(sock, reply, sizeof *reply, 0);
    if (n <= 0) return (int)n;
    if ((size_t)n != sizeof *reply) return errno = EBADMSG, -1;
    reply->step[sizeof reply->step - 1] = '\0';
    return 1;
}
