/* overload.h — the run's overload account: was the host's CPU, rather than
 * the emulated network and devices, what set the run's times?
 *
 * Two sources. The host: /proc/stat's CPU counters from the run's start
 * (and once per second, for the peak), so saturation is the busy share of
 * every core over the run. The peers: every compute command's reply says
 * whether it overran its emulated completion (peer/worker.h: the `speed`
 * rule, stretched by the dilation) and whether that overrun was starvation:
 * its CPU time plus its run-queue delay alone passed the budget. An overrun
 * that was not is a wait (blocked on I/O, a lock, a page), which the host's
 * CPU did not cause and dilation would not cure: a run of many flows into
 * one link stretches compute that way on an idle host. The account counts
 * commands, overruns and starved commands per node and the dilation each
 * starved command needed ((CPU time + run-queue delay) / budget at
 * dilation 1), from which it suggests the dilation that would have covered
 * the run's demand, bounded by the CPU demand itself (the peak sum of the
 * speeds of the computing nodes whose networks ran at once, per core).
 *
 * Owns the node table and the sampling timer (which never keeps the loop
 * alive). No Lua here: lua/ reads the report (hn.overload(), run.json). */
#pragma once

#include "controller/linkd_stalls.h"

#include <ev.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Above this share of starved commands a run is called CPU-limited (and
 * above this share of overruns that were waits, it says so instead). */
#define OVERLOAD_WARN_SHARE 0.05
/* The suggested dilation covers the 95th percentile of the starved
 * commands' needed dilation, with this margin, and never exceeds the
 * dilation at which every computing node at once fits the cores. */
#define OVERLOAD_DILATION_MARGIN 1.25
/* Starvation is the run's own (and dilation a cure) only when its compute
 * filled at least this share of the host's cores: below it, the run-queue
 * delays its commands met were scheduling latency and other programs' load,
 * which a dilation of the run does not shorten (it lowers only the run's
 * own demand). */
#define OVERLOAD_OWN_SHARE 0.1

/* Automatic dilation (overload_probe_arm): the probe window closes once
 * this many timed compute commands of CPU nodes have replied and this many
 * seconds have passed since the first; above OVERLOAD_AUTO_SHARE starved
 * (and at least OVERLOAD_AUTO_MIN_STARVED commands) the run needs dilation. */
#define OVERLOAD_PROBE_COMMANDS 40
/* Each node's first timed commands are its set-up (data, model, the first
 * step's allocations), which every node makes at once before the steady
 * state the run's dilation is for: the probe skips them. */
#define OVERLOAD_PROBE_SKIP 3
#define OVERLOAD_PROBE_S 1.0
#define OVERLOAD_AUTO_SHARE 0.02
#define OVERLOAD_AUTO_MIN_STARVED 2

/* The data plane (overload_note_links): every round of link samples (once
 * per emulated second) says how much of its rate / D the busiest link
 * direction carried and how much CPU the run's own data plane took (its
 * linkd processes, and its peers' system time: TCP, sendfile, recv); the
 * account adds the host's CPU over the same wall time (/proc/stat). A
 * sample is active when the data plane worked: its busiest direction
 * carried OVERLOAD_DP_ACTIVE_UTIL of its rate, or its CPU passed
 * OVERLOAD_DP_ACTIVE_CORES (over the links' busy time where they had some,
 * as the share: at D = 24 a training's rounds took 0.05-0.1 of a core per
 * second and 0.6-1.3 while busy) while the links carried something
 * (OVERLOAD_DP_ACTIVE_MIN_UTIL: the peers' start is system time too). Over the active samples, the
 * data plane was too much for the host when the busiest share's upper quartile over time (a sample
 * that a phase began or ended inside falls short, and phases are a few samples long) stayed under
 * OVERLOAD_DP_KEPT of the rate while the host's CPU was OVERLOAD_DP_BUSY busy (or the run's data
 * plane took OVERLOAD_DP_OWN_SHARE of its cores, or one linkd process, one event loop that cannot
 * use a second core, was that busy on its own: on a host of many cores it saturates long before the
 * host does) and the run's data plane itself took OVERLOAD_DP_OWN_CORES: links short of their rate
 * on an idle host are the emulation's own (windows, queues, loss), and on a host busy with other
 * programs a data plane that costs little is not what slowed them. The dilation that gives it room:
 * the run's x OVERLOAD_DP_MARGIN / the carried share (the host's forwarding at its limit carried
 * that share; at D' it is asked for D / D' of it). */
