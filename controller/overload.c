/* overload.c — the run's overload account (see overload.h). */
#include "controller/overload.h"

#include "common/json.h"
#include "controller/run.h"
#include "proto/protocol.h"
#include "proto/names.h"

#include "common/clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Histogram of the dilation each command needed: bin i holds
 * [STRETCH_STEP^i, STRETCH_STEP^(i+1)). */
#define STRETCH_STEP 1.05
#define STRETCH_BINS 160

struct cpu_sample {
    uint64_t busy, total; /* jiffies of all cores */
    bool valid;
};

struct overload_node {
    char name[2 * HN_NODE_NAME_SIZE]; /* "network/node" */
    double speed;
    bool cpu_device;
    uint64_t commands, overruns, starved;
    uint64_t timed; /* timed compute commands: the probe skips the first ones */
    bool computed;  /* ran a timed compute command: its speed is CPU demand */
    bool live;      /* its network runs (overload_node_live) */
};

/* The busiest direction's share of its rate, bins of UTIL_BIN up to
 * UTIL_BINS x UTIL_BIN (the last bin holds what is above). */
#define UTIL_BIN 0.01
#define UTIL_BINS 200

/* The data plane's active samples: what overload_dataplane is made of. */
struct dp_account {
    uint64_t samples;
    double active_s;
    double util_s[UTIL_BINS];      /* wall seconds of rated samples per share carried */
    double util_busy_s[UTIL_BINS]; /* busy seconds per share carried over them */
    double own_s;                  /* the run's data plane CPU seconds */
    double busy_s;                 /* the busiest directions' busy seconds (overload_busy_share) */
    double linkd_s;                /* the busiest linkd's CPU seconds, sample by sample */
    double wait_s;                 /* a linkd's longest run-queue wait, sample by sample */
    uint64_t wait_unknown;         /* samples without it */
    double queue_peak;             /* the longest queue, frames (-1: never read) */
    uint64_t busy, total;          /* the host's jiffies */
};

/* The automatic dilation's window: the first timed compute commands. */
struct probe {
    overload_probe_fn fn;
    void *ctx;
    bool armed, closed;
    uint64_t commands, starved;
    uint64_t need[STRETCH_BINS];
    double cpu_ms;   /* the window's compute CPU time */
    double first_ms; /* mono_ms() of the window's first command */
    struct cpu_sample host_first;
    struct dp_account dp; /* the data plane's window */
    bool dp_closed;
    double dp_dilation; /* the run's, which the data plane's window is judged at */
    /* a tested rerun (overload_probe_arm_tested): the first window's share
     * and dilation; dp_base_util < 0 otherwise */
    double dp_base_d, dp_base_util;
};

struct overload {
    struct ev_loop *loop;
    ev_timer sampler;
    struct cpu_sample first, last;
    double peak;
    struct overload_node *nodes;
    size_t n_nodes, cap_nodes;
    /* every timed command of a CPU node: the dilation that would have
     * covered its CPU time and run-queue delay (0 when not starved) */
    uint64_t need[STRETCH_BINS];
    /* Sum of the speeds of live nodes that computed, now and at its peak:
     * networks run one after another do not compute at once. */
    double demand_now, demand_peak;
    double start_ms, cpu_ms; /* mono_ms() at the start; timed compute's CPU time since */
    struct probe probe;
    struct dp_account dp;      /* every active data-plane sample of the run */
    struct cpu_sample dp_last; /* /proc/stat at the previous round of link samples */
    struct linkd_stalls stalls;
    overload_stall_fn on_stall; /* overload_on_stall's hook, or NULL */
    void *on_stall_ctx;
};

/* ---- the host: /proc/stat ---- */

static struct cpu_sample read_cpu(void)
{
    struct cpu_sample s = {0};
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return s;
    unsigned long long v[8] = {0}; /* user nice system idle iowait irq softirq steal */
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got < 4) return s;
    s.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* guest time is inside user */
    s.total = s.busy + v[3] + v[4];
    s.valid = true;
    return s;
}

static double busy_share(const struct cpu_sample *a, const struct cpu_sample *b)
{
    if (!a->valid || !b->valid || b->total <= a->total) return -1;
    return (double)(b->busy - a->busy) / (double)(b->total - a->total);
}

