/* netrun.c — one started network (see netrun.h); its parts in netrun_*.c
 * share struct netrun through netrun_internal.h. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/link_sampler.h"
#include "controller/host_probe.h"
#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/peer_template.h"
#include "controller/record.h"
#include "controller/registry.h"
#include "controller/tcp_counters.h"
#include "controller/trace_player.h"
#include "topo/address.h"
#include "topo/kernel.h"
#include "topo/shape.h"
#include "proto/protocol.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A Mahimahi schedule in one linkd message (at most 9 bytes an entry in
 * its 4 MiB limit): 400,000 opportunities are 10 minutes at 9.6 Mbit/s. */
#define NETRUN_SCHEDULE_MAX 400000u
const char *netrun_backend(const struct netrun *nr)
{
    return topo_backend_name(nr->backend);
}

const char *netrun_backend_reason(const struct netrun *nr)
{
    return nr->reason;
}

struct peer_client *netrun_peer(const struct netrun *nr, int node)
{
    return nr->peers[node].client;
}

int netrun_node_ns(const struct netrun *nr, int node)
{
    return nr->kernel ? topo_kernel_node_ns(nr->kernel, node) : -1;
}

/* ---- run-time kernel changes, off the loop ----
 *
 * A partition is a netlink request per host of it, each with a route per
 * host of the other group (a heal deletes them and replays the routes): at
 * a few hundred hosts, tens of ms to seconds. So partitions, heals and the
 * kernel backend's link changes run as steps on the build's thread (the
 * build is over by then), one at a time in the order asked; the caller
 * hears of each through its callback, from the loop. That thread alone
 * uses the kernel layer's netlink sockets and its record of the partitions
 * after the build, so two changes never meet there; the loop keeps a view
 * of its own of the partitions asked for (cuts, for netrun_separated). */

static void cuts_free(struct netrun *nr);

static void work_kernel_op(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    struct topo_kernel *k = nr->kernel;
    char *err = op->err;
    size_t len = sizeof op->err;
    if (op->kind == OP_PARTITION)
        op->rc = topo_kernel_partition(k, op->side, err, len);
    else if (op->kind == OP_HEAL)
        op->rc = topo_kernel_heal(k, op->side, NULL, err, len);
    else if (op->kind == OP_LINK_SET)
        op->rc = topo_kernel_link_set_dir(k, op->link, op->dir, &op->params, err, len);
    else
        op->rc = topo_kernel_link_updown(k, op->link, op->up, err, len);
}

/* Tells the caller (result: an empty map) and frees op. */
static void kernel_op_finish(struct kernel_op *op, const char *error)
{
    msgpack_object done = {.type = MSGPACK_OBJECT_MAP};
    op->cb(op->ctx, error, error ? NULL : &done);
    free(op->side);
    free(op);
}

static void kernel_op_done(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    nr->ops = op->next;
    if (!nr->ops)
        nr->ops_tail = NULL;
    else
        job_begin(nr, work_kernel_op, kernel_op_done); /* the next one meanwhile */
    kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
}

