/* netrun_dataplane.c — the data plane's samples for the overload account
 * (controller/overload.h, "The data plane"): at every round of links.csv
 * samples, the share of its rate / D the busiest link direction carried
 * since the last round, and the CPU the network's own data plane took
 * meanwhile: its linkd processes (all of their time: they only forward)
 * and its peers' system time (TCP, sendfile, recv; their user time is
 * compute). Owns the previous round's counters. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "controller/linkd_client.h"
#include "controller/overload.h"
#include "controller/peer_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct netrun_dataplane {
    struct overload *overload;    /* the run's account (borrowed) */
    uint64_t *bytes;              /* per link direction (2 x link + dir): at its last sample */
    double *mono;                 /* when (0: never sampled) */
    double round_mono, own_cpu_s; /* the previous round: when, the data plane's CPU seconds */
    double *linkd_cpu_s;          /* the previous round: each linkd's CPU seconds */
    double util_max;              /* this round so far; -1: no rated direction */
};

void netrun_watch_dataplane(struct netrun *nr, struct overload *o)
{
    if (nr->parts) { /* this machine's part only, as yet */
        if (netrun_parts_inner(nr)) netrun_watch_dataplane(netrun_parts_inner(nr), o);
        return;
    }
    if (!o || nr->dataplane) return;
    struct netrun_dataplane *dp = calloc(1, sizeof *dp);
    size_t n = 2 * (nr->net->n_links ? nr->net->n_links : 1);
    if (dp) {
        dp->bytes = calloc(n, sizeof *dp->bytes);
        dp->mono = calloc(n, sizeof *dp->mono);
        dp->linkd_cpu_s = calloc(nr->n_linkd ? nr->n_linkd : 1, sizeof *dp->linkd_cpu_s);
    }
    /* Out of memory: the account goes without this network. */
    if (!dp || !dp->bytes || !dp->mono || !dp->linkd_cpu_s) {
        netrun_dataplane_free(dp);
        return;
    }
    dp->overload = o;
    dp->util_max = -1;
    nr->dataplane = dp;
}

void netrun_dataplane_free(struct netrun_dataplane *dp)
{
    if (!dp) return;
    free(dp->bytes);
    free(dp->mono);
    free(dp->linkd_cpu_s);
    free(dp);
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
    if (!known || !(dt > 0) || !rate || bytes < before) return; /* a restarted counter */
    double d = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    double util = (double)(bytes - before) * 8.0 * d / ((double)rate * dt);
    if (util > dp->util_max) dp->util_max = util;
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

/* The data plane's CPU seconds so far; the busiest linkd's since the
 * previous round into *linkd_busy_s. */
static double own_cpu_s(const struct netrun *nr, double *linkd_busy_s)
{
    double s = 0;
    *linkd_busy_s = 0;
    for (size_t i = 0; i < nr->n_linkd; i++) {
        double cpu = process_cpu_s(linkd_client_pid(nr->linkd[i]), false);
        double *before = &nr->dataplane->linkd_cpu_s[i];
        if (cpu - *before > *linkd_busy_s) *linkd_busy_s = cpu - *before;
        *before = cpu;
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
    double linkd_s, now = mono_s(), cpu = own_cpu_s(nr, &linkd_s);
    double wall_s = dp->round_mono > 0 ? now - dp->round_mono : 0;
    struct overload_links s = {
        .wall_s = wall_s,
        .linkd_busy = wall_s > 0 ? linkd_s / wall_s : 0,
        .util_max = dp->util_max,
        .own_cpu_s = cpu > dp->own_cpu_s ? cpu - dp->own_cpu_s : 0, /* peers restarted: 0 */
    };
    dp->round_mono = now;
    dp->own_cpu_s = cpu;
    dp->util_max = -1;
    overload_note_links(dp->overload, &s);
}