static void on_sample(EV_P_ ev_timer *w, int revents)
{
    struct overload *o = w->data;
    struct cpu_sample now = read_cpu();
    double share = busy_share(&o->last, &now);
    if (share > o->peak) o->peak = share;
    if (now.valid) o->last = now;
}

struct overload *overload_new(struct ev_loop *loop)
{
    struct overload *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->loop = loop;
    o->first = o->last = o->dp_last = read_cpu();
    o->start_ms = mono_ms();
    o->peak = -1;
    ev_timer_init(&o->sampler, on_sample, 1.0, 1.0);
    o->sampler.data = o;
    ev_timer_start(loop, &o->sampler);
    ev_unref(loop); /* sampling never keeps a run alive */
    return o;
}

void overload_free(struct overload *o)
{
    if (!o) return;
    ev_ref(o->loop);
    ev_timer_stop(o->loop, &o->sampler);
    free(o->nodes);
    free(o);
}

/* ---- the peers ---- */

int overload_add_node(struct overload *o, const char *network, const char *node, double speed,
                      bool cpu_device)
{
    if (o->n_nodes == o->cap_nodes) {
        size_t cap = o->cap_nodes ? 2 * o->cap_nodes : 64;
        struct overload_node *grown = realloc(o->nodes, cap * sizeof *grown);
        if (!grown) return -1;
        o->nodes = grown;
        o->cap_nodes = cap;
    }
    struct overload_node *n = &o->nodes[o->n_nodes];
    *n = (struct overload_node){
        .speed = speed > 0 ? speed : 1, .cpu_device = cpu_device, .live = true};
    snprintf(n->name, sizeof n->name, "%s/%s", network, node);
    return (int)o->n_nodes++;
}

void overload_node_live(struct overload *o, int id, bool live)
{
    if (!o || id < 0 || (size_t)id >= o->n_nodes) return;
    struct overload_node *n = &o->nodes[id];
    if (n->live == live) return;
    n->live = live;
    if (n->computed) o->demand_now += live ? n->speed : -n->speed;
    if (o->demand_now > o->demand_peak) o->demand_peak = o->demand_now;
}

/* A node's first timed compute command: its speed joins the demand. */
static void node_computes(struct overload *o, struct overload_node *n)
{
    if (n->computed) return;
    n->computed = true;
    if (!n->live) return;
    o->demand_now += n->speed;
    if (o->demand_now > o->demand_peak) o->demand_peak = o->demand_now;
}

static int stretch_bin(double need)
{
    if (!(need > 1)) return 0;
    int bin = (int)floor(log(need) / log(STRETCH_STEP));
    return bin < STRETCH_BINS ? bin : STRETCH_BINS - 1;
}

/* The dilation under which a starved command's CPU time and run-queue
 * delay would have fitted its budget (dilation * cpu_ms / speed). Its
 * blocked time is not in it: more dilation does not shorten a wait. No
 * run-queue delay (or none reported) leaves the CPU time alone: a node
 * faster than the host (speed 2) needs dilation 2 without any wait. */
static double needed_dilation(struct proto_args *args, double speed)
{
    double cpu_ms = 0, delay_ms = 0;
    if (proto_arg_f64(args, "cpu_ms", &cpu_ms) != 1 || !(cpu_ms > 0)) return 0;
    if (proto_arg_f64(args, "run_delay_ms", &delay_ms) != 1 || !(delay_ms > 0)) delay_ms = 0;
    return (cpu_ms + delay_ms) * speed / cpu_ms;
}

/* The p-quantile of the needed dilations (a bin's upper end; 1 in bin 0). */
static double need_percentile(const uint64_t need[STRETCH_BINS], double p)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < STRETCH_BINS; i++)
        total += need[i];
    if (!total) return 1;
    for (int i = 0; i < STRETCH_BINS; i++) {
        seen += need[i];
        if ((double)seen >= p * (double)total) return i ? pow(STRETCH_STEP, i + 1) : 1;
    }
    return pow(STRETCH_STEP, STRETCH_BINS);
}

/* The dilation that covers a stretch (the p95 needed over the run's d),
 * with margin, bounded by the CPU demand: every computing node at once at
 * dilation D asks for cpu_demand / D of the cores, so beyond
 * max(d, cpu_demand) the CPU stops being short. */