/* Queues a copy of *op (its side is taken over); 1: cb follows, or -1. */
int kernel_op_queue(struct netrun *nr, const struct kernel_op *op, peer_reply_fn cb, void *ctx,
                    char *err, size_t errlen)
{
    struct kernel_op *q = malloc(sizeof *q);
    if (!q) {
        free(op->side);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    *q = *op;
    q->cb = cb;
    q->ctx = ctx;
    q->next = NULL;
    bool idle = !nr->ops;
    if (nr->ops_tail)
        nr->ops_tail->next = q;
    else
        nr->ops = q;
    nr->ops_tail = q;
    if (idle) job_begin(nr, work_kernel_op, kernel_op_done);
    return 1;
}

/* A move (netrun_link_move) changes the routing and the kernel on the
 * loop: the changes asked for before it end first, here. The one loop
 * wait left in a run's kernel changes, and only when a move meets changes
 * still under way (a churn's move while a partition or l:set runs). */
static void kernel_ops_settle(struct netrun *nr)
{
    if (!nr->ops) return;
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    nr->job.then = NULL; /* its ev_async finds nothing to do */
    for (bool ran = true; nr->ops; ran = false) {
        struct kernel_op *op = nr->ops;
        if (!ran) work_kernel_op(nr); /* the first one ran on the thread */
        nr->ops = op->next;
        kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
    }
    nr->ops_tail = NULL;
}

/* The release: the change running has ended (joined); the rest never run. */
void kernel_ops_drop(struct netrun *nr)
{
    while (nr->ops) {
        struct kernel_op *op = nr->ops;
        nr->ops = op->next;
        kernel_op_finish(op, "the network was released");
    }
    nr->ops_tail = NULL;
    cuts_free(nr);
}

int link_not_emulated(struct netrun *nr, char *err, size_t errlen)
{
    snprintf(err, errlen, "backend '%s' does not emulate links", netrun_backend(nr));
    return -1;
}

int netrun_link_set(struct netrun *nr, int link, const struct topo_link_params *params,
                    peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct topo_link_params installed; /* the kernel backend dilates its own plans */
    topo_link_params_dilate(params, nr->net->dilation, &installed);
    if (nr->linkd)
        return linkd_client_link_set(linkd_of(nr, link), link, &installed, cb, ctx, err, errlen) < 0
                   ? -1
                   : 1;
    if (!nr->kernel) return link_not_emulated(nr, err, errlen);
    struct kernel_op op = {
        .kind = OP_LINK_SET, .link = link, .dir = TOPO_KERNEL_BOTH, .params = *params};
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* ---- link traces ---- */

static void on_trace_reply(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx;
    (void)result;
    /* linkd refuses nothing a trace sends but for a link it lost: say why */
    if (error) ctl_log("warning: a link trace's change failed: %s", error);
}

/* The link's parameters with a trace's values in: the model's, so that the
 * fields a trace does not carry keep what l:set gave them. */
static struct topo_link_params traced_params(const struct netrun *nr, int link,
                                             const struct topo_trace *t,
                                             const struct topo_trace_sample *now)
{
    struct topo_link_params p = nr->net->links[link].params;
    p.rate_bps = now->rate_bps;
    if (t->has_delay) p.delay_ns = now->delay_ns;
    if (t->has_loss) p.loss = now->loss;
    if (p.queue.bdp > 0) /* a queue of bandwidth-delay products follows the rate */
        p.queue.bytes =
            topo_shape_bdp_bytes(p.queue.bdp, p.rate_bps, 2 * (p.delay_ns + p.jitter_ns),
                                 TOPO_SHAPE_DEFAULT_MTU + TOPO_SHAPE_ETH_HLEN);
    return p;
}

/* A trace's change on the kernel backend, queued behind the kernel
 * changes running off the loop (the thread alone uses the kernel layer's
 * sockets meanwhile). */
struct trace_change {
    struct netrun *nr;
    int link, dir;
    struct topo_link_params params;
};

static void on_trace_change(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct trace_change *c = ctx;
    struct netrun *nr = c->nr;
    if (!error && c->dir == TOPO_KERNEL_BOTH) nr->net->links[c->link].params = c->params;
    if (error && !nr->freeing) {
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[c->link], name, sizeof name);
        ctl_log("warning: link %s: trace: %s", name, error);
    }
    free(c);
}

static void trace_change_queue(struct netrun *nr, const struct netrun_trace_slot *slot,
                               const struct topo_link_params *p)
{
    struct trace_change *c = malloc(sizeof *c);
    char err[128];
    struct kernel_op op = {.kind = OP_LINK_SET, .link = slot->link, .dir = slot->dir, .params = *p};
    if (c) *c = (struct trace_change){nr, slot->link, slot->dir, *p};
    if (!c || kernel_op_queue(nr, &op, on_trace_change, c, err, sizeof err) < 0) {
        free(c);
        ctl_log("warning: a link trace's change was dropped: out of memory");
    }
}

static void apply_trace(void *ctx, const struct topo_trace *t, const struct topo_trace_sample *now)
{
    struct netrun_trace_slot *slot = ctx;
    struct netrun *nr = slot->nr;
    /* Mahimahi on the user backend: linkd's schedule rules, the series is shown */
    if (t->opportunities_ms && nr->linkd) return;
    struct topo_link_params p = traced_params(nr, slot->link, t, now), installed;
    char err[512];
    int rc;
    if (nr->linkd) {
        topo_link_params_dilate(&p, nr->net->dilation, &installed);
        rc = linkd_client_link_set_dir(linkd_of(nr, slot->link), slot->link, slot->dir, &installed,
                                       on_trace_reply, NULL, err, sizeof err);
    } else if (nr->ops) { /* a change runs on the thread: this one goes after it */
        return trace_change_queue(nr, slot, &p);
    } else { /* the thread is idle: a qdisc change or two, here */
        rc = topo_kernel_link_set_dir(nr->kernel, slot->link, slot->dir, &p, err, sizeof err);
    }
    if (rc < 0) {
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[slot->link], name, sizeof name);
        ctl_log("warning: link %s: trace at %.3f s: %s", name, now->t_s, err);
        return;
    }
    if (slot->dir == TOPO_KERNEL_BOTH) nr->net->links[slot->link].params = p;
}