#define OVERLOAD_DP_ACTIVE_UTIL 0.5
#define OVERLOAD_DP_ACTIVE_CORES 0.1
#define OVERLOAD_DP_ACTIVE_MIN_UTIL 0.001
#define OVERLOAD_DP_KEPT 0.9
#define OVERLOAD_DP_BUSY 0.85
#define OVERLOAD_DP_OWN_CORES 0.6
/* ... and the host counts as saturated by the run itself when its data
 * plane took this share of the cores (a 2-core host forwarding 100 Gbit/s
 * flows for 32 workers: 1.5 cores of data plane, the host 84.5% busy;
 * tools/bench/workloads, docs/fidelity.md). */
#define OVERLOAD_DP_OWN_SHARE 0.5
#define OVERLOAD_DP_MARGIN 1.5
/* A data plane that waits to run while its links are behind is starved,
 * whoever holds the cores (other programs, or `nice` on the run): one
 * hiernet-linkd process that waited on a run queue (/proc/PID/schedstat's
 * second field) for at least this share of the active samples' wall time,
 * while the links had a backlog (OVERLOAD_DP_BACKLOG) and fell short of
 * OVERLOAD_DP_KEPT, is limited by the host whatever the CPU shares say:
 * the CPU it got is no measure of its demand then. speedup_model's
 * ResNet-50 ring (4 workers, 10 Gbit/s) under `nice -n 10` beside 4 busy
 * loops carried 4.5% of its rate with linkd on 1-2% of a core and waiting
 * 93-95% of the time, and the CPU shares (0.25 cores, "a small load") kept
 * D = 1 for a model error of +563% (docs/fidelity.md, "Starved by others
 * or by nice"). A sample whose linkd waited this much with a backlog is
 * active too (it had work), whatever CPU it got. Over whole samples, not
 * the links' busy phases, whose few tenths would magnify a light link's
 * short waits. At dilation 1 only: once dilated, a linkd's frames come
 * close enough to its wake-up lead that it polls for the next release
 * (emu/linkd/forward.c), runnable without being behind, so its wait no
 * longer tells starved from polling (the same run's rerun at D = 100: 71%
 * waiting, 0.13 cores for 18 Mbit/s, where D = 1 forwarded 200 Mbit/s on
 * 0.02); a rerun is judged by the CPU shares as before, and starvation
 * alone does not raise it. */
#define OVERLOAD_DP_WAIT 0.5
/* ... while its links had a backlog: some direction's queue reached this
 * many frames in the window. A linkd that forwards light traffic wakes for
 * every frame and, niced on a busy host, waits at each wake-up too (two
 * 20 Mbit/s UDP flows over 10 Gbit/s links under `nice -n 10` beside 2 busy
 * loops: 90% of the time waiting, 1000-2000 wake-ups a second, the queues
 * 24 frames at most), but its frames do not pile up; the starved ResNet-50
 * ring's queues reached 160 frames in the first second and 1650 over the
 * run. */
#define OVERLOAD_DP_BACKLOG 64
/* The probe's data-plane window closes after this many active samples. */
#define OVERLOAD_DP_PROBE_SAMPLES 3
/* A rerun at the probe's D judges its own data-plane window again and may
 * start once more, at most this many reruns in all: the share carried at
 * dilation 1 overstates what the host forwards once dilated (32 workers at
 * 100 Gbit/s: 4.5% carried at D = 1 chose D = 34, whose Cu came to 1.32x
 * its bound: tools/bench/workloads, docs/fidelity.md), and the share
 * measured at the rerun's own D is the better estimate. Each rerun starts
 * the whole scenario again and its window takes about 3 x D wall seconds:
 * two bound the wall time. */
