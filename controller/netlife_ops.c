/* netlife_ops.c — a running network's changes and queries as the engine
 * owns them (netlife.h, "A running network"): each checks that the
 * network runs, hands the change to netrun and keeps the topology model in
 * step with what took effect, so that the Lua binding only converts
 * arguments and results. */
#include "controller/netlife.h"

#include "topo/trace.h"

#include <stdio.h>
#include <stdlib.h>

const char *netlife_state_word(const struct netlife *nl)
{
    switch (nl ? netlife_state(nl) : NETLIFE_DEFINED) {
    case NETLIFE_DEFINED:
        return "not started";
    case NETLIFE_RUNNING:
        return "started";
    case NETLIFE_STOPPING:
        return "stopping";
    case NETLIFE_STOPPED:
        return "stopped";
    default:
        return "starting";
    }
}

bool netlife_defined(const struct netlife *nl)
{
    return !nl || netlife_state(nl) == NETLIFE_DEFINED;
}

bool netlife_running(const struct netlife *nl)
{
    return nl && netlife_state(nl) == NETLIFE_RUNNING && netlife_netrun(nl);
}

bool netlife_peers_up(const struct netlife *nl)
{
    enum netlife_state s = nl ? netlife_state(nl) : NETLIFE_DEFINED;
    return (s == NETLIFE_HANDSHAKE || s == NETLIFE_RUNNING) && netlife_netrun(nl);
}

/* The started network, or NULL with err ("network is <state>"). */
static struct netrun *running(const struct netlife *nl, char *err, size_t errlen)
{
    if (netlife_running(nl)) return netlife_netrun(nl);
    snprintf(err, errlen, "network is %s", netlife_state_word(nl));
    return NULL;
}

struct peer_client *netlife_peer(const struct netlife *nl, int node)
{
    return netlife_peers_up(nl) ? netrun_peer(netlife_netrun(nl), node) : NULL;
}

int netlife_tell_address(struct netlife *nl, int from, int to, char *err, size_t errlen)
{
    if (!netlife_peers_up(nl))
        return snprintf(err, errlen, "network is %s", netlife_state_word(nl)), -1;
    return netrun_tell_address(netlife_netrun(nl), from, to, err, errlen);
}

/* ---- links: the model follows what took effect ---- */

struct link_change {
    struct topo_link *link;
    enum netlife_link_op op;
    struct topo_link_params params;
    peer_reply_fn cb;
    void *ctx;
};

static void link_change_apply(const struct link_change *c)
{
    if (c->op == NETLIFE_LINK_SET) c->link->params = c->params;
    if (c->op == NETLIFE_LINK_DOWN || c->op == NETLIFE_LINK_UP)
        c->link->up = c->op == NETLIFE_LINK_UP;
}

static void on_link_change(void *ctx, const char *error, const msgpack_object *result)
{
    struct link_change *c = ctx;
    if (!error) link_change_apply(c);
    c->cb(c->ctx, error, result);
    free(c);
}

static int link_change_send(struct netrun *nr, struct link_change *c, int link, char *err,
                            size_t errlen)
{
    switch (c->op) {
    case NETLIFE_LINK_SET:
        return netrun_link_set(nr, link, &c->params, on_link_change, c, err, errlen);
    case NETLIFE_LINK_STATS:
        return netrun_link_stats(nr, link, on_link_change, c, err, errlen);
    default:
        return netrun_link_updown(nr, link, c->op == NETLIFE_LINK_UP, on_link_change, c, err,
                                  errlen);
    }
}

int netlife_link_change(struct netlife *nl, int link, enum netlife_link_op op,
                        const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                        char *err, size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    if (!nr) return -1;
    struct link_change *c = calloc(1, sizeof *c);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    *c = (struct link_change){&netlife_topology(nl)->links[link], op, {0}, cb, ctx};
    if (params) c->params = *params;
    int rc = link_change_send(nr, c, link, err, errlen);
    if (rc == 0) link_change_apply(c); /* not emulated: the model alone */
    if (rc <= 0) free(c);
    return rc;
}

int netlife_link_trace(struct netlife *nl, int link, int dir, struct topo_trace *trace,
                       const struct trace_player_opts *opts, char *err, size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    if (!nr) {
        topo_trace_free(trace);
        return -1;
    }
    return netrun_link_trace(nr, link, dir, trace, opts, err, errlen);
}

size_t netlife_link_trace_changes(const struct netlife *nl, int link, int dir,
                                  const struct topo_trace_sample **out)
{
    const struct netrun *nr = nl ? netlife_netrun(nl) : NULL;
    return nr ? netrun_link_trace_changes(nr, link, dir, out) : 0;
}

int netlife_link_move_check(const struct netlife *nl, int link, int stays, int to, char *err,
                            size_t errlen)
{
    const struct netrun *nr = netlife_running(nl) ? netlife_netrun(nl) : NULL;
    return nr ? netrun_link_move_check(nr, link, stays, to, err, errlen) : 0;
}

int netlife_link_move(struct netlife *nl, int link, int stays, int to, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    return nr ? netrun_link_move(nr, link, stays, to, cb, ctx, err, errlen) : -1;
}

/* ---- partitions ---- */

int netlife_partition(struct netlife *nl, const unsigned char *side, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    return nr ? netrun_partition(nr, side, cb, ctx, err, errlen) : -1;
}

int netlife_heal(struct netlife *nl, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                 void *ctx, char *err, size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    return nr ? netrun_heal(nr, side, healed, cb, ctx, err, errlen) : -1;
}

bool netlife_reachable(const struct netlife *nl, int a, int b)
{
    if (!netlife_running(nl)) return false;
    const struct netrun *nr = netlife_netrun(nl);
    return netrun_peer_alive(nr, a) && netrun_peer_alive(nr, b) && !netrun_separated(nr, a, b);
}

int netlife_tcp_counters(struct netlife *nl, int node, struct tcp_counters *out, char *err,
                         size_t errlen)
{
    struct netrun *nr = running(nl, err, errlen);
    return nr ? netrun_tcp_counters(nr, node, out, err, errlen) : -1;
}