/* A Mahimahi trace's opportunities to linkd, in real µs from now. */
static int send_schedule(struct netrun *nr, int link, int dir, const struct topo_trace *t,
                         char *err, size_t errlen)
{
    if (t->n_opportunities > NETRUN_SCHEDULE_MAX)
        return snprintf(err, errlen, "%zu delivery opportunities, more than linkd takes (%u)",
                        t->n_opportunities, NETRUN_SCHEDULE_MAX),
               -1;
    uint64_t *at = malloc(t->n_opportunities * sizeof *at);
    if (!at) return snprintf(err, errlen, "out of memory"), -1;
    double us = 1000 * nr->net->dilation;
    for (size_t i = 0; i < t->n_opportunities; i++)
        at[i] = (uint64_t)llround(t->opportunities_ms[i] * us);
    int rc = 0;
    for (int d = 0; d < 2 && rc == 0; d++)
        if (dir == d || dir == TOPO_KERNEL_BOTH)
            rc = linkd_client_link_schedule(linkd_of(nr, link), link, d, at, t->n_opportunities,
                                            (uint64_t)llround(t->period_s * 1e3 * us),
                                            on_trace_reply, NULL, err, errlen);
    free(at);
    return rc;
}

/* Stops the traces the new one replaces: its own direction and "both"
 * (a trace on both directions replaces them all). */
static void stop_traces(struct netrun *nr, int link, int dir)
{
    for (int d = 0; d < 3; d++) {
        struct netrun_trace_slot *slot = &nr->traces[3 * link + d];
        if (!slot->player || (dir != TOPO_KERNEL_BOTH && d != dir && d != TOPO_KERNEL_BOTH))
            continue;
        bool scheduled = trace_player_trace(slot->player)->opportunities_ms && nr->linkd;
        trace_player_free(slot->player);
        slot->player = NULL;
        char err[128];
        for (int e = 0; scheduled && e < 2; e++)
            if (d == e || d == TOPO_KERNEL_BOTH)
                linkd_client_link_schedule(linkd_of(nr, link), link, e, NULL, 0, 1, on_trace_reply,
                                           NULL, err, sizeof err);
    }
}

/* The kernel backend plans the trace's first values at once, so that a
 * trace it cannot play (a delay or loss column without sch_netem) is
 * refused in the call, not logged at every change. A plan only: the
 * kernel's sockets may be in use off the loop (kernel changes). */
static bool kernel_refuses_trace(struct netrun *nr, int link, const struct topo_trace *trace,
                                 const struct trace_player_opts *opts, char *err, size_t errlen)
{
    struct topo_trace_sample first;
    topo_trace_at(trace, opts->interp, opts->loop, 0, &first);
    struct topo_link_params p = traced_params(nr, link, trace, &first);
    return topo_kernel_link_check(nr->kernel, &p, err, errlen) < 0;
}

