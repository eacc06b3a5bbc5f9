/* netrun_dataplane.c — the data plane's samples for the overload account
 * (controller/overload.h, "The data plane"): at every round of links.csv
 * samples, the share of its rate / D the busiest link direction carried
 * since the last round, and over its busy phases (sub-samples read from
 * linkd every OVERLOAD_DP_SUB_PERIOD_S between rounds; on the kernel
 * backend a round is its one sub-sample), and the CPU the network's own
 * data plane took meanwhile: its linkd processes (all of their time: they
 * only forward) and its peers' system time (TCP, sendfile, recv; their
 * user time is compute). Owns the previous round's counters and the
 * round's sub-samples. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/linkd_client.h"
#include "controller/linkd_stalls.h"
#include "controller/overload.h"
#include "controller/peer_client.h"
#include "proto/linkd_methods.h"
#include "proto/protocol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One direction's sub-samples this round. */
struct dp_subs {
    struct overload_sub *s;
    size_t n, cap;
    uint64_t bytes; /* at its last sub-sample */
    double mono;    /* when (0: never) */
};

struct netrun_dataplane {
    struct overload *overload;    /* the run's account (borrowed) */
    struct netrun *nr;            /* the network sampled (borrowed: it owns this) */
    uint64_t *bytes;              /* per link direction (2 x link + dir): at its last sample */
    double *mono;                 /* when (0: never sampled) */
    double round_mono, own_cpu_s; /* the previous round: when, the data plane's CPU seconds */
    double *linkd_cpu_s;          /* the previous round: each linkd's CPU seconds */
    double *linkd_wait_s;         /* ... and its run-queue wait (-1: unknown) */
    double *stall_wait_s;         /* each linkd's run-queue wait at the previous tick (-1: none) */
    double stall_mono;            /* when that was read (0: never) */
    double stall_threshold_s;     /* linkd_stall_threshold of the network */
    double util_max;              /* this round so far; -1: no rated direction */
    size_t util_arg;              /* the direction of util_max */
    int64_t queue_peak;           /* this round's longest queue, frames (-1: not read) */
    struct dp_subs *subs;         /* per link direction */
    bool sub_timer_on;            /* sub_timer runs: linkd is read between rounds */
    ev_timer sub_timer;
    size_t subs_pending; /* linkd replies awaited: a slow linkd skips a beat */
};

static void on_sub_timer(EV_P_ ev_timer *w, int revents);

/* Reads linkd between rounds; the kernel backend's veths are read once a
 * round (a netlink dump per link), which stays its only sub-sample. */
static void sub_timer_start(struct netrun_dataplane *dp)
{
    if (!dp->nr->n_linkd) return;
    ev_timer_init(&dp->sub_timer, on_sub_timer, OVERLOAD_DP_SUB_PERIOD_S, OVERLOAD_DP_SUB_PERIOD_S);
    ev_timer_start(dp->nr->loop, &dp->sub_timer);
    dp->sub_timer_on = true;
}