#define OVERLOAD_AUTO_RERUNS 2
/* A first window whose links carried under OVERLOAD_DP_KEPT of their rate
 * while the verdict would keep D (the host had room, or the run's data
 * plane looked a small load) does not infer whose the shortfall was from
 * CPU shares, which mislead on a loaded host (an 8-worker run at 100
 * Gbit/s kept D = 1 twice, host 66% and 100% busy, Cu 13x and 20x its
 * bound; docs/fidelity.md): it tests it. The run starts again at the
 * dilation the limited verdict would have chosen, and that rerun's window
 * compares the share of rate / D its busiest link carried with the first
 * one's. Risen to OVERLOAD_DP_RISE times it and by OVERLOAD_DP_RISE_MIN
 * (or to OVERLOAD_DP_KEPT): the host was the limit, the tested D stays.
 * Not: the shortfall is the emulation's own (windows, queues, loss) and
 * the scenario starts once more at the first run's D. Two reruns at most,
 * so only a share under OVERLOAD_DP_TEST_BELOW is tested. */
#define OVERLOAD_DP_RISE 2.0
#define OVERLOAD_DP_RISE_MIN 0.1
/* Only a share this far below the rate is worth a test's two reruns: the
 * 100 Gbit/s runs above carried 2-6%, the quickstart's short bursts of
 * gradients 34% (the upper quartile of one-second samples) on a host 93%
 * busy, which a test at D = 5 confirmed were the emulation's own. */
#define OVERLOAD_DP_TEST_BELOW 0.25
/* ... and only where the CPU shares are ambiguous: the host at least this
 * busy and the run's data plane on at least OVERLOAD_DP_TEST_OWN_CORES
 * (the two 8-worker windows: 66% and 0.65 cores, 100% and 0.36). A host
 * with room to spare was not the limit, and a run whose data plane took
 * less than that (a compute-bound training whose links idle) is not
 * restarted for a test: auto must not dilate a run the host keeps up with. */
#define OVERLOAD_DP_TEST_HOST_BUSY 0.6
#define OVERLOAD_DP_TEST_OWN_CORES 0.3

/* The share is judged over a direction's busy phases, not whole rounds: a
 * training's links idle while it computes, so a round's share of the rate
 * is diluted by the compute's time (8 workers, ResNet-50 at 100 Gbit/s,
 * D = 24: 8% of rate / D per round for a Cu 1.04x its bound, which the
 * test took for no rise). Between rounds the counters are read every
 * OVERLOAD_DP_SUB_PERIOD_S of wall time (a phase at this host's limit is
 * seconds long: 2-3 s for that run's gradients at D = 1 and at D = 24). A
 * sub-sample is busy when it carried at least OVERLOAD_DP_SUB_FLOOR of the
 * round's busiest sub-sample, or of the rate where that one seemed to carry
 * more (a late reply's short interval; a control message between phases is
 * orders below a phase); in a run of OVERLOAD_DP_SUB_EDGES or more busy
 * sub-samples the first and last are left out, since a phase began or
 * ended inside them, unless the run begins or ends the round (traffic
 * through the round's boundary has no edge there). */
#define OVERLOAD_DP_SUB_PERIOD_S 0.1
#define OVERLOAD_DP_SUB_FLOOR 0.1
#define OVERLOAD_DP_SUB_EDGES 3

/* One sub-sample of a direction: what it carried and could carry. */
struct overload_sub {
    double bits;     /* delivered */
    double capacity; /* its rate / D x wall_s */
    double wall_s;
};
/* The share of its capacity a direction carried over its busy sub-samples
 * (the rule above) and their wall seconds into *busy_s; 0 when nothing
 * was carried, -1 without capacity. Pure: the unit tests feed it. */
double overload_busy_share(const struct overload_sub *s, size_t n, double *busy_s);

/* One round of link samples (netrun_dataplane.c). */
struct overload_links {
    double wall_s;   /* wall seconds since the previous round */
    double util_max; /* the busiest direction's carried bits / (its rate / D x wall_s); -1: no rated
                        link */
    double util_busy;  /* that direction's share over its busy phases (overload_busy_share; -1:
                          unknown, util_max stands) */
    double busy_s;     /* the wall seconds of those phases */
    double own_cpu_s;  /* CPU seconds of the run's data plane over wall_s */
    double linkd_busy; /* the busiest linkd process's CPU seconds / wall_s (0: none) */
    double linkd_wait; /* the longest run-queue wait of a linkd process (/proc/PID/schedstat)
                          / wall_s (-1: unknown or no linkd) */
    double queue_peak; /* the longest queue of any link direction since the previous round, frames
                          (linkd's; -1: unknown) */
    double dilation;   /* the run's (0 or 1: none): starvation is judged at 1 only */
};

