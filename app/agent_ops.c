/* agent_ops.c — an agent's run-time changes to its part: link, kill,
 * restart, partition and heal, a link's counters and traces (see
 * agent_part.h). Each maps the
 * controller's whole-network indices to the part's own and calls the
 * netrun_* function a local run calls (controller/netlife_ops.c does the
 * same on one machine); on a cut link that acts on this machine's end
 * only, as the other machine's agent does its own. */
#include "app/agent_part_internal.h"

#include "common/container.h"
#include "controller/peer_client.h"
#include "proto/msgmap.h"
#include "controller/trace_player.h"
#include "topo/part_wire.h"
#include "topo/trace_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A restart's new peer answers its data secret within this, or the
 * restart failed: a peer starts in tens of ms, or waits for its old one's
 * exit (the old one frees its memory first: tens of ms for half a GiB). */
#define RESTART_WAIT_S 30.0

/* The part, or an error answered: the request needs a built part. */
static const struct topo_part *built_part(struct agent_part *p, uint32_t msgid, const char *what)
{
    if (p->state == PART_BUILT) return part_model(p->run);
    char line[160];
    snprintf(line, sizeof line, "%s: no part is built on this machine", what);
    part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    return NULL;
}

static void refuse(struct agent_part *p, uint32_t msgid, const char *line)
{
    part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
}

/* ---- nodes ---- */

/* The part's own host of node's whole index (its peer runs here), or -1
 * with the refusal answered. */
static long own_host(struct agent_part *p, uint32_t msgid, const char *what,
                     const msgpack_object *params)
{
    struct agent_node n;
    char line[600];
    const struct topo_part *part = built_part(p, msgid, what);
    if (!part) return -1;
    if (agent_wire_read_node(what, params, &n, line, sizeof line) < 0)
        return refuse(p, msgid, line), -1;
    long i = topo_part_own_node(part, n.node);
    if (i < 0 || !topo_node_local_host(&part->net->nodes[i])) {
        snprintf(line, sizeof line, "%s: node %llu is not a host of this machine's part", what,
                 (unsigned long long)n.node);
        return refuse(p, msgid, line), -1;
    }
    return i;
}

void agent_part_kill(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    long i = own_host(p, msgid, "kill", params);
    if (i < 0) return;
    netrun_peer_kill(part_netrun(p->run), (int)i); /* its exit notification follows */
    part_answer_done(p, msgid);
}

/* A restart under way, until its secret call is answered. It outlives an
 * answer given by the deadline or the release (cancelled): the call's
 * answer still comes, and frees it. */
struct restart_wait {
    struct relay *r;
    uint32_t msgid;
    bool cancelled;
};

/* The restart is over for the relay (its answer is the caller's to give). */
static void restart_end(struct relay *r)
{
    ev_timer_stop(r->p->loop, &r->restart_deadline);
    r->restart->cancelled = true;
    r->restart = NULL;
}

static const char *relay_node_name(const struct relay *r)
{
    return part_model(r->p->run)->net->nodes[r - r->p->relays].name;
}

/* The new peer's answer to its data secret: the channel is relayed and the
 * restart answered, or the restart fails with the peer's error. */
static void on_restart_secret(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct restart_wait *w = ctx;
    if (w->cancelled) return free(w);
    struct relay *r = w->r;
    struct agent_part *p = r->p;
    uint32_t msgid = w->msgid;
    long i = r - p->relays;
    char err[300], line[600];
    restart_end(r);
    free(w);
    const char *name = relay_node_name(r);
    if (error) {
        snprintf(line, sizeof line, "restart: node %s: its new peer did not take its secret: %s",
                 name, error);
        return part_answer_error(p, msgid, NET_ERR_PEER, name, NULL, line);
    }
    if (part_relay_attach(p, r, netrun_peer(part_netrun(p->run), (int)i), err, sizeof err) < 0) {
        snprintf(line, sizeof line, "restart: node %s: not relayed: %s", name, err);
        return part_answer_error(p, msgid, NET_ERR_PEER, name, NULL, line);
    }
    part_answer_done(p, msgid);
}