void netrun_watch_dataplane(struct netrun *nr, struct overload *o, double stall_threshold_s)
{
    if (nr->parts) { /* this machine's part; of the others', their linkd stalls */
        struct netrun *inner = netrun_parts_inner(nr);
        if (inner) netrun_watch_dataplane(inner, o, linkd_stall_threshold(nr->net));
        if (o) netrun_parts_watch(nr, o);
        return;
    }
    if (!o || nr->dataplane) return;
    struct netrun_dataplane *dp = calloc(1, sizeof *dp);
    size_t n = 2 * (nr->net->n_links ? nr->net->n_links : 1);
    if (dp) {
        dp->bytes = calloc(n, sizeof *dp->bytes);
        dp->mono = calloc(n, sizeof *dp->mono);
        dp->linkd_cpu_s = calloc(nr->n_linkd ? nr->n_linkd : 1, sizeof *dp->linkd_cpu_s);
        dp->linkd_wait_s = calloc(nr->n_linkd ? nr->n_linkd : 1, sizeof *dp->linkd_wait_s);
        dp->stall_wait_s = calloc(nr->n_linkd ? nr->n_linkd : 1, sizeof *dp->stall_wait_s);
        dp->subs = calloc(n, sizeof *dp->subs);
    }
    /* Out of memory: the account goes without this network. */
    if (!dp || !dp->bytes || !dp->mono || !dp->linkd_cpu_s || !dp->linkd_wait_s ||
        !dp->stall_wait_s || !dp->subs) {
        netrun_dataplane_free(dp);
        return;
    }
    dp->overload = o;
    dp->nr = nr;
    dp->util_max = -1;
    dp->queue_peak = -1;
    for (size_t i = 0; i < nr->n_linkd; i++)
        dp->stall_wait_s[i] = -1;
    dp->stall_threshold_s =
        stall_threshold_s > 0 ? stall_threshold_s : linkd_stall_threshold(nr->net);
    if (nr->n_linkd) overload_watch_stalls(o, dp->stall_threshold_s);
    nr->dataplane = dp;
    sub_timer_start(dp);
}

void netrun_dataplane_stop(struct netrun *nr)
{
    struct netrun_dataplane *dp = nr->dataplane;
    if (!dp || !dp->sub_timer_on) return;
    ev_timer_stop(nr->loop, &dp->sub_timer);
    dp->sub_timer_on = false;
}

void netrun_dataplane_free(struct netrun_dataplane *dp)
{
    if (!dp) return;
    if (dp->sub_timer_on) ev_timer_stop(dp->nr->loop, &dp->sub_timer);
    size_t n = dp->nr ? 2 * dp->nr->net->n_links : 0; /* no nr: no sub-sample yet */
    for (size_t i = 0; dp->subs && i < n; i++)
        free(dp->subs[i].s);
    free(dp->subs);
    free(dp->bytes);
    free(dp->mono);
    free(dp->linkd_cpu_s);
    free(dp->linkd_wait_s);
    free(dp->stall_wait_s);
    free(dp);
}

/* Direction i's counter at mono: a sub-sample since its last one. */
static void sub_note(struct netrun *nr, size_t i, uint64_t rate, uint64_t bytes, double mono)
{
    struct dp_subs *d = &nr->dataplane->subs[i];
    double dt = mono - d->mono;
    uint64_t before = d->bytes;
    bool known = d->mono > 0;
    /* A reply that came right after a late one: its stamp says little of
     * when linkd read the counter, and a short interval magnifies that
     * (a 1500x share seen under load); the next sub-sample spans both. */
    if (known && dt > 0 && dt < OVERLOAD_DP_SUB_PERIOD_S / 4 && !(bytes < before)) return;
    d->bytes = bytes;
    d->mono = mono;
    if (!known || !(dt > 0) || !rate || bytes < before) return; /* a restarted counter */
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        struct overload_sub *grown = realloc(d->s, cap * sizeof *grown);
        if (!grown) return; /* out of memory: the round judges what it has */
        d->s = grown;
        d->cap = cap;
    }
    double dilation = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    d->s[d->n++] = (struct overload_sub){.bits = (double)(bytes - before) * 8.0,
                                         .capacity = (double)rate * dt / dilation,
                                         .wall_s = dt};
}