int netrun_link_trace(struct netrun *nr, int link, int dir, struct topo_trace *trace,
                      const struct trace_player_opts *opts, char *err, size_t errlen)
{
    if (!nr->linkd && !nr->kernel) {
        topo_trace_free(trace);
        return link_not_emulated(nr, err, errlen);
    }
    if (!nr->traces && !(nr->traces = calloc(3 * nr->net->n_links, sizeof *nr->traces))) {
        topo_trace_free(trace);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    if (nr->kernel && !nr->linkd && kernel_refuses_trace(nr, link, trace, opts, err, errlen)) {
        topo_trace_free(trace);
        return -1;
    }
    stop_traces(nr, link, dir);
    if (trace->opportunities_ms && nr->linkd &&
        send_schedule(nr, link, dir, trace, err, errlen) < 0) {
        topo_trace_free(trace);
        return -1;
    }
    struct netrun_trace_slot *slot = &nr->traces[3 * link + dir];
    *slot = (struct netrun_trace_slot){nr, link, dir, NULL};
    struct trace_player_opts o = *opts;
    o.dilation = nr->net->dilation;
    slot->player = trace_player_start(nr->loop, trace, &o, apply_trace, slot);
    if (!slot->player) {
        topo_trace_free(trace);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    return 0;
}

/* The player of link's direction dir (0, 1), its own or both's; NULL if none. */
static const struct trace_player *trace_of(const struct netrun *nr, int link, int dir)
{
    if (!nr->traces) return NULL;
    const struct netrun_trace_slot *own = &nr->traces[3 * link + dir];
    return own->player ? own->player : nr->traces[3 * link + TOPO_KERNEL_BOTH].player;
}

size_t netrun_link_trace_changes(const struct netrun *nr, int link, int dir,
                                 const struct topo_trace_sample **out)
{
    const struct trace_player *p = trace_of(nr, link, dir);
    *out = NULL;
    return p ? trace_player_changes(p, out) : 0;
}

/* The rate in force on one direction: its trace's, else the link's. */
uint64_t rate_now(const struct netrun *nr, int link, int dir)
{
    const struct trace_player *p = trace_of(nr, link, dir);
    return p ? trace_player_current(p)->rate_bps : nr->net->links[link].params.rate_bps;
}

void free_traces(struct netrun *nr)
{
    for (size_t i = 0; nr->traces && i < 3 * nr->net->n_links; i++)
        trace_player_free(nr->traces[i].player);
    free(nr->traces);
    nr->traces = NULL;
}

int netrun_link_updown(struct netrun *nr, int link, bool up, peer_reply_fn cb, void *ctx, char *err,
                       size_t errlen)
{
    if (nr->linkd)
        return linkd_client_link_updown(linkd_of(nr, link), link, up, cb, ctx, err, errlen) < 0 ? -1
                                                                                                : 1;
    if (!nr->kernel) return link_not_emulated(nr, err, errlen);
    struct kernel_op op = {.kind = OP_LINK_UPDOWN, .link = link, .up = up};
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

int netrun_link_stats(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen)
{
    if (nr->linkd)
        return linkd_client_link_stats(linkd_of(nr, link), link, cb, ctx, err, errlen) < 0 ? -1 : 1;
    snprintf(err, errlen,
             "counters come from the user backend (hiernet-linkd); backend '%s' keeps none",
             netrun_backend(nr));
    return -1;
}

static void cuts_free(struct netrun *nr)
{
    for (size_t i = 0; i < nr->n_cuts; i++)
        free(nr->cuts[i]);
    free(nr->cuts);
    nr->cuts = NULL;
    nr->n_cuts = 0;
}

/* The loop's view of a partition asked for: side copied into op and cuts. */
static int cut_add(struct netrun *nr, const unsigned char *side, struct kernel_op *op)
{
    size_t n = nr->net->n_nodes;
    unsigned char *copy = malloc(n), **grown = realloc(nr->cuts, (nr->n_cuts + 1) * sizeof *grown);
    op->side = malloc(n);
    if (grown) nr->cuts = grown;
    if (!copy || !grown || !op->side) {
        free(copy);
        free(op->side);
        return -1;
    }
    memcpy(copy, side, n);
    memcpy(op->side, side, n);
    nr->cuts[nr->n_cuts++] = copy;
    return 0;
}

int netrun_partition(struct netrun *nr, const unsigned char *side, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen)
{
    if (!nr->kernel) {
        snprintf(err, errlen, "backend '%s' emulates no network to cut (use kernel, user or auto)",
                 netrun_backend(nr));
        return -1;
    }
    struct kernel_op op = {.kind = OP_PARTITION};
    if (cut_add(nr, side, &op) < 0) return snprintf(err, errlen, "out of memory"), -1;
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* The loop's view: the cuts that match side (NULL: all) go; how many. */
static size_t cuts_take(struct netrun *nr, const unsigned char *side)
{
    size_t kept = 0, n = nr->n_cuts;
    for (size_t p = 0; p < n; p++) {
        if (!side || topo_kernel_same_cut(nr->cuts[p], side, nr->net->n_nodes))
            free(nr->cuts[p]);
        else
            nr->cuts[kept++] = nr->cuts[p];
    }
    nr->n_cuts = kept;
    return n - kept;
}

int netrun_heal(struct netrun *nr, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                void *ctx, char *err, size_t errlen)
{
    size_t n = nr->kernel ? cuts_take(nr, side) : 0; /* none: nothing was ever cut */
    if (healed) *healed = n;
    if (n == 0) return 0;
    struct kernel_op op = {.kind = OP_HEAL};
    if (side && !(op.side = malloc(nr->net->n_nodes)))
        return snprintf(err, errlen, "out of memory"), -1;
    if (side) memcpy(op.side, side, nr->net->n_nodes);
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* Puts link l's far end (not `stays`'s) at node `to` in the model, with a
 * fresh interface name there; *end_a says which end moved. */
static void move_link_end(struct topo_network *net, int l, int stays, int to, bool *end_a)
{
    struct topo_link *link = &net->links[l];
    *end_a = link->b == stays;
    if (*end_a)
        link->a = to;
    else
        link->b = to;
    topo_name_link_end(net, (size_t)l, to, *end_a ? link->ifname_a : link->ifname_b);
}

int netrun_link_move(struct netrun *nr, int l, int stays, int to, char *err, size_t errlen)
{
    if (!nr->kernel) {
        snprintf(err, errlen, "backend '%s' emulates no links to move (use kernel, user or auto)",
                 netrun_backend(nr));
        return -1;
    }
    kernel_ops_settle(nr); /* the kernel layer and the routing are the loop's now */
    struct topo_network *net = nr->net;
    struct topo_link saved = net->links[l];
    int from = saved.a == stays ? saved.b : saved.a;
    bool end_a;
    move_link_end(net, l, stays, to, &end_a);
    struct topo_routing fresh;
    if (topo_routing_compute(net, &fresh, err, errlen) < 0) {
        net->links[l] = saved; /* nothing was touched yet */
        return -1;
    }
    topo_routing_free(&nr->routing);
    nr->routing = fresh; /* the kernel layer reads it through its pointer */
    int rc = topo_kernel_link_move(nr->kernel, l, end_a, from, err, errlen);
    return rc < 0 ? rc : topo_kernel_reroute(nr->kernel, l, stays, err, errlen);
}

size_t netrun_partitions(const struct netrun *nr)
{
    return nr->n_cuts;
}

bool netrun_separated(const struct netrun *nr, int a, int b)
{
    for (size_t p = 0; p < nr->n_cuts; p++) {
        const unsigned char *side = nr->cuts[p];
        if (side[a] && side[b] && side[a] != side[b]) return true;
    }
    return false;
}

/* ---- links.csv ---- */

static const char *const link_columns[] = {
    "time_s",     "network",     "link",
    "dir",        "up",          "packets",
    "bytes",      "delivered",   "delivered_bytes",
    "drops_loss", "drops_queue", "drops_down",
    "queue_peak", "queue_len",   "marked",
    "bw_bps",
};
#define N_LINK_COLUMNS (sizeof link_columns / sizeof *link_columns)

const char *const *netrun_link_columns(size_t *n)
{
    *n = N_LINK_COLUMNS;
    return link_columns;
}

/* One CSV row for one direction of one link, counters as linkd names them. */
static void record_direction(struct netrun *nr, const char *t, int id, const char *link,
                             const char *dir, bool up, const msgpack_object *counters)
{
    char cells[N_LINK_COLUMNS][32];
    const char *row[N_LINK_COLUMNS] = {t, nr->net->name, link, dir, up ? "1" : "0"};
    struct proto_args args;
    proto_args_init(&args, counters);
    snprintf(cells[N_LINK_COLUMNS - 1], sizeof cells[0], "%llu",
             (unsigned long long)rate_now(nr, id, dir[0] == 'b'));
    row[N_LINK_COLUMNS - 1] = cells[N_LINK_COLUMNS - 1];
    for (size_t c = 5; c < N_LINK_COLUMNS - 1; c++) {
        int64_t v = 0;
        proto_arg_i64(&args, link_columns[c], &v);
        snprintf(cells[c], sizeof cells[c], "%lld", (long long)v);
        row[c] = cells[c];
    }
    char err[256];
    if (record_add(nr->links_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

static void record_link(struct netrun *nr, const char *t, const msgpack_object *entry)
{
    struct proto_args args;
    proto_args_init(&args, entry);
    int64_t id = -1;
    bool up = true;
    proto_arg_bool(&args, "up", &up);
    if (proto_arg_i64(&args, "id", &id) != 1 || id < 0 || (size_t)id >= nr->net->n_links) return;
    char name[80];
    topo_link_describe(nr->net, &nr->net->links[id], name, sizeof name);
    const msgpack_object *ab = proto_args_get(&args, "ab"), *ba = proto_args_get(&args, "ba");
    if (ab) record_direction(nr, t, (int)id, name, "ab", up, ab);
    if (ba) record_direction(nr, t, (int)id, name, "ba", up, ba);
}

static void on_links_sampled(void *ctx, const char *error, const msgpack_object *result)
{
    struct netrun *nr = ctx;
    if (nr->samples_pending) nr->samples_pending--;
    if (error || !nr->links_record) return;
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *links = proto_args_get(&args, "links");
    if (!links || links->type != MSGPACK_OBJECT_ARRAY) return;
    char t[32];
    snprintf(t, sizeof t, "%.3f", nr->clock(nr->clock_ctx));
    for (uint32_t i = 0; i < links->via.array.size; i++)
        record_link(nr, t, &links->via.array.ptr[i]);
}

/* Kernel backend: one direction of a link from the veth's counters. What
 * left the sending end's qdiscs is what the other end received (a veth
 * loses nothing in between), so packets and delivered are the same count;
 * the qdiscs' own drops (netem's loss, a full queue) and queue lengths are
 * not read: those cells stay empty. The veth's drops (its peer end down)
 * are drops_down. */
static void record_veth_direction(struct netrun *nr, const char *t, int id, const char *link,
                                  const char *dir, bool up, const uint64_t counts[3])
{
    char p[24], b[24], d[24], r[24];
    snprintf(p, sizeof p, "%llu", (unsigned long long)counts[0]);
    snprintf(b, sizeof b, "%llu", (unsigned long long)counts[1]);
    snprintf(d, sizeof d, "%llu", (unsigned long long)counts[2]);
    snprintf(r, sizeof r, "%llu", (unsigned long long)rate_now(nr, id, dir[0] == 'b'));
    const char *row[N_LINK_COLUMNS] = {t, nr->net->name, link, dir, up ? "1" : "0", p,    b,    p,
                                       b, NULL,          NULL, d,   NULL,           NULL, NULL, r};
    char err[256];
    if (record_add(nr->links_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

/* The sample of every link (the end read sent tx, received rx), each at
 * the run's clock of the moment its counters were read. */
static void on_veths_sampled(void *ctx, const struct link_sample *samples, size_t n_links,
                             const char *error)
{
    struct netrun *nr = ctx;
    if (error && !nr->sample_warned) {
        ctl_log("warning: network '%s': links.csv misses links: %s", nr->net->name, error);
        nr->sample_warned = true;
    }
    if (!nr->links_record) return;
    double dilation = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    double now = nr->clock(nr->clock_ctx), mono_now = mono_s();
    for (size_t i = 0; i < n_links; i++) {
        const struct link_sample *s = &samples[i];
        if (!s->seen) continue;
        char t[32];
        snprintf(t, sizeof t, "%.3f", now - (mono_now - s->mono) / dilation);
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[i], name, sizeof name);
        uint64_t ab[3] = {s->tx_packets, s->tx_bytes, s->tx_dropped};
        uint64_t ba[3] = {s->rx_packets, s->rx_bytes, s->rx_dropped};
        const uint64_t *sent_by_a = s->from_a ? ab : ba, *sent_by_b = s->from_a ? ba : ab;
        record_veth_direction(nr, t, (int)i, name, "ab", s->up, sent_by_a);
        record_veth_direction(nr, t, (int)i, name, "ba", s->up, sent_by_b);
    }
}

/* ---- tcp.csv ---- */

static const char *const tcp_columns[] = {"time_s", "network", "node", TCP_COUNTER_NAMES};
#define N_TCP_COLUMNS (sizeof tcp_columns / sizeof *tcp_columns)

const char *const *netrun_tcp_columns(size_t *n)
{
    *n = N_TCP_COLUMNS;
    return tcp_columns;
}

void netrun_sample_tcp(struct netrun *nr, struct record *rec)
{
    nr->tcp_record = rec;
}

int netrun_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                        size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    if (nr->backend == TOPO_BACKEND_NONE)
        return snprintf(err, errlen, "backend none: the peers share the host's TCP counters"), -1;
    if (n->kind != TOPO_NODE_HOST) return snprintf(err, errlen, "a switch has no TCP"), -1;
    const struct peer_client *pc = nr->peers[node].client;
    pid_t pid = pc && !peer_client_exited(pc) ? peer_client_pid(pc) : 0;
    if (pid <= 0) return snprintf(err, errlen, "its peer is not running"), -2;
    return tcp_counters_read(pid, out, err, errlen);
}

/* One row per running host. A node between peers (killed, restarting)
 * has no row that second; one whose counters cannot be read has none
 * either, and the first such failure is logged. The reads block the loop:
 * about 65 us of CPU per host (both files read 1000 times in a loop,
 * CLOCK_PROCESS_CPUTIME_ID, Linux 6.18 on a 2-core VM), so 65 ms a sample
 * at 1000 hosts, and several times that in wall time on a loaded host;
 * a thread of their own would take them off the loop. */
static void sample_tcp(struct netrun *nr)
{
    char t[32], cells[TCP_COUNTERS][24], err[256];
    snprintf(t, sizeof t, "%.3f", nr->clock(nr->clock_ctx));
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        struct tcp_counters c;
        if (nr->net->nodes[i].kind != TOPO_NODE_HOST) continue;
        int rc = netrun_tcp_counters(nr, (int)i, &c, err, sizeof err);
        if (rc == -1 && !nr->tcp_warned) {
            nr->tcp_warned = true;
            ctl_log("warning: network '%s': tcp.csv: node '%s': %s (further failures not logged)",
                    nr->net->name, nr->net->nodes[i].name, err);
        }
        if (rc < 0) continue;
        uint64_t v[TCP_COUNTERS];
        tcp_counters_values(&c, v);
        const char *row[N_TCP_COLUMNS] = {t, nr->net->name, nr->net->nodes[i].name};
        for (size_t k = 0; k < TCP_COUNTERS; k++) {
            snprintf(cells[k], sizeof cells[k], "%llu", (unsigned long long)v[k]);
            row[3 + k] = cells[k];
        }
        if (record_add(nr->tcp_record, row, err, sizeof err) < 0) ctl_log("%s", err);
    }
}

void on_sample_timer(EV_P_ ev_timer *w, int revents)
{
    struct netrun *nr = container_of(w, struct netrun, sample_timer);
    char err[256];
    if (nr->tcp_record) sample_tcp(nr);
    if (nr->sampler) {
        link_sampler_request(nr->sampler); /* skips a beat while a dump is in flight */
        return;
    }
    if (nr->samples_pending || !nr->linkd) return; /* linkd is slow to answer: skip a beat */
    for (size_t i = 0; i < nr->n_linkd; i++)
        if (linkd_client_stats_all(nr->linkd[i], on_links_sampled, nr, err, sizeof err) == 0)
            nr->samples_pending++;
}

void netrun_sample_links(struct netrun *nr, struct record *rec, netrun_clock_fn clock, void *ctx)
{
    bool veths = nr->backend == TOPO_BACKEND_KERNEL && nr->kernel;
    if ((!nr->linkd && !veths) || !rec) return;
    nr->links_record = rec;
    nr->clock = clock;
    nr->clock_ctx = ctx;
    if (veths && !nr->sampler) {
        char err[256];
        nr->sampler = link_sampler_start(nr->loop, nr->net, nr->kernel, on_veths_sampled, nr, err,
                                         sizeof err);
        if (!nr->sampler) {
            ctl_log("warning: network '%s': no links.csv: %s", nr->net->name, err);
            return;
        }
    }
    double every = nr->net->dilation > 1 ? nr->net->dilation : 1.0; /* one emulated second */
    ev_timer_init(&nr->sample_timer, on_sample_timer, every, every);
    ev_timer_start(nr->loop, &nr->sample_timer);
}

void netrun_close_peers(struct netrun *nr)
{
    ev_timer_stop(nr->loop, &nr->sample_timer);
    link_sampler_stop(nr->sampler); /* before the namespaces go */
    nr->sampler = NULL;
    free_traces(nr); /* the links change no more */
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client) peer_client_close(nr->peers[i].client);
}

/* ---- release ----
 *
 * Everything that goes at once goes first (release_begin): peers
 * (SIGKILLed), linkd, the namespaces, the registry's entries. Three things
 * may take a moment: the killed peers' exits (a peer frees its memory
 * first: tens of ms for half a GiB), then the peer template's exit (on EOF;
 * SIGKILL after a second; it outlives its peers, peer_template.h) and the
 * cgroups' removal (a killed peer leaves its group a little after it is
 * reaped). netrun_release waits for them on the loop, a timer checking the
 * peers and retrying the cgroups; netrun_free, for when no loop runs (the
 * run's teardown), waits here: for the peers (controller/reaper.h), the
 * template and the cgroups, and for a build step still running on its
 * thread (seconds at most: a link that never runs times out), which a
 * release on the loop never meets (netlife releases a network once built). */

#define RELEASE_CGROUP_TIMEOUT_S 1.0 /* as topo_cgroup_run_remove's own bound */
#define RELEASE_RETRY_S 0.01

static void release_begin(struct netrun *nr)
{
    /* A build in flight: its step off the loop ends first (a few seconds
     * at most: a link that never runs times out). Only netrun_free meets
     * one, where no loop runs: a release on the loop comes after the build
     * (netlife_release), or from its failure once its step has ended. */
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    nr->freeing = true;
    host_probe_forget(nr); /* a build waiting for a probe */
    kernel_ops_drop(nr);
    ev_timer_stop(nr->loop, &nr->linkd_deadline);
    ev_async_stop(nr->loop, &nr->job_done);
    ev_timer_stop(nr->loop, &nr->template_deadline);
    ev_timer_stop(nr->loop, &nr->sample_timer);
    link_sampler_stop(nr->sampler); /* its sockets live in the namespaces freed below */
    nr->sampler = NULL;
    free_traces(nr);
    nr->links_record = NULL;
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        struct netrun_peer *p = &nr->peers[i];
        if (p->old) close(p->child_end); /* a restart's new peer never starts */
        peer_client_release(p->old, &nr->dying);
        p->old = NULL;
        peer_client_release(nr->peers[i].client, &nr->dying); /* kills a survivor */
        nr->peers[i].client = NULL;
        free(nr->peers[i].told);
        nr->peers[i].told = NULL;
    }
    /* The TAPs are persistent (linkd_client.c): neither closing our
     * namespace fds nor linkd's exit deletes them one by one; each namespace
     * goes once the last of us lets go and takes its devices along in one
     * batch. End every linkd before reaping any, so they exit side by side. */
    topo_kernel_destroy(nr->kernel);
    nr->kernel = NULL;
    for (size_t i = 0; i < nr->n_linkd; i++) {
        linkd_client_close(nr->linkd[i]); /* linkd exits on EOF */
        linkd_client_kill(nr->linkd[i], SIGKILL);
    }
    for (size_t i = 0; i < nr->n_linkd; i++)
        linkd_client_free(nr->linkd[i]);
    free(nr->linkd);
    nr->linkd = NULL;
    nr->n_linkd = 0;
    free(nr->link_adds);
    nr->link_adds = NULL;
    topo_routing_free(&nr->routing);
    char err[256];
    if (nr->registry) {
        registry_remove_network(nr->registry, nr->net->name);
        if (registry_commit(nr->registry, err, sizeof err) < 0) ctl_log("%s", err);
    }
}

/* Frees nr; then, after a release, tells whoever waits for it. */
static void release_finish(struct netrun *nr, bool notify)
{
    bool failed_build = nr->release.failed_build;
    netrun_built_fn built = nr->built;
    void *built_ctx = nr->built_ctx;
    struct net_error error = nr->job.error;
    netrun_released_fn released = nr->release.released;
    void *ctx = nr->release.ctx;
    ev_timer_stop(nr->loop, &nr->release.timer);
    free(nr->peers);
    free(nr);
    if (!notify) return;
    if (failed_build)
        built(built_ctx, NULL, &error);
    else if (released)
        released(ctx);
}

static void on_template_gone(void *ctx)
{
    struct netrun *nr = ctx;
    nr->template = NULL; /* the release timer finishes at its next turn */
}

/* The killed peers are reaped: the template may go, and the cgroups'
 * removal has its deadline from now. */
static bool peers_reaped(struct netrun *nr)
{
    if (nr->release.template_stopping) return true;
    if (nr->dying.pending) return false;
    nr->release.template_stopping = true;
    nr->release.cgroup_deadline = mono_s() + RELEASE_CGROUP_TIMEOUT_S;
    peer_template_stop(nr->template, on_template_gone, nr);
    return true;
}

void on_release_timer(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, release.timer);
    if (!peers_reaped(nr)) return;
    if (nr->cgroups_made) {
        char err[256];
        int rc = topo_cgroup_run_remove_try(&nr->cgroup, nr->run_id, err, sizeof err);
        if (rc != 1 || mono_s() > nr->release.cgroup_deadline) cgroups_released(nr, rc, err);
    }
    if (nr->template || nr->cgroups_made) return;
    release_finish(nr, true);
}

void netrun_release(struct netrun *nr, netrun_released_fn released, void *ctx)
{
    release_begin(nr);
    nr->release.active = true;
    nr->release.released = released;
    nr->release.ctx = ctx;
    /* The template goes once its peers have (peer_template.h): at the
     * timer's first turn that finds them reaped. */
    ev_timer_set(&nr->release.timer, 0, RELEASE_RETRY_S); /* the first turn: at once */
    ev_timer_start(nr->loop, &nr->release.timer);
}

void netrun_free(struct netrun *nr)
{
    if (!nr) return;
    if (!nr->release.active) release_begin(nr);
    ev_timer_stop(nr->loop, &nr->release.timer);
    reaper_wait(&nr->dying);              /* SIGKILLed: their exits, before the template's */
    peer_template_stop_now(nr->template); /* also one that netrun_release is ending */
    nr->template = NULL;
    char err[256];
    if (nr->cgroups_made)
        cgroups_released(nr, topo_cgroup_run_remove(&nr->cgroup, nr->run_id, err, sizeof err), err);
    release_finish(nr, false);
}