static double suggest_dilation(double d, double stretch, double cpu_demand)
{
    double by_stretch = ceil(d * stretch * OVERLOAD_DILATION_MARGIN);
    double by_demand = ceil((cpu_demand > d ? cpu_demand : d) * OVERLOAD_DILATION_MARGIN);
    return by_stretch < by_demand ? by_stretch : by_demand;
}

/* ---- the automatic dilation's probe ---- */

static int host_cores(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

/* cpu_ms of CPU time over wall_ms on every core of the host. */
static double compute_share(double cpu_ms, double wall_ms, int cores)
{
    return wall_ms > 0 ? cpu_ms / (wall_ms * cores) : -1;
}

/* The window's counts as a report overload_choose reads. */
static void probe_report(const struct overload *o, struct overload_report *w)
{
    const struct probe *p = &o->probe;
    memset(w, 0, sizeof *w);
    w->dilation = 1;
    w->host_cores = host_cores();
    w->commands = p->commands;
    w->starved = p->starved;
    w->starved_share = p->commands ? (double)p->starved / (double)p->commands : 0;
    w->cpu_demand = o->demand_peak / w->host_cores;
    w->compute_share = compute_share(p->cpu_ms, mono_ms() - p->first_ms, w->host_cores);
    struct cpu_sample now = read_cpu();
    w->host_cpu_saturation = busy_share(&p->host_first, &now);
}

static void probe_choice(const struct overload *o, struct overload_auto *choice)
{
    struct overload_report w;
    probe_report(o, &w);
    double window_s = o->probe.commands ? (mono_ms() - o->probe.first_ms) / 1e3 : 0;
    overload_choose(&w, need_percentile(o->probe.need, 0.95), window_s, choice);
}

/* One timed compute command of a CPU node: counted while the window is
 * open (a node's set-up commands only for their CPU time, which the
 * window's compute share holds), and the window closes (fn called once)
 * when it has enough. */
static void probe_note(struct overload *o, int bin, bool starved, double cpu_ms, bool setup)
{
    struct probe *p = &o->probe;
    if (!p->armed || p->closed || (setup && !p->commands)) return;
    p->cpu_ms += cpu_ms;
    if (setup) return;
    if (!p->commands) {
        p->first_ms = mono_ms();
        p->host_first = read_cpu();
    }
    p->commands++;
    p->starved += starved;
    p->need[bin]++;
    if (p->commands < OVERLOAD_PROBE_COMMANDS || mono_ms() - p->first_ms < OVERLOAD_PROBE_S * 1e3)
        return;
    p->closed = true;
    struct overload_auto choice;
    probe_choice(o, &choice);
    p->fn(p->ctx, &choice);
}

void overload_probe_arm(struct overload *o, overload_probe_fn fn, void *ctx)
{
    if (!o || !fn || o->probe.armed) return;
    o->probe.armed = true;
    o->probe.fn = fn;
    o->probe.ctx = ctx;
    o->probe.dp_dilation = 1;
    o->probe.dp_base_util = -1;
}

void overload_probe_arm_dataplane(struct overload *o, overload_probe_fn fn, void *ctx, double d)
{
    if (!o || !fn || o->probe.armed) return;
    overload_probe_arm(o, fn, ctx);
    o->probe.closed = true; /* the compute window's choice was made at dilation 1 */
    o->probe.dp_dilation = d > 1 ? d : 1;
}

void overload_probe_arm_tested(struct overload *o, overload_probe_fn fn, void *ctx, double d,
                               double base_d, double base_util)
{
    if (!o || !fn || o->probe.armed) return;
    overload_probe_arm_dataplane(o, fn, ctx, d);
    o->probe.dp_base_d = base_d;
    o->probe.dp_base_util = base_util >= 0 ? base_util : 0;
}

void overload_probe_disarm(struct overload *o)
{
    if (o) o->probe.closed = o->probe.dp_closed = true;
}

bool overload_probe_open(struct overload *o, struct overload_auto *choice)
{
    if (!o || !o->probe.armed || o->probe.closed) return false;
    probe_choice(o, choice);
    return true;
}

/* Whether starvation was the run's own: its compute filled a real share of
 * the cores (unknown counts as its own, the judgment before it was known). */
static bool own_starvation(const struct overload_report *r)
{
    return !(r->compute_share >= 0 && r->compute_share < OVERLOAD_OWN_SHARE);
}

void overload_choose(const struct overload_report *w, double need_p95, double window_s,
                     struct overload_auto *choice)
{
    /* Callers pass a fresh struct: nothing of it may be left unset
     * (run.json's dilation.dataplane once read an unset dp). */
    *choice = (struct overload_auto){0};
    choice->window_s = window_s;
    choice->dilation = 1;
    if (!w->commands) {
        snprintf(choice->reason, sizeof choice->reason, "no compute command to measure");
        return;
    }
    char host[32] = "unknown";
    if (w->host_cpu_saturation >= 0)
        snprintf(host, sizeof host, "%.0f%% busy", 100 * w->host_cpu_saturation);
    int n = snprintf(choice->reason, sizeof choice->reason,
                     "%llu compute commands in %.1f s: %.1f%% starved of CPU, their compute "
                     "%.1f%% of the cores (host %s, CPU demand %.2f per core)",
                     (unsigned long long)w->commands, window_s, 100 * w->starved_share,
                     w->compute_share >= 0 ? 100 * w->compute_share : 0, host, w->cpu_demand);
    size_t used = n > 0 && (size_t)n < sizeof choice->reason ? (size_t)n : 0;
    char *rest = choice->reason + used;
    size_t left = sizeof choice->reason - used;
    if (w->starved_share <= OVERLOAD_AUTO_SHARE || w->starved < OVERLOAD_AUTO_MIN_STARVED) {
        snprintf(rest, left, ": the host keeps up");
        return;
    }
    if (!own_starvation(w)) {
        snprintf(rest, left, ": others' load and scheduling latency, which dilation does not cure");
        return;
    }
    /* The warning's rule from a lower share (a probe is short): at least
     * 2, since the margin rounds any stretch up. */
    double stretch = need_p95 > 1 ? need_p95 : 1;
    double d = suggest_dilation(1, stretch, w->cpu_demand);
    choice->dilation = d < HN_DILATION_MAX ? d : HN_DILATION_MAX;
    snprintf(rest, left,
             ": their p95 needed %.2fx; dilation %g (at most the CPU demand's, with margin)",
             stretch, choice->dilation);
}

void overload_note_reply(struct overload *o, int id, const msgpack_object *result, bool timed)
{
    if (!o || id < 0 || (size_t)id >= o->n_nodes || result->type != MSGPACK_OBJECT_MAP) return;
    struct proto_args args;
    proto_args_init(&args, result);
    bool overrun = false, starved = false;
    if (proto_arg_bool(&args, "overrun", &overrun) != 1) return; /* not a compute command */
    if (proto_arg_bool(&args, "starved", &starved) != 1) starved = overrun;
    starved = starved && overrun;
    struct overload_node *n = &o->nodes[id];
    n->commands++;
    n->overruns += overrun;
    n->starved += starved;
    if (!timed || !n->cpu_device) return;
    node_computes(o, n);
    int bin = stretch_bin(starved ? needed_dilation(&args, n->speed) : 0);
    o->need[bin]++;
    double cpu_ms = 0;
    if (proto_arg_f64(&args, "cpu_ms", &cpu_ms) != 1 || !(cpu_ms > 0)) cpu_ms = 0;
    o->cpu_ms += cpu_ms;
    probe_note(o, bin, starved, cpu_ms, ++n->timed <= OVERLOAD_PROBE_SKIP);
}

void overload_note_batch(struct overload *o, int id, const msgpack_object *result)
{
    if (!o || result->type != MSGPACK_OBJECT_MAP) return;
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *list = proto_args_get(&args, "results");
    if (!list || list->type != MSGPACK_OBJECT_ARRAY) return;
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        const msgpack_object *r = &list->via.array.ptr[i];
        if (r->type != MSGPACK_OBJECT_MAP) continue;
        struct proto_args ra;
        proto_args_init(&ra, r);
        overload_note_reply(o, id, r, proto_args_get(&ra, "transfer") == NULL);
    }
}