/* One linkd's counters between rounds. */
static void on_sub_sampled(void *ctx, const char *error, const msgpack_object *result)
{
    struct netrun *nr = ctx;
    struct netrun_dataplane *dp = nr->dataplane;
    if (!dp) return; /* a reply after the account went */
    if (dp->subs_pending) dp->subs_pending--;
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *links = error ? NULL : proto_args_get(&args, "links");
    if (!links || links->type != MSGPACK_OBJECT_ARRAY) return;
    double mono = mono_s();
    for (uint32_t k = 0; k < links->via.array.size; k++) {
        struct proto_args la;
        proto_args_init(&la, &links->via.array.ptr[k]);
        int64_t id = -1;
        if (proto_arg_i64(&la, LINKD_ARG_ID, &id) != 1 || id < 0 || (size_t)id >= nr->net->n_links)
            continue;
        for (int dir = 0; dir < 2; dir++) {
            const msgpack_object *c = proto_args_get(&la, dir ? LINKD_DIR_BA : LINKD_DIR_AB);
            struct proto_args ca;
            int64_t bytes = 0;
            if (!c) continue;
            proto_args_init(&ca, c);
            if (proto_arg_i64(&ca, LINKD_STATS_DELIVERED_BYTES, &bytes) == 1 && bytes >= 0)
                sub_note(nr, 2 * (size_t)id + (size_t)dir, netrun_rate_now(nr, (int)id, dir),
                         (uint64_t)bytes, mono);
        }
    }
}

static double process_wait_s(pid_t pid);

/* Each linkd's run-queue wait since the previous tick: a rise that makes a
 * stall (linkd_stalls.h) is noted with when it began on the run's clock. */
static void stalls_check(struct netrun_dataplane *dp)
{
    struct netrun *nr = dp->nr;
    double now = mono_s(), interval = dp->stall_mono > 0 ? now - dp->stall_mono : 0;
    dp->stall_mono = now;
    for (size_t i = 0; i < nr->n_linkd; i++) {
        double wait = process_wait_s(linkd_client_pid(nr->linkd[i]));
        double rise = wait - dp->stall_wait_s[i];
        bool known = dp->stall_wait_s[i] >= 0 && wait >= 0;
        dp->stall_wait_s[i] = wait;
        if (!known || !(interval > 0) || !linkd_stall_is(rise, interval, dp->stall_threshold_s))
            continue;
        /* The wait is credited when linkd runs again: it ended about now. */
        double d = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
        struct linkd_stall st = {.at_s = nr->clock ? nr->clock(nr->clock_ctx) - rise / d : NAN,
                                 .wall_s = rise,
                                 .mono_s = now - rise};
        overload_note_stall(dp->overload, &st);
    }
}

static void on_sub_timer(EV_P_ ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct netrun_dataplane *dp = container_of(w, struct netrun_dataplane, sub_timer);
    struct netrun *nr = dp->nr;
    char err[256];
    stalls_check(dp);
    if (dp->subs_pending) return; /* linkd is slow to answer: skip a beat */
    for (size_t i = 0; i < nr->n_linkd; i++)
        if (linkd_client_stats_peek(nr->linkd[i], on_sub_sampled, nr, err, sizeof err) == 0)
            dp->subs_pending++;
}

void netrun_dataplane_direction(struct netrun *nr, int link, int dir, uint64_t bytes, double mono)
{
    struct netrun_dataplane *dp = nr->dataplane;
    if (!dp || link < 0 || (size_t)link >= nr->net->n_links) return;
    size_t i = 2 * (size_t)link + (size_t)dir;
    double dt = mono - dp->mono[i];
    uint64_t before = dp->bytes[i];
    bool known = dp->mono[i] > 0;
    dp->bytes[i] = bytes;
    dp->mono[i] = mono;
    uint64_t rate = netrun_rate_now(nr, link, dir);
    if (!dp->sub_timer_on) sub_note(nr, i, rate, bytes, mono);  /* the round is its sub-sample */
    if (!known || !(dt > 0) || !rate || bytes < before) return; /* a restarted counter */
    double d = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    double util = (double)(bytes - before) * 8.0 * d / ((double)rate * dt);
    if (util > dp->util_max) {
        dp->util_max = util;
        dp->util_arg = i;
    }
}

void netrun_dataplane_queue(struct netrun *nr, int64_t peak)
{
    struct netrun_dataplane *dp = nr->dataplane;
    if (dp && peak > dp->queue_peak) dp->queue_peak = peak;
}