static void on_restart_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct relay *r = container_of(w, struct relay, restart_deadline);
    uint32_t msgid = r->restart->msgid;
    const char *name = relay_node_name(r);
    char line[400];
    restart_end(r);
    snprintf(line, sizeof line, "restart: node %s: its new peer did not answer within %.0f s", name,
             RESTART_WAIT_S);
    part_answer_error(r->p, msgid, NET_ERR_PEER, name, NULL, line);
}

void agent_part_restart(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    long i = own_host(p, msgid, "restart", params);
    if (i < 0) return;
    struct relay *r = &p->relays[i];
    const char *name = part_model(p->run)->net->nodes[i].name;
    char err[300], line[400];
    if (r->restart) {
        snprintf(line, sizeof line, "restart: node %s: a restart is under way", name);
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, name, NULL, line);
    }
    struct restart_wait *w = malloc(sizeof *w);
    if (!w) return refuse(p, msgid, "restart: out of memory");
    *w = (struct restart_wait){r, msgid, false};
    /* The old client may be freed by the restart: no relay write to it. */
    if (p->input_held == r) p->input_held = NULL, p->io.input(p->io.ctx, true);
    r->pc = NULL;
    if (netrun_peer_restart_then(part_netrun(p->run), (int)i, on_restart_secret, w, err,
                                 sizeof err) < 0) {
        free(w);
        snprintf(line, sizeof line, "restart: node %s: %s", name, err);
        return part_answer_error(p, msgid, NET_ERR_PEER, name, NULL, line);
    }
    r->restart = w;
    ev_timer_init(&r->restart_deadline, on_restart_deadline, RESTART_WAIT_S, 0);
    ev_timer_start(p->loop, &r->restart_deadline);
}

void agent_ops_stop(struct agent_part *p)
{
    for (size_t i = 0; i < p->n_relays; i++)
        if (p->relays[i].restart) {
            uint32_t msgid = p->relays[i].restart->msgid;
            restart_end(&p->relays[i]);
            part_answer_error(p, msgid, NET_ERR_STOPPED, NULL, NULL,
                              "restart: the part is being released");
        }
}

/* ---- links ---- */

/* A change under way: answered from netrun's callback. */
struct link_op {
    struct agent_part *p;
    uint32_t msgid;
    struct topo_link *link; /* the part's model: follows what took effect */
    struct agent_link req;
    struct topo_link_params params;
    char name[AGENT_LINK_MAX];
};

static void on_link_done(void *ctx, const char *error, const msgpack_object *result)
{
    struct link_op *op = ctx;
    char line[AGENT_ERROR_MAX];
    if (error) {
        snprintf(line, sizeof line, "link %s: %s: %s", op->name, agent_link_op_name(op->req.op),
                 error);
        part_answer_error(op->p, op->msgid, NET_ERR_ENVIRONMENT, NULL, op->name, line);
    } else {
        if (op->req.op == AGENT_LINK_SET) op->link->params = op->params;
        if (op->req.op != AGENT_LINK_SET) op->link->up = op->req.op == AGENT_LINK_UP;
        part_answer_done(op->p, op->msgid);
    }
    free(op);
}

/* The op filled from the request, or -1 with the refusal answered. */
static long link_op_read(struct agent_part *p, uint32_t msgid, const msgpack_object *params,
                         struct link_op *op)
{
    char line[600];
    const struct topo_part *part = built_part(p, msgid, "link");
    if (!part) return -1;
    if (agent_wire_read_link(params, &op->req, line, sizeof line) < 0)
        return refuse(p, msgid, line), -1;
    long l = topo_part_link(part, op->req.link);
    if (l < 0) {
        snprintf(line, sizeof line, "link: link %llu is not in this machine's part",
                 (unsigned long long)op->req.link);
        return refuse(p, msgid, line), -1;
    }
    op->link = &part->net->links[l];
    topo_link_describe(part->net, op->link, op->name, sizeof op->name);
    if (op->req.op == AGENT_LINK_SET &&
        topo_part_params_read(op->req.params, &op->params, line, sizeof line) < 0) {
        part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, op->name, line);
        return -1;
    }
    return l;
}