/* ---- the data plane ---- */

static void util_bin_add(double *bins, double util, double seconds)
{
    /* Clamped as a double: a share past INT_MAX bins would overflow the cast. */
    double bin = util / UTIL_BIN;
    bins[bin < UTIL_BINS ? (int)bin : UTIL_BINS - 1] += seconds;
}

static void dp_add(struct dp_account *a, const struct overload_links *s,
                   const struct cpu_sample *before, const struct cpu_sample *now)
{
    if (!a->samples++) a->queue_peak = -1; /* the account starts zeroed: 0 would be a reading */
    a->active_s += s->wall_s;
    a->own_s += s->own_cpu_s;
    a->linkd_s += s->linkd_busy * s->wall_s;
    if (s->queue_peak > a->queue_peak) a->queue_peak = s->queue_peak;
    if (s->linkd_wait >= 0)
        a->wait_s += s->linkd_wait * s->wall_s;
    else
        a->wait_unknown++;
    if (s->util_max >= 0) util_bin_add(a->util_s, s->util_max, s->wall_s);
    /* A round without sub-samples (the first, a beat a slow linkd skipped,
     * a direction linkd does not count) is its own one sub-sample, as on
     * the kernel backend: its CPU is in own_s either way, so its time
     * must be in busy_s too, or the cores over busy time come out high. */
    if (s->util_busy >= 0) {
        a->busy_s += s->busy_s;
        util_bin_add(a->util_busy_s, s->util_busy, s->busy_s);
    } else if (s->util_max >= 0) {
        a->busy_s += s->wall_s;
        util_bin_add(a->util_busy_s, s->util_max, s->wall_s);
    }
    a->busy += now->busy - before->busy;
    a->total += now->total - before->total;
}

