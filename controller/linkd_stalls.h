/* linkd_stalls.h — hiernet-linkd's stalls: the times a linkd process waited
 * on a run queue at least as long as the run's shortest TCP minimum RTO.
 * One hiernet-linkd carries up to 16 links of a network (netrun_linkd.c),
 * so while the host does not run it no frame moves on any of them and
 * every flow across them can time out at once: those RTOs are the
 * emulation's, not the emulated network's (docs/fidelity.md, "linkd stalls
 * and RTO episodes").
 *
 * The wait is /proc/PID/schedstat's second field, read every
 * OVERLOAD_DP_SUB_PERIOD_S: the kernel credits a wait when the process gets
 * the CPU, so one reading's rise of that much is one stall that just ended.
 * Pure bookkeeping here; controller/netrun_dataplane.c reads. */
#pragma once

#include "topo/machines.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct topo_network;

/* The first stalls are kept with their times; later ones are counted. */
#define LINKD_STALLS_KEPT 32

struct linkd_stall {
    double at_s;   /* when it began, on the run's clock (emulated seconds; NAN: unknown) */
    double wall_s; /* how long linkd waited, real seconds */
    double mono_s; /* when it began, CLOCK_MONOTONIC of its machine (NAN: not this one's) */
    char machine[TOPO_MACHINE_NAME_MAX]; /* "" for this machine, else an agent's */
};

struct linkd_stalls {
    double threshold_wall_s; /* the shortest minimum RTO watched, real seconds (0: none) */
    uint64_t count;
    double longest_wall_s, total_wall_s;
    size_t n_kept;
    struct linkd_stall kept[LINKD_STALLS_KEPT];
};

/* The shortest minimum RTO of net's hosts in real seconds: a host's
 * tcp.rto_min x the dilation (the route metric), or the kernel's 200 ms. */
double linkd_stall_threshold(const struct topo_network *net);

/* Whether a linkd whose run-queue wait rose by rise_s over a reading
 * interval of interval_s stalled at threshold_s: the rise reaches the
 * threshold and LINKD_STALL_SHARE of the interval. The second bar keeps
 * many short waits from counting as one stall, in a reading that came late
 * or under a threshold below the reading period (a tcp.rto_min of a few
 * ms): a dilated linkd polls for its next release and waits up to 71% of
 * the time without being behind (controller/overload.h, OVERLOAD_DP_WAIT).
 * So a stall is also at least 80 ms long at the 0.1 s readings. */
#define LINKD_STALL_SHARE 0.8
bool linkd_stall_is(double rise_s, double interval_s, double threshold_s);

/* Watches a network at threshold_s: the account's threshold is the
 * smallest watched. */
void linkd_stalls_watch(struct linkd_stalls *s, double threshold_s);
/* One stall of wall_s real seconds, as st says it (machine "" here). */
void linkd_stalls_note(struct linkd_stalls *s, const struct linkd_stall *st);

/* As a JSON object: {"threshold_wall_s", "count", "longest_wall_s",
 * "total_wall_s", "stalls": [{"at_s", "wall_s", "machine"}, ...]} (the kept
 * ones; machine null for this machine's). */
void linkd_stalls_write_json(FILE *f, const struct linkd_stalls *s);
/* The note a run ends with when linkd stalled; false when it did not. */
bool linkd_stalls_note_line(const struct linkd_stalls *s, char *buf, size_t len);