/* CPU seconds of pid so far: user + system, or system only. */
static double process_cpu_s(pid_t pid, bool system_only)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *rest = strrchr(line, ')'); /* the command name may hold spaces */
    unsigned long long utime = 0, stime = 0;
    if (!rest || sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                        &stime) != 2)
        return 0;
    long tick = sysconf(_SC_CLK_TCK);
    return (double)(system_only ? stime : utime + stime) / (double)(tick > 0 ? tick : 100);
}

/* Seconds pid has waited on a run queue so far (/proc/PID/schedstat, its
 * second field, in ns: time runnable but not running); -1 when the kernel
 * does not say. */
static double process_wait_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    unsigned long long run_ns = 0, wait_ns = 0;
    int got = fscanf(f, "%llu %llu", &run_ns, &wait_ns);
    fclose(f);
    return got == 2 ? (double)wait_ns / 1e9 : -1;
}

/* The busiest linkd since the previous round: its CPU seconds, and the
 * longest run-queue wait of any linkd (-1: unknown). */
struct linkd_round {
    double busy_s, wait_s;
};

/* The data plane's CPU seconds so far; the busiest linkd's figures since
 * the previous round into *lr. */
static double own_cpu_s(const struct netrun *nr, struct linkd_round *lr)
{
    double s = 0;
    *lr = (struct linkd_round){0, nr->n_linkd ? 0 : -1};
    for (size_t i = 0; i < nr->n_linkd; i++) {
        pid_t pid = linkd_client_pid(nr->linkd[i]);
        double cpu = process_cpu_s(pid, false), wait = process_wait_s(pid);
        double *cpu_before = &nr->dataplane->linkd_cpu_s[i];
        double *wait_before = &nr->dataplane->linkd_wait_s[i];
        if (cpu - *cpu_before > lr->busy_s) lr->busy_s = cpu - *cpu_before;
        if (wait < 0 || *wait_before < 0)
            lr->wait_s = -1; /* one linkd unknown: the figure would understate */
        else if (lr->wait_s >= 0 && wait - *wait_before > lr->wait_s)
            lr->wait_s = wait - *wait_before;
        *cpu_before = cpu;
        *wait_before = wait;
        s += cpu;
    }
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        const struct peer_client *pc = nr->peers[i].client;
        if (pc && !peer_client_exited(pc)) s += process_cpu_s(peer_client_pid(pc), true);
    }
    return s;
}

void netrun_dataplane_round(struct netrun *nr)
{
    struct netrun_dataplane *dp = nr->dataplane;
    if (!dp) return;
    struct linkd_round lr;
    double now = mono_s(), cpu = own_cpu_s(nr, &lr);
    double wall_s = dp->round_mono > 0 ? now - dp->round_mono : 0;
    struct overload_links s = {
        .wall_s = wall_s,
        .linkd_busy = wall_s > 0 ? lr.busy_s / wall_s : 0,
        .linkd_wait = wall_s > 0 && lr.wait_s >= 0 ? lr.wait_s / wall_s : -1,
        .queue_peak = (double)dp->queue_peak,
        .util_max = dp->util_max,
        .util_busy = -1,
        .own_cpu_s = cpu > dp->own_cpu_s ? cpu - dp->own_cpu_s : 0, /* peers restarted: 0 */
        .dilation = nr->net->dilation,
    };
    if (dp->util_max >= 0) {
        const struct dp_subs *busiest = &dp->subs[dp->util_arg];
        s.util_busy = overload_busy_share(busiest->s, busiest->n, &s.busy_s);
    }
    for (size_t i = 0; i < 2 * nr->net->n_links; i++)
        dp->subs[i].n = 0;
    dp->round_mono = now;
    dp->own_cpu_s = cpu;
    dp->util_max = -1;
    dp->queue_peak = -1;
    overload_note_links(dp->overload, &s);
}
