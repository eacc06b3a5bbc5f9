/* agent_part.c — an agent's part and its peer relay (see agent_part.h). */
#include "app/agent_part.h"
#include "app/agent_part_internal.h"

#include "controller/net_error.h"
#include "controller/part_build.h"
#include "controller/peer_client.h"
#include "proto/agent_wire.h"
#include "proto/msgmap.h"
#include "topo/part_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* proto/ cannot see topo/: the two bounds of a part's bytes are kept equal here. */
_Static_assert(AGENT_PART_MAX == TOPO_PART_WIRE_MAX, "a build's part bound is the decoder's");

void part_log(struct agent_part *p, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    p->io.log(p->io.ctx, line);
}

struct agent_part *agent_part_new(struct ev_loop *loop, const char *machine, const char *peer_path,
                                  const struct agent_part_io *io)
{
    struct agent_part *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->loop = loop;
    p->machine = machine;
    p->peer_path = peer_path;
    p->io = *io;
    return p;
}

/* ---- answers ---- */

static void answer_error(struct agent_part *p, uint32_t msgid, const struct agent_build_error *e)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_build_error(&m, e);
    msgmap_error_response(&m, p->io.pk, msgid);
    p->io.flush(p->io.ctx);
}

void part_answer_error(struct agent_part *p, uint32_t msgid, int code, const char *node,
                       const char *link, const char *message)
{
    struct agent_build_error e = {.code = code};
    snprintf(e.node, sizeof e.node, "%s", node ? node : "");
    snprintf(e.link, sizeof e.link, "%s", link ? link : "");
    snprintf(e.message, sizeof e.message, "%s", message);
    part_log(p, "%s", message);
    answer_error(p, msgid, &e);
}

void part_answer_done(struct agent_part *p, uint32_t msgid)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_response(&m, p->io.pk, msgid);
    p->io.flush(p->io.ctx);
}

void agent_part_refuse(struct agent_part *p, uint32_t msgid, const char *message)
{
    struct agent_build_error e = {.code = NET_ERR_SCENARIO};
    snprintf(e.message, sizeof e.message, "%s", message);
    part_log(p, "build refused: %s", message);
    answer_error(p, msgid, &e);
}

/* The error's node and link by name, from the part's model (readable
 * during the built callback, part_build.h). */
static void name_fault(const struct topo_part *part, const struct net_error *error,
                       struct agent_build_error *e)
{
    const struct topo_network *net = part ? part->net : NULL;
    if (net && error->node >= 0 && (size_t)error->node < net->n_nodes)
        snprintf(e->node, sizeof e->node, "%s", net->nodes[error->node].name);
    if (net && error->link >= 0 && (size_t)error->link < net->n_links)
        topo_link_describe(net, &net->links[error->link], e->link, sizeof e->link);
}

static void answer_net_error(struct agent_part *p, uint32_t msgid, const struct net_error *error)
{
    struct agent_build_error e = {.code = error->code};
    snprintf(e.message, sizeof e.message, "%s", error->message);
    name_fault(p->run ? part_model(p->run) : NULL, error, &e);
    part_log(p, "build failed: %s", error->message);
    answer_error(p, msgid, &e);
}

static void answer_built(struct agent_part *p)
{
    struct agent_build_reply r = {.nodes = topo_part_local_nodes(part_model(p->run))};
    snprintf(r.registry, sizeof r.registry, "%s", part_registry_id(p->run));
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_build_reply(&m, &r);
    msgmap_response(&m, p->io.pk, p->build_msgid);
    p->io.flush(p->io.ctx);
}

/* ---- the relay ---- */

static void relay_pause_all(struct agent_part *p, bool paused)
{
    p->paused = paused;
    for (size_t i = 0; i < p->n_relays; i++)
        if (p->relays[i].pc) peer_client_relay_pause(p->relays[i].pc, paused);
}

