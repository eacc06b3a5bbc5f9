/* netrun_traces.c — link traces played on a running network: a player per
 * link direction, its changes sent to linkd or the kernel, Mahimahi
 * schedules to linkd. Over several machines a link of this machine's part
 * is its part's; another's is played by the agents of its ends' machines,
 * and the controller keeps a player that applies nothing, for
 * l:trace_changes. */
#include "controller/netrun_internal.h"

#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/trace_player.h"
#include "emu/tc_backend.h"
#include "topo/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A Mahimahi schedule in one linkd message (at most 9 bytes an entry in
 * its 4 MiB limit): 400,000 opportunities are 10 minutes at 9.6 Mbit/s. */
#define NETRUN_SCHEDULE_MAX 400000u
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
    if (!error && c->dir == EMU_TC_BOTH) nr->net->links[c->link].params = c->params;
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
    if (!c || netrun_kernel_op_queue(nr, &op, on_trace_change, c, err, sizeof err) < 0) {
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
    if (nr->parts) return; /* the ends' machines play it; this player only keeps its changes */
    struct topo_link_params p = traced_params(nr, slot->link, t, now), installed;
    char err[512];
    int rc;
    if (nr->linkd) {
        topo_link_params_install(nr->net, &nr->net->links[slot->link], &p, &installed);
        rc = linkd_client_link_set_dir(netrun_linkd_of(nr, slot->link), slot->link, slot->dir,
                                       &installed, on_trace_reply, NULL, err, sizeof err);
    } else if (nr->ops) { /* a change runs on the thread: this one goes after it */
        return trace_change_queue(nr, slot, &p);
    } else { /* the thread is idle: a qdisc change or two, here */
        rc = emu_tc_link_set_dir(nr->kernel, slot->link, slot->dir, &p, err, sizeof err);
    }
    if (rc < 0) {
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[slot->link], name, sizeof name);
        ctl_log("warning: link %s: trace at %.3f s: %s", name, now->t_s, err);
        return;
    }
    if (slot->dir == EMU_TC_BOTH) nr->net->links[slot->link].params = p;
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
        if (dir == d || dir == EMU_TC_BOTH)
            rc = linkd_client_link_schedule(
                netrun_linkd_of(nr, link), link, d, at, t->n_opportunities,
                (uint64_t)llround(t->period_s * 1e3 * us), on_trace_reply, NULL, err, errlen);
    free(at);
    return rc;
}

/* Stops the traces the new one replaces: its own direction and "both"
 * (a trace on both directions replaces them all). */
static void stop_traces(struct netrun *nr, int link, int dir)
{
    for (int d = 0; d < 3; d++) {
        struct netrun_trace_slot *slot = &nr->traces[3 * link + d];
        if (!slot->player || (dir != EMU_TC_BOTH && d != dir && d != EMU_TC_BOTH)) continue;
        bool scheduled = trace_player_trace(slot->player)->opportunities_ms && nr->linkd;
        trace_player_free(slot->player);
        slot->player = NULL;
        char err[128];
        for (int e = 0; scheduled && e < 2; e++)
            if (d == e || d == EMU_TC_BOTH)
                linkd_client_link_schedule(netrun_linkd_of(nr, link), link, e, NULL, 0, 1,
                                           on_trace_reply, NULL, err, sizeof err);
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
    return emu_tc_link_check(nr->kernel, &p, err, errlen) < 0;
}

/* A link of another machine, or between two: its machines' agents (and
 * this machine's part, for an end here) play it; the player started here
 * keeps its changes. */
static int trace_elsewhere(struct netrun *nr, int link, int dir, struct topo_trace *trace,
                           const struct trace_player_opts *opts, char *err, size_t errlen)
{
    int l = netrun_parts_local_link(nr, link);
    if (l >= 0) return netrun_link_trace(netrun_parts_inner(nr), l, dir, trace, opts, err, errlen);
    if (netrun_parts_trace(nr, link, dir, trace, opts, err, errlen) < 0) {
        topo_trace_free(trace);
        return -1;
    }
    return 1; /* the player follows */
}

int netrun_link_trace(struct netrun *nr, int link, int dir, struct topo_trace *trace,
                      const struct trace_player_opts *opts, char *err, size_t errlen)
{
    if (nr->parts) {
        int rc = trace_elsewhere(nr, link, dir, trace, opts, err, errlen);
        if (rc <= 0) return rc;
    } else if (!nr->linkd && !nr->kernel) {
        topo_trace_free(trace);
        return netrun_link_not_emulated(nr, err, errlen);
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
    return own->player ? own->player : nr->traces[3 * link + EMU_TC_BOTH].player;
}

size_t netrun_link_trace_changes(const struct netrun *nr, int link, int dir,
                                 const struct topo_trace_sample **out)
{
    int l = nr->parts ? netrun_parts_local_link(nr, link) : -1;
    if (l >= 0) return netrun_link_trace_changes(netrun_parts_inner(nr), l, dir, out);
    const struct trace_player *p = trace_of(nr, link, dir);
    *out = NULL;
    return p ? trace_player_changes(p, out) : 0;
}

/* The rate in force on one direction: its trace's, else the link's. */
uint64_t netrun_rate_now(const struct netrun *nr, int link, int dir)
{
    const struct trace_player *p = trace_of(nr, link, dir);
    return p ? trace_player_current(p)->rate_bps : nr->net->links[link].params.rate_bps;
}

void netrun_free_traces(struct netrun *nr)
{
    for (size_t i = 0; nr->traces && i < 3 * nr->net->n_links; i++)
        trace_player_free(nr->traces[i].player);
    free(nr->traces);
    nr->traces = NULL;
}
