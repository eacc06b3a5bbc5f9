/* raw_rtt.c — the baseline of the control_rtt benchmark: round trips of a
 * small message over a bare socketpair between two processes, blocking
 * read/write, no codec, no event loop. Prints "median_us p99_us".
 * Usage: bench_raw_rtt [ITERATIONS] */
#include "common/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MESSAGE_BYTES 16 /* about the size of an encoded ping request */

static double now_us(void)
{
    return mono_s() * 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void echo_until_eof(int fd)
{
    char buf[MESSAGE_BYTES];
    while (read(fd, buf, sizeof buf) == (ssize_t)sizeof buf)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
    _exit(0);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    if (n < 1) n = 1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return perror("socketpair"), 1;
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) {
        close(sv[0]);
        echo_until_eof(sv[1]);
    }
    close(sv[1]);
    double *rtt = malloc((size_t)n * sizeof *rtt);
    if (!rtt) return 1;
    char msg[MESSAGE_BYTES] = "ping";
    for (long i = 0; i < n; i++) {
        double t0 = now_us();
        if (write(sv[0], msg, sizeof msg) != (ssize_t)sizeof msg ||
            read(sv[0], msg, sizeof msg) != (ssize_t)sizeof msg)
            return perror("round trip"), 1;
        rtt[i] = now_us() - t0;
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    qsort(rtt, (size_t)n, sizeof *rtt, cmp_double);
    printf("%.3f %.3f\n", rtt[n / 2], rtt[(long)(n * 0.99)]);
    free(rtt);
    return 0;
}