/* What a peer wrote, to the controller as call chunks. */
static void on_peer_bytes(void *ctx, const void *bytes, size_t len)
{
    struct relay *r = ctx;
    struct agent_part *p = r->p;
    struct agent_call c = {.node = r->whole, .data = bytes, .len = (uint32_t)len};
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_call(&m, &c); /* len <= PEER_RELAY_CHUNK == AGENT_CALL_DATA_MAX */
    if (!msgmap_notify(&m, p->io.pk, agent_method_name(AGENT_CALL)))
        part_log(p, "node %llu: %zu bytes of its peer dropped: out of memory",
                 (unsigned long long)r->whole, len);
    p->io.flush(p->io.ctx);
    if (!p->paused && p->io.queued(p->io.ctx) > AGENT_PART_OUT_HIGH) relay_pause_all(p, true);
}

void agent_part_output_drained(struct agent_part *p)
{
    if (p->paused && p->state == PART_BUILT && p->io.queued(p->io.ctx) <= AGENT_PART_OUT_LOW)
        relay_pause_all(p, false);
}

/* The agent's input is read again: the peer that held it took its backlog
 * (or is gone). */
static void input_release(struct agent_part *p, const struct relay *r)
{
    if (!p->input_held || (r && p->input_held != r)) return;
    p->input_held = NULL;
    p->io.input(p->io.ctx, true);
}

static void on_peer_drained(void *ctx)
{
    struct relay *r = ctx;
    input_release(r->p, r);
}

/* Every local host's channel into relay mode. A channel that cannot be
 * relayed is left out (its calls are dropped), and logged. */
static void relay_start(struct agent_part *p)
{
    const struct topo_part *part = part_model(p->run);
    struct netrun *nr = part_netrun(p->run);
    char err[256];
    p->relays = calloc(part->net->n_nodes ? part->net->n_nodes : 1, sizeof *p->relays);
    if (!p->relays) return part_log(p, "relay: out of memory: every call will be dropped");
    p->n_relays = part->net->n_nodes;
    for (size_t i = 0; i < p->n_relays; i++) {
        struct relay *r = &p->relays[i];
        r->p = p;
        r->whole = (uint64_t)part->whole_node[i];
        if (!topo_node_local_host(&part->net->nodes[i])) continue;
        struct peer_client *pc = netrun_peer(nr, (int)i);
        if (pc && part_relay_attach(p, r, pc, err, sizeof err) < 0)
            part_log(p, "node %s: not relayed: %s", part->net->nodes[i].name, err);
    }
}

int part_relay_attach(struct agent_part *p, struct relay *r, struct peer_client *pc, char *err,
                      size_t errlen)
{
    r->pc = NULL;
    if (peer_client_relay(pc, on_peer_bytes, on_peer_drained, r, err, errlen) < 0) return -1;
    if (p->paused) peer_client_relay_pause(pc, true);
    r->pc = pc;
    return 0;
}

static void call_drop(struct agent_part *p, const char *why)
{
    if (!p->call_dropped) part_log(p, "call dropped: %s (further drops are not logged)", why);
    p->call_dropped = true;
}

void agent_part_call(struct agent_part *p, const msgpack_object *params)
{
    struct agent_call c;
    char err[256];
    if (agent_wire_read_call(params, &c, err, sizeof err) < 0) return call_drop(p, err);
    if (p->state != PART_BUILT) return call_drop(p, "no part is built");
    long i = topo_part_own_node(part_model(p->run), c.node);
    struct relay *r = i >= 0 && (size_t)i < p->n_relays ? &p->relays[i] : NULL;
    if (r && r->restart) { /* the old peer's last bytes: its channel has ended */
        snprintf(err, sizeof err, "node %llu of machine %s's part is being restarted",
                 (unsigned long long)c.node, p->machine);
        return call_drop(p, err);
    }
    if (!r || !r->pc) {
        snprintf(err, sizeof err, "node %llu is not a host of machine %s's part",
                 (unsigned long long)c.node, p->machine);
        return call_drop(p, err);
    }
    if (peer_client_relay_write(r->pc, c.data, c.len) < 0) {
        snprintf(err, sizeof err, "node %llu: its peer's channel is closed",
                 (unsigned long long)c.node);
        return call_drop(p, err);
    }
    /* A peer that does not read: hold the controller's stream rather than
     * queue without bound (the pings wait too: --idle-timeout bounds it). */
    if (!p->input_held && peer_client_queued(r->pc) > AGENT_PART_IN_HIGH) {
        p->input_held = r;
        p->io.input(p->io.ctx, false);
    }
}