void agent_part_link(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    struct link_op *op = calloc(1, sizeof *op);
    if (!op) return refuse(p, msgid, "link: out of memory");
    *op = (struct link_op){.p = p, .msgid = msgid};
    long l = link_op_read(p, msgid, params, op);
    if (l < 0) return free(op);
    struct netrun *nr = part_netrun(p->run);
    char err[400], line[600];
    op->req.params = NULL; /* into the message: gone once this returns */
    int rc = op->req.op == AGENT_LINK_SET
                 ? netrun_link_set(nr, (int)l, &op->params, on_link_done, op, err, sizeof err)
                 : netrun_link_updown(nr, (int)l, op->req.op == AGENT_LINK_UP, on_link_done, op,
                                      err, sizeof err);
    if (rc == 0) return on_link_done(op, NULL, NULL); /* not emulated: the model alone */
    if (rc > 0) return;
    snprintf(line, sizeof line, "link %s: %s: %s", op->name, agent_link_op_name(op->req.op), err);
    part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, op->name, line);
    free(op);
}

/* ---- a link's counters ---- */

struct counters_op {
    struct agent_part *p;
    uint32_t msgid;
    uint64_t whole;
    char name[AGENT_LINK_MAX];
};

/* The part's answer with the whole network's link as its id: the
 * controller merges a cut link's two ends by it. */
static void on_counters(void *ctx, const char *error, const msgpack_object *result)
{
    struct counters_op *op = ctx;
    char line[AGENT_ERROR_MAX];
    if (error || !result || result->type != MSGPACK_OBJECT_MAP) {
        snprintf(line, sizeof line, "link %s: %s", op->name,
                 error ? error : "no counters in the answer");
        part_answer_error(op->p, op->msgid, NET_ERR_ENVIRONMENT, NULL, op->name, line);
        return free(op);
    }
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "id", op->whole);
    for (uint32_t i = 0; i < result->via.map.size; i++) {
        const msgpack_object_kv *kv = &result->via.map.ptr[i];
        char key[32];
        if (kv->key.type != MSGPACK_OBJECT_STR || kv->key.via.str.size >= sizeof key) continue;
        snprintf(key, sizeof key, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
        if (!strcmp(key, "id")) continue; /* the part's own index */
        msgmap_key(&m, key);
        msgpack_pack_object(&m.pk, kv->val);
    }
    if (!msgmap_response(&m, op->p->io.pk, op->msgid))
        part_answer_error(op->p, op->msgid, NET_ERR_ENVIRONMENT, NULL, op->name,
                          "counters: out of memory");
    op->p->io.flush(op->p->io.ctx);
    free(op);
}

void agent_part_counters(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    char line[600], err[400];
    uint64_t whole;
    const struct topo_part *part = built_part(p, msgid, "counters");
    if (!part) return;
    if (agent_wire_read_counters(params, &whole, line, sizeof line) < 0)
        return refuse(p, msgid, line);
    long l = topo_part_link(part, whole);
    if (l < 0) {
        snprintf(line, sizeof line, "counters: link %llu is not in this machine's part",
                 (unsigned long long)whole);
        return refuse(p, msgid, line);
    }
    struct counters_op *op = calloc(1, sizeof *op);
    if (!op) return refuse(p, msgid, "counters: out of memory");
    *op = (struct counters_op){.p = p, .msgid = msgid, .whole = whole};
    topo_link_describe(part->net, &part->net->links[l], op->name, sizeof op->name);
    if (netrun_link_stats(part_netrun(p->run), (int)l, on_counters, op, err, sizeof err) > 0)
        return;
    snprintf(line, sizeof line, "link %s: %s", op->name, err);
    part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, op->name, line);
    free(op);
}

/* ---- a link's trace ---- */