/* The upper quartile over time of the busiest share carried (a bin's
 * middle; -1 without a rated sample): a phase that began or ended inside a
 * sample leaves that sample short of the rate, and a run's phases are a few
 * samples long, so the quartile of the time the links were busiest is what
 * says whether they could reach their rate. */
static double util_upper_quartile(const double *bins)
{
    double total = 0, seen = 0;
    for (int i = 0; i < UTIL_BINS; i++)
        total += bins[i];
    if (!(total > 0)) return -1;
    for (int i = 0; i < UTIL_BINS; i++) {
        seen += bins[i];
        if (seen >= 0.75 * total) return (i + 0.5) * UTIL_BIN;
    }
    return UTIL_BINS * UTIL_BIN;
}

static void dp_figures(const struct dp_account *a, struct overload_dataplane *dp)
{
    memset(dp, 0, sizeof *dp);
    dp->samples = a->samples;
    dp->active_s = a->active_s;
    dp->link_utilization_rounds = util_upper_quartile(a->util_s);
    dp->link_utilization = util_upper_quartile(a->util_busy_s);
    /* No busy phase: nothing was carried (0), or no link is rated (-1). */
    if (dp->link_utilization < 0) dp->link_utilization = dp->link_utilization_rounds;
    dp->host_busy = a->total ? (double)a->busy / (double)a->total : -1;
    dp->host_cores = host_cores();
    /* The data plane's CPU goes to moving the bytes, so it is judged over
     * the links' busy time as their share is: over whole seconds a
     * training's compute dilutes it too (at D = 24 the 8-worker run's data
     * plane took 0.1 of a core per second, 0.8 while its links were busy). */
    double over = a->busy_s > 0 ? a->busy_s : a->active_s;
    dp->own_cores = over > 0 ? a->own_s / over : 0;
    if (dp->host_cores > 0 && dp->own_cores > dp->host_cores) dp->own_cores = dp->host_cores;
    dp->linkd_busy = over > 0 ? a->linkd_s / over : 0;
    if (dp->linkd_busy > 1) dp->linkd_busy = 1; /* one event loop: one core at most */
    dp->queue_peak = a->samples ? a->queue_peak : -1;
    dp->linkd_wait = -1;
    if (a->samples && !a->wait_unknown)
        dp->linkd_wait = a->active_s > 0 ? a->wait_s / a->active_s : 0;
    dp->suggested_dilation = 1;
}