/* ---- build, exits, release ---- */

static void on_peer_exit(void *ctx, int node, int wait_status)
{
    struct agent_part *p = ctx;
    if (!p->run) return;
    if (p->input_held && p->input_held->whole == (uint64_t)part_model(p->run)->whole_node[node])
        input_release(p, NULL); /* its backlog went with it */
    struct agent_exit x = {.node = (uint64_t)part_model(p->run)->whole_node[node],
                           .status = wait_status};
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_exit(&m, &x);
    msgmap_notify(&m, p->io.pk, agent_method_name(AGENT_EXIT));
    p->io.flush(p->io.ctx);
}

static void on_released(void *ctx)
{
    struct agent_part *p = ctx;
    p->run = NULL;
    p->state = PART_GONE;
    agent_stats_stop(p->stats); /* after the netrun that wrote to its record */
    p->stats = NULL;
    free(p->relays); /* their channels were netrun's, closed and freed with it */
    p->relays = NULL;
    p->n_relays = 0;
    part_log(p, "part released");
    p->io.released(p->io.ctx);
}

static void release_now(struct agent_part *p)
{
    p->state = PART_RELEASING;
    agent_ops_stop(p);
    agent_programs_stop(p);
    input_release(p, NULL);
    part_release(p->run, on_released, p);
}

static void on_built(void *ctx, struct part_run *run, const struct net_error *error)
{
    struct agent_part *p = ctx;
    if (error) {
        answer_net_error(p, p->build_msgid, error);
        p->run = NULL;
        p->state = PART_GONE;
        if (p->release_wanted) p->io.released(p->io.ctx);
        return;
    }
    p->state = PART_BUILT;
    relay_start(p);
    char phases[512]; /* this machine's share of the start, beside the controller's */
    netrun_describe_start(part_netrun(run), phases, sizeof phases);
    part_log(p, "part built: registry %s, %zu nodes in %s", part_registry_id(run),
             topo_part_local_nodes(part_model(run)), phases);
    answer_built(p);
    if (p->stats_wanted) p->stats = agent_stats_start(p);
    if (p->release_wanted) release_now(p);
}

void agent_part_build(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    struct agent_build b;
    char err[512];
    if (p->state != PART_NONE) {
        snprintf(
            err, sizeof err, "build: this agent has had its build already (one part per agent)%s%s",
            p->run ? "; it holds registry entry " : "", p->run ? part_registry_id(p->run) : "");
        return agent_part_refuse(p, msgid, err);
    }
    if (agent_wire_read_build(params, &b, err, sizeof err) < 0)
        return agent_part_refuse(p, msgid, err);
    struct part_build_opts opts = {p->machine, p->peer_path, on_built, on_peer_exit, p};
    struct net_error error;
    p->build_msgid = msgid;
    p->stats_wanted = b.stats;
    p->stall_threshold_s = (double)b.stall_threshold_ns / 1e9;
    if (part_build(p->loop, b.part, b.part_len, &opts, &p->run, &error) < 0) {
        p->run = NULL;
        p->state = PART_GONE; /* one build per agent, failed or not */
        return answer_net_error(p, msgid, &error);
    }
    p->state = PART_BUILDING;
}

bool agent_part_release(struct agent_part *p)
{
    if (p->state == PART_BUILDING) p->release_wanted = true; /* on_built releases */
    if (p->state == PART_BUILDING || p->state == PART_RELEASING) return true;
    if (p->state != PART_BUILT) return false;
    release_now(p);
    return true;
}

void agent_part_free(struct agent_part *p)
{
    if (!p) return;
    free(p->relays);
    free(p);
}