void agent_part_trace(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    char line[AGENT_ERROR_MAX], err[600], name[AGENT_LINK_MAX];
    struct agent_trace req;
    struct topo_trace trace;
    const struct topo_part *part = built_part(p, msgid, "trace");
    if (!part) return;
    if (agent_wire_read_trace(params, &req, line, sizeof line) < 0) return refuse(p, msgid, line);
    long l = topo_part_link(part, req.link);
    if (l < 0) {
        snprintf(line, sizeof line, "trace: link %llu is not in this machine's part",
                 (unsigned long long)req.link);
        return refuse(p, msgid, line);
    }
    topo_link_describe(part->net, &part->net->links[l], name, sizeof name);
    struct trace_player_opts o = {(enum topo_trace_interp)req.interp, req.loop,
                                  (double)req.step_ns / 1e9, 1};
    int rc = topo_trace_read(req.trace, &trace, err, sizeof err);
    if (rc == 0) /* takes the trace, also on failure */
        rc = netrun_link_trace(part_netrun(p->run), (int)l, (int)req.dir, &trace, &o, err,
                               sizeof err);
    if (rc == 0) return part_answer_done(p, msgid);
    snprintf(line, sizeof line, "link %s: %s", name, err);
    part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, name, line);
}

/* ---- partitions ---- */

struct side_op {
    struct agent_part *p;
    uint32_t msgid;
    bool heal;
    size_t healed;
};

static void on_sides_done(void *ctx, const char *error, const msgpack_object *result)
{
    struct side_op *op = ctx;
    char line[600];
    if (error) {
        snprintf(line, sizeof line, "%s: %s", op->heal ? "heal" : "partition", error);
        part_answer_error(op->p, op->msgid, NET_ERR_ENVIRONMENT, NULL, NULL, line);
    } else if (op->heal) {
        struct msgmap m;
        msgmap_init(&m);
        agent_wire_heal_reply(&m, op->healed);
        msgmap_response(&m, op->p->io.pk, op->msgid);
        op->p->io.flush(op->p->io.ctx);
    } else {
        part_answer_done(op->p, op->msgid);
    }
    free(op);
}

/* The part's side of each of its nodes (remote ones too) from the whole
 * network's: NULL with the refusal answered when sides is too short. */
static unsigned char *local_sides(struct agent_part *p, uint32_t msgid, const char *what,
                                  const struct agent_sides *whole)
{
    const struct topo_part *part = part_model(p->run);
    unsigned char *side = calloc(part->net->n_nodes ? part->net->n_nodes : 1, 1);
    char line[300];
    if (!side) return refuse(p, msgid, "out of memory"), NULL;
    for (size_t i = 0; i < part->net->n_nodes; i++) {
        size_t w = (size_t)part->whole_node[i];
        if (w >= whole->n) {
            snprintf(line, sizeof line,
                     "%s: field 'sides': %zu entries, but node %s of this machine's part is "
                     "node %zu of the whole network",
                     what, whole->n, part->net->nodes[i].name, w);
            free(side);
            return refuse(p, msgid, line), NULL;
        }
        side[i] = whole->side[w];
    }
    return side;
}

static void sides_request(struct agent_part *p, uint32_t msgid, const msgpack_object *params,
                          bool heal)
{
    const char *what = heal ? "heal" : "partition";
    struct agent_sides whole;
    char err[400];
    if (!built_part(p, msgid, what)) return;
    if (agent_wire_read_sides(what, params, !heal, &whole, err, sizeof err) < 0)
        return refuse(p, msgid, err);
    bool given = whole.side != NULL;
    unsigned char *side = given ? local_sides(p, msgid, what, &whole) : NULL;
    agent_sides_free(&whole);
    if (given && !side) return;
    struct side_op *op = calloc(1, sizeof *op);
    if (!op) return free(side), refuse(p, msgid, "out of memory");
    *op = (struct side_op){p, msgid, heal, 0};
    struct netrun *nr = part_netrun(p->run);
    int rc = heal ? netrun_heal(nr, side, &op->healed, on_sides_done, op, err, sizeof err)
                  : netrun_partition(nr, side, on_sides_done, op, err, sizeof err);
    free(side);
    if (rc == 0) return on_sides_done(op, NULL, NULL); /* heal: none went */
    if (rc > 0) return;
    char line[600];
    snprintf(line, sizeof line, "%s: %s", what, err);
    refuse(p, msgid, line);
    free(op);
}

void agent_part_partition(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    sides_request(p, msgid, params, false);
}

void agent_part_heal(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    sides_request(p, msgid, params, true);
}
