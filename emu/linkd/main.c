/* main.c — hiernet-linkd: the user-space link emulator process.
 *
 * Provides the executable: parses the command line, owns the libev loop, the
 * forwarding context (forward.h) and the control channel (control.h), and
 * exits when the controller's end of the control socketpair closes, which
 * closes every TAP and so removes the devices, or leaves persistent ones to
 * their namespaces (tap.h; docs/design-notes.md, "Peers and linkd give up root after setup"). It
 * runs without new privileges from the start and gives up root when the controller says every link
 * is made (drop_root, control.h).
 *
 *   hiernet-linkd --control-fd N [--cpu CPU] [--priority P]
 */
#include "hiernet_version.h"
#include "common/log_line.h"
#include "common/privdrop.h"
#include "emu/linkd/control.h"
#include "emu/linkd/forward.h"
#include "emu/linkd/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void linkd_log(const char *fmt, ...)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "hiernet-linkd[%d]", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    log_line_vprintf(prefix, fmt, ap);
    va_end(ap);
}

struct linkd_options {
    int control_fd;
    int cpu;      /* -1: any */
    int priority; /* 0: normal scheduling; 1..99: SCHED_FIFO */
};

static void linkd_usage(FILE *out)
{
    fprintf(out, "usage: hiernet-linkd --control-fd N [--cpu CPU] [--priority 1..99]\n"
                 "User-space link emulator of hiernet, driven over MessagePack-RPC on fd N;\n"
                 "exits when fd N reaches EOF.\n");
}

static int linkd_parse_int(const char *s, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

/* Returns 0 to run, 1 when done (help/version), 2 on a usage error. */
static int linkd_parse_args(int argc, char **argv, struct linkd_options *o)
{
    static const struct option longopts[] = {
        {"control-fd", required_argument, NULL, 'c'}, {"cpu", required_argument, NULL, 'C'},
        {"priority", required_argument, NULL, 'p'},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0},
    };
    *o = (struct linkd_options){.control_fd = -1, .cpu = -1, .priority = 0};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'c':
            bad = linkd_parse_int(optarg, 0, 1 << 20, &o->control_fd);
            break;
        case 'C':
            bad = linkd_parse_int(optarg, 0, CPU_SETSIZE - 1, &o->cpu);
            break;
        case 'p':
            bad = linkd_parse_int(optarg, 0, 99, &o->priority);
            break;
        case 'h':
            linkd_usage(stdout);
            return 1;
        case 'V':
            printf("hiernet-linkd %s (%s)\n", HIERNET_VERSION, HIERNET_GIT);
            return 1;
        default:
            bad = -1;
        }
        if (bad) {
            linkd_usage(stderr);
            return 2;
        }
    }
    if (optind != argc || o->control_fd < 0 || fcntl(o->control_fd, F_GETFD) < 0) {
        fprintf(stderr, "hiernet-linkd: --control-fd must name an open file descriptor\n");
        linkd_usage(stderr);
        return 2;
    }
    return 0;
}

/* Scheduling: release timers need tight wake-ups. Failures only cost
 * accuracy, so they are reported and ignored. */
static void linkd_tune_process(const struct linkd_options *o)
{
    /* The default 50 µs timer slack would be added to every release. */
    if (prctl(PR_SET_TIMERSLACK, 1UL) < 0) linkd_log("PR_SET_TIMERSLACK: %s", strerror(errno));
    if (o->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0)
            linkd_log("pinning to CPU %d: %s", o->cpu, strerror(errno));
    }
    if (o->priority > 0) {
        struct sched_param sp = {.sched_priority = o->priority};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
            linkd_log("SCHED_FIFO %d: %s", o->priority, strerror(errno));
    }
}

static void on_signal(EV_P_ ev_signal *w, int revents)
{
    ev_break(EV_A_ EVBREAK_ALL);
}

static int linkd_run(const struct linkd_options *o)
{
    char err[256];
    struct ev_loop *loop = ev_default_loop(EVBACKEND_EPOLL);
    if (!loop) loop = ev_default_loop(0);
    if (!loop) {
        linkd_log("cannot create the event loop");
        return 3;
    }
    struct linkd ld;
    struct linkd_control ctl;
    if (linkd_tap_init(err, sizeof err) < 0 || linkd_init(&ld, loop, err, sizeof err) < 0) {
        linkd_log("%s", err);
        return 3;
    }
    if (linkd_control_start(&ctl, &ld, o->control_fd, err, sizeof err) < 0) {
        linkd_log("%s", err);
        linkd_destroy(&ld);
        return 3;
    }
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(loop, &sigterm);
    ev_signal_start(loop, &sigint);

    ev_run(loop, 0);

    ev_signal_stop(loop, &sigterm);
    ev_signal_stop(loop, &sigint);
    linkd_control_stop(&ctl);
    linkd_destroy(&ld);
    linkd_tap_shutdown();
    ev_loop_destroy(loop);
    return 0;
}

int main(int argc, char **argv)
{
    struct linkd_options o;
    int rc = linkd_parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : 2;
    /* A controller that vanishes mid-write must not kill us before we clean up. */
    signal(SIGPIPE, SIG_IGN);
    char err[256];
    /* No exec of ours may ever gain a privilege; root itself goes with the
     * controller's drop_root once the links are made (control.h). */
    if (privdrop_prepare(err, sizeof err) < 0) {
        linkd_log("%s", err);
        return 3;
    }
    linkd_tune_process(&o);
    return linkd_run(&o);
}