/* The probe's data-plane window: fn once it has its samples. */
static void dp_probe_note(struct overload *o, const struct overload_links *s,
                          const struct cpu_sample *before, const struct cpu_sample *now)
{
    struct probe *p = &o->probe;
    if (!p->armed || p->dp_closed) return;
    dp_add(&p->dp, s, before, now);
    if (p->dp.samples < OVERLOAD_DP_PROBE_SAMPLES) return;
    p->dp_closed = true;
    struct overload_dataplane w;
    dp_figures(&p->dp, &w);
    struct overload_auto choice;
    if (p->dp_base_util >= 0)
        overload_choose_tested(&w, p->dp_dilation, p->dp_base_d, p->dp_base_util, &choice);
    else
        overload_choose_dataplane(&w, p->dp_dilation, &choice);
    p->fn(p->ctx, &choice);
}

void overload_watch_stalls(struct overload *o, double threshold_s)
{
    if (o) linkd_stalls_watch(&o->stalls, threshold_s);
}

void overload_note_stall(struct overload *o, const struct linkd_stall *st)
{
    if (!o) return;
    linkd_stalls_note(&o->stalls, st);
    if (o->on_stall) o->on_stall(o->on_stall_ctx, st);
}

void overload_on_stall(struct overload *o, overload_stall_fn fn, void *ctx)
{
    o->on_stall = fn;
    o->on_stall_ctx = ctx;
}

void overload_note_links(struct overload *o, const struct overload_links *s)
{
    if (!o) return;
    struct cpu_sample before = o->dp_last, now = read_cpu();
    if (now.valid) o->dp_last = now;
    if (!(s->wall_s > 0) || !before.valid || !now.valid || now.total < before.total) return;
    double over = s->util_busy >= 0 && s->busy_s > 0 ? s->busy_s : s->wall_s;
    bool starved = overload_dp_starved(s->linkd_wait, s->queue_peak, s->dilation);
    /* starved: its CPU says nothing of its work */
    bool working = s->own_cpu_s >= OVERLOAD_DP_ACTIVE_CORES * over || starved;
    bool active = s->util_max >= OVERLOAD_DP_ACTIVE_UTIL ||
                  (working && s->util_max >= OVERLOAD_DP_ACTIVE_MIN_UTIL);
    if (!active) return;
    dp_add(&o->dp, s, &before, &now);
    dp_probe_note(o, s, &before, &now);
}

/* ---- the report ---- */

static void report_nodes(const struct overload *o, struct overload_report *r)
{
    double worst = -1;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const struct overload_node *n = &o->nodes[i];
        r->commands += n->commands;
        r->overruns += n->overruns;
        r->starved += n->starved;
        double share = n->commands ? (double)n->overruns / (double)n->commands : 0;
        if (n->overruns && share > worst) {
            worst = share;
            const char *slash = strchr(n->name, '/');
            snprintf(r->worst_node, sizeof r->worst_node, "%s", slash ? slash + 1 : n->name);
            r->worst_node_overrun_share = share;
        }
    }
    r->overrun_share = r->commands ? (double)r->overruns / (double)r->commands : 0;
    r->starved_share = r->commands ? (double)r->starved / (double)r->commands : 0;
    r->cpu_demand = o->demand_peak / r->host_cores;
    r->compute_share = compute_share(o->cpu_ms, mono_ms() - o->start_ms, r->host_cores);
}

void overload_report(struct overload *o, double dilation, struct overload_report *r)
{
    memset(r, 0, sizeof *r);
    r->host_cores = host_cores();
    r->dilation = dilation;
    struct cpu_sample now = read_cpu();
    r->host_cpu_saturation = busy_share(&o->first, &now);
    double tail = busy_share(&o->last, &now); /* the part-second since the last sample */
    r->host_cpu_peak = o->peak > tail ? o->peak : tail;
    if (r->host_cpu_peak < r->host_cpu_saturation) r->host_cpu_peak = r->host_cpu_saturation;
    report_nodes(o, r);
    overload_judge(r, need_percentile(o->need, 0.95));
    dp_figures(&o->dp, &r->dataplane);
    r->linkd_stalls = o->stalls;
    overload_judge_dataplane(&r->dataplane, dilation);
    if (r->dataplane.suggested_dilation > r->suggested_dilation)
        r->suggested_dilation = r->dataplane.suggested_dilation;
}