/* The data plane's figures over active samples, and the verdict. */
struct overload_dataplane {
    uint64_t samples;               /* active samples */
    double active_s;                /* wall seconds they covered */
    double link_utilization;        /* the busiest direction's share of rate / D over its busy
                                       phases, upper quartile over their time (-1: none) */
    double link_utilization_rounds; /* the same over whole rounds, as judged before (-1: none) */
    double host_busy;               /* the host's busy share over the active rounds (-1: unknown) */
    double own_cores;  /* the run's data plane CPU over the links' busy time, cores (at most
                          host_cores) */
    double linkd_busy; /* the busiest linkd's share of its core over the same time */
    double linkd_wait; /* a linkd's run-queue wait over the active samples' wall time, share
                          (-1: unknown) */
    double queue_peak; /* the longest queue of a link direction, frames (-1: unknown) */
    int host_cores;    /* 0: unknown (own_cores alone never saturates) */
    bool limited;      /* links short of their rate, host busy, the data plane a load, or starved */
    bool starved;      /* linkd_wait and queue_peak past their bars (links short or not), at
                          dilation 1 only */
    double suggested_dilation; /* the run's when not limited */
};

struct overload;

struct overload_report {
    double host_cpu_saturation; /* busy share of all cores over the run, 0..1 (-1: unknown) */
    double host_cpu_peak;       /* the highest one-second sample */
    int host_cores;
    uint64_t commands, overruns; /* compute commands of every node */
    double overrun_share;        /* overruns / commands (0 without commands) */
    uint64_t starved;            /* overruns that CPU time + run-queue delay explain */
    double starved_share;        /* starved / commands */
    double cpu_demand;    /* peak sum of the speeds of live CPU nodes that computed, per core */
    double compute_share; /* the compute commands' CPU time / (wall time x cores) (-1: unknown) */
    char worst_node[96];  /* highest overrun share ("" without overruns) */
    double worst_node_overrun_share;
    double stretch_p95;        /* (CPU time + run-queue delay) / emulated budget, 95th percentile
                                  over commands (1 for those not starved) */
    double dilation;           /* the run's */
    double suggested_dilation; /* the run's when it was not CPU-limited */
    bool limited; /* starved_share > OVERLOAD_WARN_SHARE, compute_share >= OVERLOAD_OWN_SHARE */
    bool latency; /* starved as often, but the run's compute used less: others' load */
    bool waited;  /* neither, but overrun_share > OVERLOAD_WARN_SHARE: the overruns waited */
    struct overload_dataplane dataplane; /* the run's data plane (suggested_dilation covers it) */
    struct linkd_stalls linkd_stalls; /* the run's linkd processes, agents' too (linkd_stalls.h) */
};

/* Starts the host account now; samples once per second on loop. */
struct overload *overload_new(struct ev_loop *loop);
void overload_free(struct overload *o);

/* A node whose compute commands are counted; returns its id (or -1 when
 * out of memory: its commands then go uncounted). cpu_device: a node
 * computing on the CPU (a GPU's time is not CPU time: no stretch). */
int overload_add_node(struct overload *o, const char *network, const char *node, double speed,
                      bool cpu_device);
/* Node id's network stopped (false) or started again (true): a stopped
 * node's speed leaves the CPU demand (nodes start live). */
void overload_node_live(struct overload *o, int id, bool live);
/* One reply of node id: counted when it carries the worker's fields
 * (ms, cpu_ms, overrun). timed: its ms is the compute's (not send's transfer). */
void overload_note_reply(struct overload *o, int id, const msgpack_object *result, bool timed);
/* The same for each command of a batch's result ({results = {...}}): a
 * send's result (it has a transfer id) is counted but not timed. */
void overload_note_batch(struct overload *o, int id, const msgpack_object *result);

void overload_report(struct overload *o, double dilation, struct overload_report *r);
/* The verdict from r's counts (dilation, shares, cpu_demand, compute_share)
 * and the 95th percentile of the needed dilations: stretch_p95, limited,
 * latency, waited, suggested_dilation. Pure: the unit tests feed it fixed inputs. */
void overload_judge(struct overload_report *r, double need_p95);
/* The report as a JSON object. */
void overload_write_json(FILE *f, const struct overload_report *r);
/* One round of the data plane's samples; the probe's data-plane window
 * counts it too. */
