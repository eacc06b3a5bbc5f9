/* stall_cpu.c — hn-stall-cpu PID SECONDS: keeps process PID waiting on a
 * run queue for SECONDS, as a host busy with other work does to
 * hiernet-linkd (docs/fidelity.md, "linkd stalls and RTO episodes"): moves
 * PID onto this process's last allowed CPU, takes that CPU at SCHED_FIFO's
 * top priority in a loop that ends by itself at its deadline (a timer or a
 * signal from a normal process could not run there meanwhile), then gives
 * both back: its policy first, then PID's CPUs.
 * Exit: 0 done, 1 PID or the arguments at fault, 77 the host cannot (one
 * CPU, or SCHED_FIFO refused). Prints what it did in one line. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last CPU of set, -1 when it holds fewer than two: the other CPUs
 * must keep running the caller (the controller, the peers). */
static int last_cpu(const cpu_set_t *set)
{
    if (CPU_COUNT(set) < 2) return -1;
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, set)) return c;
    return -1;
}

int main(int argc, char **argv)
{
    char *end;
    long pid = argc == 3 ? strtol(argv[1], &end, 10) : 0;
    double seconds = argc == 3 ? strtod(argv[2], NULL) : 0;
    if (argc != 3 || pid <= 0 || *end || !(seconds > 0) || seconds > 0.8) {
        fprintf(stderr, "usage: hn-stall-cpu PID SECONDS (0 < SECONDS <= 0.8: the kernel's "
                        "real-time share leaves others 5%% of each second)\n");
        return 1;
    }
    cpu_set_t own, theirs, one;
    if (sched_getaffinity(0, sizeof own, &own) < 0 ||
        sched_getaffinity((pid_t)pid, sizeof theirs, &theirs) < 0) {
        fprintf(stderr, "hn-stall-cpu: process %ld: %s\n", pid, strerror(errno));
        return 1;
    }
    int cpu = last_cpu(&own);
    if (cpu < 0) {
        printf("hn-stall-cpu: one CPU only: stalling a process would stall everything\n");
        return 77;
    }
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) < 0 ||
        sched_setaffinity((pid_t)pid, sizeof one, &one) < 0) {
        fprintf(stderr, "hn-stall-cpu: pinning to CPU %d: %s\n", cpu, strerror(errno));
        sched_setaffinity((pid_t)pid, sizeof theirs, &theirs);
        return 1;
    }
    /* The top priority: a linkd at SCHED_FIFO (HIERNET_LINKD_PRIORITY) is
     * held too, as an equal priority does not preempt. */
    struct sched_param fifo = {.sched_priority = sched_get_priority_max(SCHED_FIFO)},
                       normal = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) < 0) {
        printf("hn-stall-cpu: SCHED_FIFO refused: %s\n", strerror(errno));
        sched_setaffinity((pid_t)pid, sizeof theirs, &theirs);
        return 77;
    }
    double start = mono_s(), deadline = start + seconds;
    volatile unsigned long spins = 0;
    while (mono_s() < deadline)
        spins++;
    double took = mono_s() - start;
    sched_setscheduler(0, SCHED_OTHER, &normal);
    int rc = sched_setaffinity((pid_t)pid, sizeof theirs, &theirs) < 0 ? 1 : 0;
    printf("hn-stall-cpu: held CPU %d for %.3f s from process %ld%s\n", cpu, took, pid,
           rc ? " (its CPUs not given back: it ended?)" : "");
    return rc;
}