void overload_judge(struct overload_report *r, double need_p95)
{
    double d = r->dilation;
    r->stretch_p95 = need_p95 > d ? need_p95 / d : 1;
    bool starved = r->starved_share > OVERLOAD_WARN_SHARE;
    r->limited = starved && own_starvation(r);
    r->latency = starved && !r->limited;
    r->waited = !starved && r->overrun_share > OVERLOAD_WARN_SHARE;
    r->suggested_dilation = r->limited ? suggest_dilation(d, r->stretch_p95, r->cpu_demand) : d;
}

void overload_write_json(FILE *f, const struct overload_report *r)
{
    fputs("{\"host_cpu_saturation\": ", f);
    json_write_number(f, r->host_cpu_saturation >= 0 ? r->host_cpu_saturation : NAN);
    fputs(", \"host_cpu_peak\": ", f);
    json_write_number(f, r->host_cpu_peak >= 0 ? r->host_cpu_peak : NAN);
    fprintf(f, ", \"host_cores\": %d, \"commands\": %llu, \"overruns\": %llu, \"overrun_share\": ",
            r->host_cores, (unsigned long long)r->commands, (unsigned long long)r->overruns);
    json_write_number(f, r->overrun_share);
    fprintf(f, ", \"starved\": %llu, \"starved_share\": ", (unsigned long long)r->starved);
    json_write_number(f, r->starved_share);
    fputs(", \"cpu_demand\": ", f);
    json_write_number(f, r->cpu_demand);
    fputs(", \"compute_share\": ", f);
    json_write_number(f, r->compute_share >= 0 ? r->compute_share : NAN);
    fputs(", \"worst_node\": ", f);
    json_write_string_or_null(f, r->worst_node);
    fputs(", \"worst_node_overrun_share\": ", f);
    json_write_number(f, r->worst_node_overrun_share);
    fputs(", \"stretch_p95\": ", f);
    json_write_number(f, r->stretch_p95);
    fputs(", \"dilation\": ", f);
    json_write_number(f, r->dilation);
    fputs(", \"suggested_dilation\": ", f);
    json_write_number(f, r->suggested_dilation);
    fprintf(f, ", \"limited\": %s, \"latency\": %s, \"waited\": %s, \"dataplane\": ",
            r->limited ? "true" : "false", r->latency ? "true" : "false",
            r->waited ? "true" : "false");
    overload_write_dataplane_json(f, &r->dataplane);
    fputs(", \"linkd_stalls\": ", f);
    linkd_stalls_write_json(f, &r->linkd_stalls);
    fputc('}', f);
}

bool overload_warning(const struct overload_report *r, char *buf, size_t len)
{
    if (!r->limited && r->dataplane.limited) {
        const struct overload_dataplane *dp = &r->dataplane;
        snprintf(
            buf, len,
            "warning: this run's data plane was limited by the host: its busiest link "
            "carried %.0f%% of its rate while busy, and the host's CPU was %.0f%% busy (the data "
            "plane %.2f cores%s); use slower links, fewer nodes, or dilation = %g",
            100 * dp->link_utilization, 100 * dp->host_busy, dp->own_cores,
            dp->starved ? ", its linkd waiting for a core most of the time" : "",
            dp->suggested_dilation);
        return true;
    }
    if (r->latency) {
        snprintf(buf, len,
                 "note: %.0f%% of compute commands were late behind other threads while this "
                 "run's compute used %.1f%% of the host's cores: others' load and scheduling "
                 "latency, which dilation would not cure (host %.0f%% busy)",
                 100 * r->starved_share, 100 * r->compute_share,
                 r->host_cpu_saturation >= 0 ? 100 * r->host_cpu_saturation : 0);
        return true;
    }
    if (r->waited) {
        snprintf(buf, len,
                 "note: %.0f%% of compute commands overran while waiting, not for a core "
                 "(%.0f%% starved of CPU): the host's CPU did not set this run's times, "
                 "and dilation would not shorten them",
                 100 * r->overrun_share, 100 * r->starved_share);
        return true;
    }
    if (!r->limited) return false;
    snprintf(buf, len,
             "warning: this run was limited by the host's CPU: %.0f%% of compute commands "
             "were starved of CPU; use fewer nodes, lower speeds, or dilation = %g",
             100 * r->starved_share, r->suggested_dilation);
    return true;
}