void overload_note_links(struct overload *o, const struct overload_links *s);
/* Stalls of a network's linkd processes are watched at threshold_s
 * (linkd_stall_threshold), and one happened (linkd_stalls.h): counted, and
 * passed to the hook when one is set (an agent sends its part's on). */
void overload_watch_stalls(struct overload *o, double threshold_s);
void overload_note_stall(struct overload *o, const struct linkd_stall *st);
typedef void (*overload_stall_fn)(void *ctx, const struct linkd_stall *st);
void overload_on_stall(struct overload *o, overload_stall_fn fn, void *ctx);
/* A linkd starved of CPU (OVERLOAD_DP_WAIT, _BACKLOG): false at d > 1. */
bool overload_dp_starved(double linkd_wait, double queue_peak, double d);
/* The verdict from dp's figures at dilation d. Pure: the unit tests feed it. */
void overload_judge_dataplane(struct overload_dataplane *dp, double d);
/* The figures as a JSON object. */
void overload_write_dataplane_json(FILE *f, const struct overload_dataplane *dp);

/* Automatic dilation: what the probe window measured and the choice. */
struct overload_auto {
    double dilation;  /* >= 1; 1 keeps the run as it is */
    double window_s;  /* wall seconds from the window's first command to its close */
    char reason[640]; /* one line: the figures behind the choice */
    bool dataplane;   /* the data plane's window (figures in dp), not the compute's */
    struct overload_dataplane dp;
    /* dilation is a test (OVERLOAD_DP_RISE): a rerun there judges its window
     * with overload_choose_tested against base_utilization at base_dilation */
    bool test;
    double base_dilation, base_utilization;
};
typedef void (*overload_probe_fn)(void *ctx, const struct overload_auto *choice);
/* Watches the next timed compute commands (from the first one on) as a
 * probe window and calls fn once when it closes (on the loop, from the
 * reply that closed it); and the next OVERLOAD_DP_PROBE_SAMPLES active
 * data-plane samples as a window of their own, calling fn once more when
 * it closes (choice->dataplane set). Arming an armed or finished probe
 * does nothing. */
void overload_probe_arm(struct overload *o, overload_probe_fn fn, void *ctx);
/* A rerun's probe: the data plane's window alone, judged at the run's
 * dilation d (fn's choice->dilation is then d or more). */
void overload_probe_arm_dataplane(struct overload *o, overload_probe_fn fn, void *ctx, double d);
/* Stops watching without a call (teardown). */
void overload_probe_disarm(struct overload *o);
/* Whether an armed probe has not closed yet; its figures so far in
 * choice (the run ended inside the window). */
bool overload_probe_open(struct overload *o, struct overload_auto *choice);
/* The choice from a window's counts (w as overload_judge reads it: dilation
 * 1, commands, starved, starved_share, cpu_demand, compute_share,
 * host_cpu_saturation) and
 * its 95th percentile of needed dilation. Pure: the unit tests feed it. */
void overload_choose(const struct overload_report *w, double need_p95, double window_s,
                     struct overload_auto *choice);
/* The data plane's choice from a window's figures at the run's dilation d
 * (1 in the first run, the chosen D in a rerun). Pure. */
void overload_choose_dataplane(const struct overload_dataplane *w, double d,
                               struct overload_auto *choice);

/* A tested rerun's choice (OVERLOAD_DP_RISE): its window w at dilation d
 * against the share base_util carried at base_d. Risen: d, or more when w is
 * limited at d; not: base_d (choice->dilation below d). Pure. */
void overload_choose_tested(const struct overload_dataplane *w, double d, double base_d,
                            double base_util, struct overload_auto *choice);
/* Whether the carried share util rose materially above base_util. Pure. */
bool overload_dp_rose(double base_util, double util);
/* A tested rerun's probe: overload_probe_arm_dataplane, judged by
 * overload_choose_tested against base_util carried at base_d. */
void overload_probe_arm_tested(struct overload *o, overload_probe_fn fn, void *ctx, double d,
                               double base_d, double base_util);

/* The end-of-run line: the warning when the run was CPU-limited, a note
 * when its overruns were others' load or waits; false otherwise. */
bool overload_warning(const struct overload_report *r, char *buf, size_t len);
