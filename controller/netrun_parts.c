/* netrun_parts.c — a network spread over machines (issue 20; docs/
 * design-notes.md, "The seam."): one netrun whose parts are this
 * machine's, a netrun of its own built by the same code as a local run
 * (topo/part.h's planned network), and one per other machine, built by
 * that machine's agent (controller/agent_client.h) from the part's wire
 * form. The build goes to every part and ends when the last answers; the
 * peers of every part are the outer netrun's (peers[node].client: the
 * local part's clients and the agents' relayed ones, borrowed), so the
 * handshake, the address book and every peer command are unchanged. The
 * changes about one node or link go to the part that holds it: the local
 * one, or the agent of the machine that holds the whole of it (link set,
 * up and down, kill, restart: a remote node's relayed client is replaced
 * and holds its calls until the agent answers); a cut link's change, a
 * partition and a heal go to every part concerned. Owns: the local part
 * and its netrun, the agents (agent_group, taken over at the build). */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "common/json.h"
#include "controller/record.h"
#include "controller/agent_client.h"
#include "controller/agent_group.h"
#include "controller/linkd_stalls.h"
#include "controller/log.h"
#include "controller/overload.h"
#include "controller/parts_underlay.h"
#include "controller/tcp_counters.h"
#include "controller/trace_player.h"
#include "proto/protocol.h"
#include "topo/address.h"
#include "topo/part_wire.h"
#include "topo/route_change.h"
#include "topo/trace_wire.h"

#include <arpa/inet.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct netrun_parts {
    struct netrun *nr; /* the outer one */
    struct agent_group *agents;
    struct topo_machines machines; /* names and addresses, for messages */
    struct topo_placement placement;
    struct topo_routing routing; /* the whole network's */
    size_t local;                /* the controller's machine, or machines.n: none */
    struct topo_part part;       /* the local machine's */
    struct netrun *inner;        /* its netrun, once its build began */
    int *local_node;             /* per whole node: its index in part, or -1 */
    int *local_link;             /* per whole link: its index in part (not cut), or -1 */
    int *end_link;               /* per whole link: its index in part, cut ones too, or -1 */
    struct agent_client **agent; /* per machine: its agent, NULL for the local one */
    size_t parts_left;           /* machines with nodes whose part has not answered */
    struct net_error error;      /* the build's first failure */
    ev_timer build_deadline;     /* every part answered by then, or the build fails */
    double build_timeout_s;
    bool built, inner_done, agents_down, tearing, releasing, routed;
    /* A move over machines is in flight (netrun_parts_move): p->routing is
     * its "before" until every machine answered, so a second one waits. */
    bool moving;
    netrun_released_fn released;
    void *released_ctx;
    ev_idle later; /* the release's and the failed build's end, from the loop */
    /* The build, step by step (progress()): per machine its underlay
     * address, whether it is known, whether its agent answered hello, its part's
     * stage (enum part_stage) and a remote part's wire form until sent;
     * the underlay's delays, measured pair by pair; the build's config
     * (its strings copied: the caller's may go). */
    struct parts_underlay *probe;
    uint32_t *underlay;
    bool *known, *hello;
    unsigned char *stage;
    msgpack_sbuffer *wire;
    struct topo_part_plan plan;
    struct netrun_config cfg;
    char run_id[TOPO_PART_RUN_ID_MAX];
    char peer_path[PATH_MAX];
    char agents_why[512]; /* begins an agent's failure line (netrun_spread.why) */
    struct agent_client_options agent_opts;
    netrun_agents_fn agents_ready;
    void *agents_ctx;
    /* Per whole node: a remote host's TCP counters in its agent's last
     * sample (net:tcp), NULL until the first sample. */
    struct remote_tcp *remote_tcp;
    /* Programs in other machines' nodes, by the id their agents know. */
    struct remote_program *programs;
    size_t n_programs, cap_programs;
    uint64_t last_program_id;
    struct overload *overload; /* the run's account, for the agents' linkd stalls (borrowed) */
};

/* A machine's part: none (no nodes), waiting for its cut links' round
 * trips, made (a remote one waits for its agent), sent or begun here,
 * answered. */
enum part_stage { PART_NONE, PART_WAITING, PART_MADE, PART_SENT, PART_ANSWERED };

struct remote_program {
    uint64_t id;
    struct netprog *prog;
    int machine;
};

struct remote_tcp {
    struct tcp_counters c;
    bool seen;
};

/* ---- helpers for the public functions ---- */

static const char *machine_of(const struct netrun_parts *p, int node)
{
    return p->machines.v[p->placement.machine[node]].name;
}

int netrun_parts_node(const struct netrun *nr, int node, const char *what, char *err, size_t errlen)
{
    const struct netrun_parts *p = nr->parts;
    if (p->local_node[node] >= 0) return p->local_node[node];
    snprintf(err, errlen, "it is on machine %s: %s a remote node is not available yet",
             machine_of(p, node), what);
    return -1;
}

int netrun_parts_local_link(const struct netrun *nr, int link)
{
    return netrun_parts_inner(nr) ? nr->parts->local_link[link] : -1;
}

/* A change asked of several parts (both ends of a cut link, every part
 * for a partition): the caller told once, when the last has answered,
 * with the first failure. left counts a guard until every part was asked. */
struct parts_countdown {
    int left, asked;
    char error[AGENT_ERROR_MAX + 128];
    peer_reply_fn cb;
    void *ctx;
};

static void on_part_done(void *ctx, const char *error, const msgpack_object *result)
{
    struct parts_countdown *c = ctx;
    (void)result;
    if (error && !c->error[0]) snprintf(c->error, sizeof c->error, "%s", error);
    if (--c->left > 0) return;
    msgpack_object done = {.type = MSGPACK_OBJECT_MAP};
    c->cb(c->ctx, c->error[0] ? c->error : NULL, c->error[0] ? NULL : &done);
    free(c);
}

static struct parts_countdown *countdown_new(peer_reply_fn cb, void *ctx)
{
    struct parts_countdown *c = calloc(1, sizeof *c);
    if (c) *c = (struct parts_countdown){.left = 1, .cb = cb, .ctx = ctx};
    return c;
}

/* One part's request went (rc >= 0: its answer is awaited, rc 0 from a
 * local netrun_heal: nothing to do there) or failed at once (err). */
static void countdown_asked(struct parts_countdown *c, int rc, bool answers, const char *err)
{
    if (rc < 0 && !c->error[0]) snprintf(c->error, sizeof c->error, "%s", err);
    if (rc >= 0 && answers) c->left++, c->asked++;
}

/* Every part asked: 1 (cb follows, from the loop), 0 when no part had an
 * answer to give (all done at once: cb is not called, so that no caller
 * hears of its change before the call returns), or -1 with err when no
 * part could be asked. */
static int countdown_end(struct parts_countdown *c, char *err, size_t errlen)
{
    if (!c->asked) {
        int rc = c->error[0] ? (snprintf(err, errlen, "%s", c->error), -1) : 0;
        free(c);
        return rc;
    }
    on_part_done(c, NULL, NULL); /* the guard: answers are awaited, none came yet */
    return 1;
}

/* Asks the end of link on machine m (its agent, or the local part). */
static int link_end_change(struct netrun *nr, int m, int link, enum agent_link_op op,
                           const struct topo_link_params *params, struct parts_countdown *c,
                           char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    if ((size_t)m != p->local)
        return agent_client_link(p->agent[m], link, op, params, on_part_done, c, err, errlen);
    if (!netrun_parts_inner(nr) || p->end_link[link] < 0)
        return snprintf(err, errlen, "the local part has no end of it"), -1;
    int l = p->end_link[link];
    return op == AGENT_LINK_SET
               ? netrun_link_set(p->inner, l, params, on_part_done, c, err, errlen)
               : netrun_link_updown(p->inner, l, op == AGENT_LINK_UP, on_part_done, c, err, errlen);
}

int netrun_parts_link_remote(struct netrun *nr, int link, enum agent_link_op op,
                             const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                             char *err, size_t errlen)
{
    const struct topo_link *l = &nr->net->links[link];
    int ends[2] = {nr->parts->placement.machine[l->a], nr->parts->placement.machine[l->b]};
    struct parts_countdown *c = countdown_new(cb, ctx);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    for (int e = 0; e < (ends[0] == ends[1] ? 1 : 2); e++) {
        char why[AGENT_ERROR_MAX];
        int rc = link_end_change(nr, ends[e], link, op, params, c, why, sizeof why);
        countdown_asked(c, rc, true, why);
    }
    return countdown_end(c, err, errlen);
}

/* ---- programs in other machines' nodes ---- */

static struct remote_program *program_find(struct netrun_parts *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_programs; i++)
        if (p->programs[i].id == id) return &p->programs[i];
    return NULL;
}

static void on_program_signalled(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx, (void)result;
    if (error) ctl_log("warning: %s", error); /* the program's end, or its machine's loss */
}

static void program_signal(void *ctx, uint64_t id, int sig)
{
    struct netrun_parts *p = ctx;
    struct remote_program *rp = program_find(p, id);
    char err[256];
    if (rp && agent_client_signal(p->agent[rp->machine], id, sig, on_program_signalled, NULL, err,
                                  sizeof err) < 0)
        ctl_log("warning: signal %d to a program on machine %s: %s", sig,
                p->machines.v[rp->machine].name, err);
}

/* A liveness probe (signal 0): the agent answers {alive} (netprog.h). */
static int program_probe(void *ctx, uint64_t id, peer_reply_fn cb, void *cb_ctx, char *err,
                         size_t errlen)
{
    struct netrun_parts *p = ctx;
    struct remote_program *rp = program_find(p, id);
    if (!rp) return snprintf(err, errlen, "program %llu is not known", (unsigned long long)id), -1;
    return agent_client_signal(p->agent[rp->machine], id, 0, cb, cb_ctx, err, errlen);
}

static void program_forget(void *ctx, uint64_t id)
{
    struct netrun_parts *p = ctx;
    struct remote_program *rp = program_find(p, id);
    if (rp) *rp = p->programs[--p->n_programs];
}

/* Its end: out and err copied to be NUL-terminated, as netprog gives them. */
static void program_end(struct netrun_parts *p, uint64_t id, int status, const char *out,
                        size_t out_len, const char *err, size_t err_len)
{
    struct remote_program *rp = program_find(p, id);
    if (!rp) return; /* released meanwhile */
    char *o = strndup(out ? out : "", out_len), *e = strndup(err ? err : "", err_len);
    struct netprog_result r = {status, o ? o : "", e ? e : "", o ? out_len : 0, e ? err_len : 0};
    netprog_remote_ended(rp->prog, &r); /* forget follows */
    free(o);
    free(e);
}

static void on_agent_program(void *ctx, struct agent_client *ac, const struct agent_program *x)
{
    (void)ac;
    program_end(ctx, x->id, (int)x->status, x->out, x->out_len, x->err, x->err_len);
}

/* A machine lost: its programs will send no end, so each ends here as
 * its node did (137, SIGKILL), the loss's line as its stderr; otherwise
 * n:run and p:wait() in its nodes would wait until the network stops. */
static void on_agent_lost(void *ctx, struct agent_client *ac, const char *why)
{
    struct netrun_parts *p = ctx;
    int m = topo_machines_find(&p->machines, agent_client_machine(ac));
    for (size_t i = 0; m >= 0 && i < p->n_programs;)
        if (p->programs[i].machine == m) /* forgotten: the last one moves to i */
            program_end(p, p->programs[i].id, 128 + SIGKILL, "", 0, why, strlen(why));
        else
            i++;
}

struct program_start {
    struct netrun_parts *p;
    uint64_t id;
};

/* The agent started it (its pid), or could not: a status of 127 and the
 * agent's line as its stderr, as a shell says of a command it cannot run. */
static void on_program_started(void *ctx, const char *error, const msgpack_object *result)
{
    struct program_start *s = ctx;
    struct remote_program *rp = program_find(s->p, s->id);
    struct proto_args a;
    int64_t pid = 0;
    if (rp && !error && result) {
        proto_args_init(&a, result);
        if (proto_arg_i64(&a, "pid", &pid) == 1) netprog_remote_started(rp->prog, (pid_t)pid);
    } else if (rp) {
        const char *why = error ? error : "no answer";
        program_end(s->p, s->id, 127, "", 0, why, strlen(why));
    }
    free(s);
}

struct netprog *netrun_program_remote(struct netrun *nr, struct netprog_list *list, int node,
                                      char *const argv[], netprog_done_fn done, void *ctx,
                                      char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    int m = p ? p->placement.machine[node] : -1;
    if (!p || (size_t)m == p->local || !p->agent[m])
        return snprintf(err, errlen, "it is on no other machine's part"), NULL;
    struct remote_program *grown = p->programs;
    if (p->n_programs == p->cap_programs) {
        size_t cap = p->cap_programs ? 2 * p->cap_programs : 8;
        if (!(grown = realloc(p->programs, cap * sizeof *grown)))
            return snprintf(err, errlen, "out of memory"), NULL;
        p->programs = grown;
        p->cap_programs = cap;
    }
    struct program_start *s = malloc(sizeof *s);
    uint64_t id = ++p->last_program_id;
    struct netprog_remote hooks = {id, program_signal, program_probe, program_forget, p};
    struct netprog *prog =
        s ? netprog_remote_add(list, node, &hooks, done, ctx, err, errlen) : NULL;
    if (!prog) {
        free(s);
        return snprintf(err, errlen, "out of memory"), NULL;
    }
    p->programs[p->n_programs++] = (struct remote_program){id, prog, m};
    *s = (struct program_start){p, id};
    size_t argc = 0;
    while (argv[argc])
        argc++;
    struct agent_run r = {(uint64_t)node, id, (char **)argv, argc};
    if (agent_client_run(p->agent[m], &r, on_program_started, s, err, errlen) < 0) {
        free(s);
        netprog_remote_drop(prog); /* never started: no end to tell */
        return NULL;
    }
    return prog;
}

/* ---- a link's trace ---- */

static void on_trace_answer(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx, (void)result;
    if (error) ctl_log("warning: %s", error); /* l:trace has returned: the line names it */
}

/* The local part's end of link plays the trace: a copy read back from its
 * wire form, so that one code path gives the agents' and this one's. */
static int trace_local_end(struct netrun_parts *p, int link, const struct agent_trace *t,
                           const msgpack_sbuffer *sb, char *err, size_t errlen)
{
    struct topo_trace copy;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int rc = msgpack_unpack_next(&u, sb->data, sb->size, NULL) == MSGPACK_UNPACK_SUCCESS
                 ? topo_trace_read(&u.data, &copy, err, errlen)
                 : (snprintf(err, errlen, "out of memory"), -1);
    msgpack_unpacked_destroy(&u);
    if (rc < 0) return -1;
    struct trace_player_opts o = {(enum topo_trace_interp)t->interp, t->loop,
                                  (double)t->step_ns / 1e9, 1};
    if (!netrun_parts_inner(p->nr) || p->end_link[link] < 0) {
        topo_trace_free(&copy);
        return snprintf(err, errlen, "the local part has no end of it"), -1;
    }
    return netrun_link_trace(p->inner, p->end_link[link], (int)t->dir, &copy, &o, err, errlen);
}

int netrun_parts_trace(struct netrun *nr, int link, int dir, const struct topo_trace *trace,
                       const struct trace_player_opts *opts, char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    const struct topo_link *l = &nr->net->links[link];
    int ends[2] = {p->placement.machine[l->a], p->placement.machine[l->b]};
    /* This machine's end first: its refusal (the kernel backend's of a
     * delay or loss column) comes before any agent plays the trace, so a
     * refused l:trace leaves no end playing it (an agent's refusal comes
     * later and is only logged). */
    if ((size_t)ends[1] == p->local) ends[1] = ends[0], ends[0] = (int)p->local;
    struct agent_trace t = {(uint64_t)link,
                            (uint64_t)dir,
                            (uint64_t)opts->interp,
                            opts->loop,
                            (uint64_t)llround(opts->step_s * 1e9),
                            NULL};
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int rc = topo_trace_pack(&pk, trace) ? 0 : (snprintf(err, errlen, "out of memory"), -1);
    for (int e = 0; rc == 0 && e < (ends[0] == ends[1] ? 1 : 2); e++)
        rc = (size_t)ends[e] == p->local
                 ? trace_local_end(p, link, &t, &sb, err, errlen)
                 : agent_client_trace(p->agent[ends[e]], &t, sb.data, sb.size, on_trace_answer,
                                      NULL, err, errlen);
    msgpack_sbuffer_destroy(&sb);
    return rc < 0 ? -1 : 0;
}

/* ---- a link's counters (l:stats) ---- */

/* l:stats of a link between two machines: each direction is counted by
 * its sending end's machine, where hiernet-linkd applies its queue, rate
 * and loss (emu/linkd/forward.c, dir_keep_own_params; the receiving end
 * only delays), as links.csv keeps it (stats_row_kept): `ab` from a's
 * machine, `ba` from b's, `up` both ends'. */
struct counters_merge {
    struct counters_end {
        struct counters_merge *merge;
        msgpack_sbuffer answer; /* the end's result, packed */
    } end[2];
    int link, left;
    peer_reply_fn cb;
    void *ctx;
    char error[AGENT_ERROR_MAX + 128];
};

static void merge_free(struct counters_merge *c)
{
    msgpack_sbuffer_destroy(&c->end[0].answer);
    msgpack_sbuffer_destroy(&c->end[1].answer);
    free(c);
}

/* The value of key in end e's answer (u holds it), or NULL. */
static const msgpack_object *end_value(struct counters_merge *c, int e, msgpack_unpacked *u,
                                       const char *key)
{
    msgpack_sbuffer *sb = &c->end[e].answer;
    if (msgpack_unpack_next(u, sb->data, sb->size, NULL) != MSGPACK_UNPACK_SUCCESS) return NULL;
    struct proto_args a;
    proto_args_init(&a, &u->data);
    return proto_args_get(&a, key);
}

/* Both ends answered: {id, up, ab = a's end's, ba = b's end's} to cb. */
static void merge_finish(struct counters_merge *c)
{
    msgpack_unpacked u[4];
    for (int k = 0; k < 4; k++)
        msgpack_unpacked_init(&u[k]);
    const msgpack_object *up_a = end_value(c, 0, &u[0], "up"), *up_b = end_value(c, 1, &u[1], "up");
    const msgpack_object *ab = end_value(c, 0, &u[2], "ab"), *ba = end_value(c, 1, &u[3], "ba");
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, "id", c->link);
    msgmap_bool(&m, "up",
                up_a && up_b && up_a->type == MSGPACK_OBJECT_BOOLEAN &&
                    up_b->type == MSGPACK_OBJECT_BOOLEAN && up_a->via.boolean && up_b->via.boolean);
    msgmap_key(&m, "ab");
    ab ? msgpack_pack_object(&m.pk, *ab) : msgpack_pack_map(&m.pk, 0);
    msgmap_key(&m, "ba");
    ba ? msgpack_pack_object(&m.pk, *ba) : msgpack_pack_map(&m.pk, 0);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked out;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_unpacked_init(&out);
    bool ok = msgmap_end(&m, &pk) &&
              msgpack_unpack_next(&out, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS;
    c->cb(c->ctx, ok ? NULL : "counters: out of memory", ok ? &out.data : NULL);
    msgpack_unpacked_destroy(&out);
    msgpack_sbuffer_destroy(&sb);
    for (int k = 0; k < 4; k++)
        msgpack_unpacked_destroy(&u[k]);
}

static void on_end_counters(void *ctx, const char *error, const msgpack_object *result)
{
    struct counters_end *end = ctx;
    struct counters_merge *c = end->merge;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &end->answer, msgpack_sbuffer_write);
    if (error && !c->error[0]) snprintf(c->error, sizeof c->error, "%s", error);
    if (!error && result) msgpack_pack_object(&pk, *result);
    if (--c->left > 0) return;
    if (c->error[0])
        c->cb(c->ctx, c->error, NULL);
    else
        merge_finish(c);
    merge_free(c);
}

/* Asks the end of link on machine m for its counters: >= 0 (answered
 * later), or -1 with err. */
static int counters_ask(struct netrun *nr, int m, int link, struct counters_end *end, char *err,
                        size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    if ((size_t)m != p->local)
        return agent_client_counters(p->agent[m], link, on_end_counters, end, err, errlen);
    if (!netrun_parts_inner(nr) || p->end_link[link] < 0)
        return snprintf(err, errlen, "the local part has no end of it"), -1;
    return netrun_link_stats(p->inner, p->end_link[link], on_end_counters, end, err, errlen);
}

int netrun_parts_counters(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                          size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    const struct topo_link *l = &nr->net->links[link];
    int ends[2] = {p->placement.machine[l->a], p->placement.machine[l->b]};
    if (p->local_link[link] >= 0) {
        if (!netrun_parts_inner(nr))
            return snprintf(err, errlen, "this machine's part is not built"), -1;
        return netrun_link_stats(p->inner, p->local_link[link], cb, ctx, err, errlen);
    }
    if (ends[0] == ends[1])
        return agent_client_counters(p->agent[ends[0]], link, cb, ctx, err, errlen) < 0 ? -1 : 1;
    struct counters_merge *c = calloc(1, sizeof *c);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    *c = (struct counters_merge){.link = link, .left = 2, .cb = cb, .ctx = ctx};
    for (int e = 0; e < 2; e++) {
        c->end[e].merge = c;
        msgpack_sbuffer_init(&c->end[e].answer);
    }
    int failed = 0;
    for (int e = 0; e < 2; e++)
        if (counters_ask(nr, ends[e], link, &c->end[e], err, errlen) < 0) failed++, c->left--;
    if (failed == 2) return merge_free(c), -1;
    if (failed && !c->error[0]) snprintf(c->error, sizeof c->error, "%s", err);
    return 1;
}

/* The local part's sides (per part node) of the whole network's, or NULL. */
static unsigned char *local_sides(const struct netrun_parts *p, const unsigned char *side)
{
    unsigned char *out = malloc(p->part.net->n_nodes ? p->part.net->n_nodes : 1);
    for (size_t i = 0; out && i < p->part.net->n_nodes; i++)
        out[i] = side[p->part.whole_node[i]];
    return out;
}

/* The local part's partition or heal (side NULL: every partition). */
static int local_sides_change(struct netrun_parts *p, bool heal, const unsigned char *side,
                              struct parts_countdown *c, char *err, size_t errlen)
{
    unsigned char *mine = side ? local_sides(p, side) : NULL;
    if (side && !mine) return snprintf(err, errlen, "out of memory"), -1;
    int rc = heal ? netrun_heal(p->inner, mine, NULL, on_part_done, c, err, errlen)
                  : netrun_partition(p->inner, mine, on_part_done, c, err, errlen);
    free(mine); /* copied by the part's netrun */
    return rc;
}

int netrun_parts_sides(struct netrun *nr, bool heal, const unsigned char *side, peer_reply_fn cb,
                       void *ctx, char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    struct parts_countdown *c = countdown_new(cb, ctx);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    enum agent_method method = heal ? AGENT_HEAL : AGENT_PARTITION;
    for (size_t m = 0; m < p->machines.n; m++) {
        char why[AGENT_ERROR_MAX];
        int rc;
        if (!p->placement.count[m]) continue;
        if (m == p->local && !netrun_parts_inner(nr)) continue;
        if (m == p->local)
            rc = local_sides_change(p, heal, side, c, why, sizeof why);
        else
            rc = agent_client_sides(p->agent[m], method, side, nr->net->n_nodes, on_part_done, c,
                                    why, sizeof why);
        countdown_asked(c, rc, m != p->local || rc > 0, why);
    }
    return countdown_end(c, err, errlen);
}

/* ---- a move (t:move) ---- */

/* A move the parts can make at run time: the link, its end that stays,
 * where it was and where it goes all on one machine, so that it is no
 * cut link before or after. Otherwise one line naming the link and the
 * machines: a new VXLAN device or linkd UDP link would be needed, which
 * the parts make at their build only. */
static int move_placed(const struct netrun_parts *p, int l, int stays, int to, char *err,
                       size_t errlen)
{
    const struct topo_network *net = p->nr->net;
    const struct topo_link *link = &net->links[l];
    int from = link->a == stays ? link->b : link->a;
    const int *at = p->placement.machine;
    if (at[stays] == at[from] && at[from] == at[to]) return 0;
    char name[80];
    topo_link_describe(net, link, name, sizeof name);
    return snprintf(err, errlen,
                    "link %s: moving its end from %s (machine %s) to %s (machine %s), %s staying "
                    "on machine %s, would make or remove a link between machines at run time, "
                    "which the engine cannot (only a link within one machine moves)",
                    name, net->nodes[from].name, machine_of(p, from), net->nodes[to].name,
                    machine_of(p, to), net->nodes[stays].name, machine_of(p, stays)),
           -1;
}

int netrun_parts_move_check(const struct netrun *nr, int l, int stays, int to, char *err,
                            size_t errlen)
{
    return move_placed(nr->parts, l, stays, to, err, errlen);
}

/* Machine m's hosts' changes from routing `before` to `after` (leaf: the
 * node that moved, whose /32 every other host gets along its path). */
static int machine_changes(const struct netrun_parts *p, size_t m,
                           const struct topo_routing *before, const struct topo_routing *after,
                           int leaf, struct topo_route_changes *out)
{
    const struct topo_network *net = p->nr->net;
    for (size_t i = 0; i < net->n_nodes; i++)
        if ((size_t)p->placement.machine[i] == m && net->nodes[i].kind == TOPO_NODE_HOST &&
            topo_route_changes_of(net, before, after, (int)i, leaf, out) < 0)
            return -1;
    return 0;
}

/* The local part's share: its indices, then netrun_link_move_routes. */
static int move_local(struct netrun_parts *p, const struct topo_route_changes *c, int l, int stays,
                      int to, char *err, size_t errlen)
{
    struct topo_route_change *mine = calloc(c->n ? c->n : 1, sizeof *mine);
    if (!mine) return snprintf(err, errlen, "out of memory"), -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < c->n; i++)
        if (topo_part_route_from_whole(&p->part, c->v[i].node, &c->v[i].route, &mine[i].node,
                                       &mine[i].route) < 0)
            rc = (snprintf(err, errlen, "a route of node %s leaves the local part",
                           p->nr->net->nodes[c->v[i].node].name),
                  -1);
    int part_l = l >= 0 ? p->local_link[l] : -1;
    if (rc == 0)
        rc = netrun_link_move_routes(p->inner, part_l, part_l >= 0 ? p->local_node[stays] : -1,
                                     part_l >= 0 ? p->local_node[to] : -1, mine, c->n, err, errlen);
    free(mine);
    return rc;
}

/* Machine m's agent's share: the reroute request (cb follows). */
static int move_remote(struct netrun_parts *p, size_t m, const struct topo_route_changes *c, int l,
                       int stays, int to, peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct agent_route *routes = calloc(c->n ? c->n : 1, sizeof *routes);
    if (!routes)
        return snprintf(err, errlen, "machine '%s': out of memory", p->machines.v[m].name), -1;
    for (size_t i = 0; i < c->n; i++) {
        const struct topo_route *r = &c->v[i].route;
        routes[i] = (struct agent_route){(uint64_t)c->v[i].node,
                                         (uint64_t)r->link,
                                         r->dst,
                                         r->gateway,
                                         r->dst_len,
                                         r->dst_node,
                                         r->via};
    }
    struct agent_reroute req = {
        l >= 0, (uint64_t)(l >= 0 ? l : 0), (uint64_t)stays, (uint64_t)to, routes, c->n};
    int rc = agent_client_reroute(p->agent[m], &req, cb, ctx, err, errlen);
    free(routes);
    return rc;
}

/* A move over machines, asked of every machine, committed to the model
 * (p->routing, the link's ends) only when every machine has applied its
 * share; otherwise undone on every machine that may have applied some of
 * it, by the inverse share (docs/design-notes.md, "A move over machines
 * that fails on one"). */
enum share_state {
    SHARE_NONE,    /* not asked: no nodes there, or the local part not built */
    SHARE_PENDING, /* asked; its agent's answer is awaited */
    SHARE_DONE,    /* applied */
    SHARE_FAILED,  /* answered with an error: it may have applied some */
    SHARE_UNSENT,  /* could not be asked: nothing applied */
};

struct parts_move;

struct move_share {
    struct parts_move *mv;
    size_t m;
};

struct parts_move {
    struct netrun_parts *p;
    int l, stays, to, from;
    size_t holder;             /* the machine that holds the link */
    struct topo_link saved;    /* the link before (the undo restores its ends) */
    struct topo_routing fresh; /* the whole network's routes after the move */
    struct move_share *share;  /* per machine: its answer's context */
    unsigned char *state;      /* per machine: enum share_state */
    int left;                  /* answers awaited, plus a guard while asking */
    bool undoing;
    bool released;                          /* the network was being released: nothing undone */
    char gone[128];                         /* machines not undone: their agents are gone */
    char error[AGENT_ERROR_MAX + 128];      /* the move's first failure */
    char undo_error[AGENT_ERROR_MAX + 128]; /* the undo's first failure */
    peer_reply_fn cb;
    void *ctx;
};

static void parts_move_free(struct parts_move *mv)
{
    mv->p->moving = false;
    topo_routing_free(&mv->fresh); /* zeroed once committed */
    free(mv->share);
    free(mv->state);
    free(mv);
}

static void move_note(char *line, size_t len, const char *error)
{
    if (!line[0]) snprintf(line, len, "%s", error);
}

/* Machine m's answer (the move's, or the undo's when undoing). */
static void move_share_done(struct parts_move *mv, size_t m, const char *error)
{
    if (mv->undoing) {
        if (error) move_note(mv->undo_error, sizeof mv->undo_error, error);
        return;
    }
    mv->state[m] = error ? SHARE_FAILED : SHARE_DONE;
    if (error) move_note(mv->error, sizeof mv->error, error);
}

static void on_move_answer(void *ctx, const char *error, const msgpack_object *result);

/* Machine m's share of the move (undo: its inverse): 0 done here, 1 its
 * answer follows, -1 with why, one line naming the machine. */
static int move_share_ask(struct parts_move *mv, size_t m, bool undo, char *why, size_t len)
{
    struct netrun_parts *p = mv->p;
    const struct topo_routing *before = undo ? &mv->fresh : &p->routing;
    const struct topo_routing *after = undo ? &p->routing : &mv->fresh;
    /* the holder gets the link back even when it failed: where its
     * interface did not move, moving it back is a no-op
     * (netrun_link_move_routes) */
    int l = m == mv->holder ? mv->l : -1, to = undo ? mv->from : mv->to;
    struct topo_route_changes c = {0};
    int rc;
    char here[AGENT_ERROR_MAX] = "";
    if (machine_changes(p, m, before, after, mv->stays, &c) < 0)
        rc = (snprintf(here, sizeof here, "out of memory"), -1);
    else if (m == p->local)
        rc = move_local(p, &c, l, mv->stays, to, here, sizeof here);
    else /* its lines name the machine already */
        rc = move_remote(p, m, &c, l, mv->stays, to, on_move_answer, &mv->share[m], why, len) < 0
                 ? -1
                 : 1;
    topo_route_changes_free(&c);
    if (here[0]) snprintf(why, len, "machine '%s': %s", p->machines.v[m].name, here);
    return rc;
}

/* Whether the undo skips machine m: its agent is gone (lost, its part
 * torn down), so nothing there needs or can take the inverse; the local
 * part only once released. */
static bool move_undo_skips(struct parts_move *mv, size_t m)
{
    struct netrun_parts *p = mv->p;
    if (m == p->local) return !netrun_parts_inner(p->nr);
    if (!agent_client_gone(p->agent[m])) return false;
    size_t used = strlen(mv->gone);
    snprintf(mv->gone + used, sizeof mv->gone - used, "%s%s", used ? ", " : "",
             p->machines.v[m].name);
    return true;
}

/* Asks every machine with nodes (undo: those that may have applied some of it). */
static void move_ask_all(struct parts_move *mv, bool undo)
{
    struct netrun_parts *p = mv->p;
    mv->left = 1; /* the guard, until every machine was asked */
    for (size_t m = 0; m < p->machines.n; m++) {
        bool ask = undo ? mv->state[m] == SHARE_DONE || mv->state[m] == SHARE_FAILED
                        : p->placement.count[m] && (m != p->local || netrun_parts_inner(p->nr));
        if (!ask || (undo && move_undo_skips(mv, m))) continue;
        char why[AGENT_ERROR_MAX + 64] = "";
        int rc = move_share_ask(mv, m, undo, why, sizeof why);
        if (rc == 1) {
            mv->left++;
            if (!undo) mv->state[m] = SHARE_PENDING;
            continue;
        }
        move_share_done(mv, m, rc < 0 ? why : NULL);
        /* an agent's request that could not go applied nothing; the local
         * part's failure may have applied some of its routes */
        if (!undo && rc < 0 && m != p->local) mv->state[m] = SHARE_UNSENT;
    }
    mv->left--;
}

/* The link's ends and their interface names as before the move (what
 * netrun_move_link_end changed), and only those: a link:set or up/down
 * made while the move was in flight stays. */
static void move_link_back(struct topo_network *net, const struct parts_move *mv)
{
    struct topo_link *link = &net->links[mv->l];
    link->a = mv->saved.a;
    link->b = mv->saved.b;
    memcpy(link->ifname_a, mv->saved.ifname_a, sizeof link->ifname_a);
    memcpy(link->ifname_b, mv->saved.ifname_b, sizeof link->ifname_b);
}

/* Every answer in: the commit, or the undo asked (1: its answers follow). */
static int move_phase_end(struct parts_move *mv)
{
    struct netrun_parts *p = mv->p;
    if (!mv->error[0]) {
        topo_routing_free(&p->routing);
        p->routing = mv->fresh; /* the next move's "before" */
        mv->fresh = (struct topo_routing){0};
        return 0;
    }
    if (mv->undoing) return 0;
    mv->undoing = true;
    move_link_back(p->nr->net, mv);
    if (p->tearing) { /* released meanwhile: nothing left to undo */
        mv->released = true;
        return 0;
    }
    move_ask_all(mv, true);
    return mv->left > 0;
}

/* The move's line once it ended: its failure and what the undo did. */
static void move_result(const struct parts_move *mv, char *out, size_t len)
{
    if (!mv->error[0]) return;
    if (mv->undo_error[0])
        snprintf(out, len,
                 "%s; undoing the move failed too (%s): the machines may not agree on the "
                 "network any more, stop it",
                 mv->error, mv->undo_error);
    else if (mv->released)
        snprintf(out, len, "%s; not undone: the network is being released", mv->error);
    else if (mv->gone[0])
        snprintf(out, len, "%s; the move was undone on every machine but %s, whose agent is gone",
                 mv->error, mv->gone);
    else
        snprintf(out, len, "%s; the move was undone on every machine", mv->error);
}

static void on_move_answer(void *ctx, const char *error, const msgpack_object *result)
{
    struct move_share *s = ctx;
    struct parts_move *mv = s->mv;
    (void)result;
    move_share_done(mv, s->m, error);
    if (--mv->left > 0 || move_phase_end(mv) > 0) return;
    char line[3 * AGENT_ERROR_MAX];
    move_result(mv, line, sizeof line);
    msgpack_object done = {.type = MSGPACK_OBJECT_MAP};
    mv->cb(mv->ctx, mv->error[0] ? line : NULL, mv->error[0] ? NULL : &done);
    parts_move_free(mv);
}

static struct parts_move *parts_move_new(struct netrun_parts *p, int l, int stays, int to,
                                         peer_reply_fn cb, void *ctx)
{
    struct parts_move *mv = calloc(1, sizeof *mv);
    size_t n = p->machines.n ? p->machines.n : 1;
    if (!mv || !(mv->share = calloc(n, sizeof *mv->share)) ||
        !(mv->state = calloc(n, sizeof *mv->state))) {
        if (mv) free(mv->share);
        free(mv);
        return NULL;
    }
    const struct topo_link *link = &p->nr->net->links[l];
    *mv = (struct parts_move){.p = p,
                              .l = l,
                              .stays = stays,
                              .to = to,
                              .from = link->a == stays ? link->b : link->a,
                              .holder = (size_t)p->placement.machine[stays],
                              .saved = *link,
                              .share = mv->share,
                              .state = mv->state,
                              .cb = cb,
                              .ctx = ctx};
    for (size_t m = 0; m < p->machines.n; m++)
        mv->share[m] = (struct move_share){mv, m};
    return mv;
}

/* One move over machines at a time: the next one's routes are computed
 * from the committed ones (p->routing), which a move in flight has not
 * replaced yet, and its link's ends in the model are not final. */
static int move_alone(const struct netrun_parts *p, int l, char *err, size_t errlen)
{
    if (!p->moving) return 0;
    char name[80];
    topo_link_describe(p->nr->net, &p->nr->net->links[l], name, sizeof name);
    return snprintf(err, errlen,
                    "link %s: another move is still in flight over the machines (one at a time: "
                    "wait for its end)",
                    name),
           -1;
}

int netrun_parts_move(struct netrun *nr, int l, int stays, int to, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    if (move_placed(p, l, stays, to, err, errlen) < 0 || move_alone(p, l, err, errlen) < 0)
        return -1;
    struct parts_move *mv = parts_move_new(p, l, stays, to, cb, ctx);
    if (!mv) return snprintf(err, errlen, "out of memory"), -1;
    p->moving = true; /* until parts_move_free */
    int from;
    bool end_a;
    netrun_move_link_end(nr->net, l, stays, to, &end_a, &from);
    if (topo_routing_compute(nr->net, &mv->fresh, err, errlen) < 0) {
        move_link_back(nr->net, mv); /* nothing was asked yet */
        parts_move_free(mv);
        return -1;
    }
    move_ask_all(mv, false);
    if (mv->left > 0 || move_phase_end(mv) > 0) return 1; /* on_move_answer ends it */
    /* every share was this machine's (or failed at once): no cb */
    char line[3 * AGENT_ERROR_MAX];
    move_result(mv, line, sizeof line);
    int rc = mv->error[0] ? (snprintf(err, errlen, "%s", line), -1) : 0;
    parts_move_free(mv);
    return rc;
}

int netrun_parts_kill_remote(struct netrun *nr, int node, peer_reply_fn cb, void *ctx, char *err,
                             size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    struct agent_client *ac = p->agent[p->placement.machine[node]];
    if (p->local_node[node] >= 0 || !ac)
        return snprintf(err, errlen, "it is on no other machine's part"), -1;
    return agent_client_kill(ac, node, cb, ctx, err, errlen);
}

static void on_remote_exit(void *ctx, int wait_status);

static void on_remote_restarted(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx, (void)result;
    if (error) ctl_log("restart: %s", error); /* the new client's calls fail with it */
}

int netrun_parts_restart(struct netrun *nr, int node, char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    struct netrun_peer *peer = &nr->peers[node];
    struct netrun *inner = netrun_parts_inner(nr);
    struct peer_client *fresh = NULL;
    int rc;
    if (p->local_node[node] >= 0) {
        if (!inner) return snprintf(err, errlen, "this machine's part is not built"), -1;
        /* the local part's restart, as on one machine: secret included */
        rc = netrun_peer_restart(inner, p->local_node[node], err, errlen);
        fresh = netrun_peer(inner, p->local_node[node]);
    } else {
        struct agent_client *ac = p->agent[p->placement.machine[node]];
        struct peer_client_hooks hooks = {.on_exit = on_remote_exit, .ctx = peer};
        if (!ac) return snprintf(err, errlen, "it is on no other machine's part"), -1;
        /* the agent gives the new peer its data secret before it answers */
        rc = agent_client_restart(ac, node, nr->net->nodes[node].name, &hooks, &fresh,
                                  on_remote_restarted, NULL, err, errlen);
    }
    if (fresh) { /* the old client may be freed: the borrowed one follows */
        peer->client = fresh;
        peer->killed = false;
        free(peer->told); /* the fresh peer knows no address */
        peer->told = NULL;
    }
    return rc;
}

struct netrun *netrun_parts_inner(const struct netrun *nr)
{
    return nr->parts->inner && nr->parts->inner_done ? nr->parts->inner : NULL;
}

/* ---- links.csv rows of the other machines' parts ---- */

/* Whether machine m's row of link's direction dir is the one kept: a
 * link with an end here is the local part's to count; a cut link between
 * two other machines is counted once, by the sending end's machine. */
static bool stats_row_kept(const struct netrun_parts *p, int m, const struct topo_link *l, int link,
                           const char *dir)
{
    if (p->end_link[link] >= 0) return false;
    int sender = p->placement.machine[dir[0] == 'a' ? l->a : l->b];
    return sender == m || p->placement.machine[l->a] == p->placement.machine[l->b];
}

static void stats_record_row(struct netrun *nr, const char *t, const struct agent_stats_row *r)
{
    char name[80], cells[16][24];
    topo_link_describe(nr->net, &nr->net->links[r->link], name, sizeof name);
    const char *row[16] = {t, nr->net->name, name, r->dir, r->up ? "1" : "0"};
    const int64_t v[] = {
#define AGENT_STATS_VALUE_(field) r->field,
        AGENT_STATS_COUNTERS(AGENT_STATS_VALUE_)
#undef AGENT_STATS_VALUE_
    };
    for (size_t c = 0; c < sizeof v / sizeof *v; c++) {
        if (v[c] >= 0) snprintf(cells[c], sizeof cells[c], "%lld", (long long)v[c]);
        row[5 + c] = v[c] >= 0 ? cells[c] : ""; /* -1: an empty cell, as links.csv leaves it */
    }
    char err[256];
    if (record_add(nr->links_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

/* An agent's time t_ns on the run's clock: the agent's time less its
 * clock offset is this machine's, which is as far back from now on the
 * run's clock as it is in real seconds over the dilation. */
static double agent_run_time(const struct netrun *nr, struct agent_client *ac, int64_t t_ns)
{
    struct clock_offset off = {0};
    agent_client_clock(ac, &off);
    double here_s = (double)t_ns / 1e9 - off.offset_ms / 1e3;
    double dilation = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    double age_s = mono_s() - here_s;
    return nr->clock(nr->clock_ctx) - (age_s > 0 ? age_s : 0) / dilation;
}

/* The agent's stalls into the run's account, named by its machine. */
static void stalls_note(struct netrun_parts *p, struct agent_client *ac,
                        const struct agent_stats *s)
{
    for (size_t i = 0; p->overload && i < s->n_stalls; i++) {
        struct linkd_stall st = {.at_s = p->nr->clock ? agent_run_time(p->nr, ac, s->stalls[i].t_ns)
                                                      : NAN,
                                 .wall_s = (double)s->stalls[i].wall_ns / 1e9,
                                 .mono_s = NAN};
        snprintf(st.machine, sizeof st.machine, "%s", agent_client_machine(ac));
        overload_note_stall(p->overload, &st);
    }
}

void netrun_parts_watch(struct netrun *nr, struct overload *o)
{
    if (nr->backend != TOPO_BACKEND_USER) return; /* no linkd: nothing stalls */
    nr->parts->overload = o;
    overload_watch_stalls(o, linkd_stall_threshold(nr->net));
}

/* A remote host's tcp.csv row, its counters kept for net:tcp. */
static void tcp_record_row(struct netrun_parts *p, const char *t, const struct agent_tcp_row *r)
{
    struct netrun *nr = p->nr;
    struct tcp_counters c = {
#define AGENT_TCP_VALUE_(field) .field = r->field,
        AGENT_TCP_COUNTERS(AGENT_TCP_VALUE_)
#undef AGENT_TCP_VALUE_
    };
    if (p->remote_tcp) p->remote_tcp[r->node] = (struct remote_tcp){c, true};
    if (!nr->tcp_record) return;
    size_t n_columns;
    netrun_tcp_columns(&n_columns);
    char cells[TCP_COUNTERS][24], err[256];
    const char *row[3 + TCP_COUNTERS] = {t, nr->net->name, nr->net->nodes[r->node].name};
    uint64_t v[TCP_COUNTERS];
    tcp_counters_values(&c, v);
    for (size_t k = 0; k < TCP_COUNTERS && 3 + k < n_columns; k++) {
        snprintf(cells[k], sizeof cells[k], "%llu", (unsigned long long)v[k]);
        row[3 + k] = cells[k];
    }
    if (record_add(nr->tcp_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

static void on_agent_stats(void *ctx, struct agent_client *ac, const struct agent_stats *s)
{
    struct netrun_parts *p = ctx;
    struct netrun *nr = p->nr;
    int m = topo_machines_find(&p->machines, agent_client_machine(ac));
    stalls_note(p, ac, s); /* without the run's clock too: counted, their time unknown */
    if (!nr->clock || m < 0) return;
    char t[32];
    snprintf(t, sizeof t, "%.3f", agent_run_time(nr, ac, s->t_ns));
    for (size_t i = 0; nr->links_record && i < s->n_rows; i++) {
        const struct agent_stats_row *r = &s->rows[i];
        if (r->link >= nr->net->n_links) continue;
        if (stats_row_kept(p, m, &nr->net->links[r->link], (int)r->link, r->dir))
            stats_record_row(nr, t, r);
    }
    if (!p->remote_tcp && s->n_tcp)
        p->remote_tcp = calloc(nr->net->n_nodes ? nr->net->n_nodes : 1, sizeof *p->remote_tcp);
    for (size_t i = 0; i < s->n_tcp; i++) { /* only m's own hosts: another's may be local */
        const struct agent_tcp_row *r = &s->tcp[i];
        if (r->node < nr->net->n_nodes && p->local_node[r->node] < 0 &&
            p->placement.machine[r->node] == m)
            tcp_record_row(p, t, r);
    }
}

int netrun_parts_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                              size_t errlen)
{
    const struct netrun_parts *p = nr->parts;
    if (p->local_node[node] >= 0) {
        if (!netrun_parts_inner(nr))
            return snprintf(err, errlen, "this machine's part is not built"), -1;
        return netrun_tcp_counters(p->inner, p->local_node[node], out, err, errlen);
    }
    if (nr->net->nodes[node].kind != TOPO_NODE_HOST)
        return snprintf(err, errlen, "a switch has no TCP"), -1;
    const struct peer_client *pc = nr->peers[node].client;
    if (!pc || peer_client_exited(pc) || !p->remote_tcp || !p->remote_tcp[node].seen)
        return snprintf(err, errlen, "its peer is not running or not sampled yet"), -2;
    *out = p->remote_tcp[node].c;
    return 0;
}

/* ---- the end of the build, of its failure and of the release ---- */

static void parts_free(struct netrun_parts *p)
{
    ev_idle_stop(p->nr->loop, &p->later);
    ev_timer_stop(p->nr->loop, &p->build_deadline);
    parts_underlay_cancel(p->probe); /* the agents' last answers are dropped */
    agent_group_free(p->agents);     /* ends what is left: their ssh's EOF tears them down */
    parts_underlay_free(p->probe);
    for (size_t m = 0; p->wire && m < p->machines.n; m++)
        msgpack_sbuffer_destroy(&p->wire[m]); /* NULL data once sent or never made: ok */
    free(p->wire);
    free(p->stage);
    free(p->known);
    free(p->hello);
    free(p->underlay);
    netrun_free(p->inner);
    topo_part_free(&p->part);
    topo_routing_free(&p->routing);
    topo_placement_free(&p->placement);
    topo_machines_free(&p->machines);
    free(p->local_node);
    free(p->local_link);
    free(p->end_link);
    free(p->agent);
    free(p->remote_tcp);
    free(p->programs); /* the netprogs are netlife's, released before */
    free(p);
}

/* The outer netrun: its peers' clients are the parts' (not freed here). */
static void outer_free(struct netrun *nr)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        free(nr->peers[i].told);
    free(nr->peers);
    netrun_cuts_free(nr);
    netrun_free_traces(nr); /* the players that keep the agents' traces' changes */
    parts_free(nr->parts);
    free(nr);
}

/* Both halves gone (the local part released, the agents down): the
 * release's or the failed build's end, from the loop. */
static void on_later(EV_P_ ev_idle *w, int revents)
{
    struct netrun_parts *p = w->data;
    struct netrun *nr = p->nr;
    ev_idle_stop(nr->loop, w);
    if (!p->built) {
        struct net_error e = p->error;
        netrun_built_fn built = nr->built;
        void *ctx = nr->built_ctx;
        outer_free(nr);
        return built(ctx, NULL, &e);
    }
    netrun_released_fn released = p->released;
    void *ctx = p->released_ctx;
    outer_free(nr);
    if (released) released(ctx);
}

static void maybe_done(struct netrun_parts *p)
{
    if (p->tearing && !p->inner && p->agents_down) ev_idle_start(p->nr->loop, &p->later);
}

static void on_inner_released(void *ctx)
{
    struct netrun_parts *p = ctx;
    p->inner = NULL; /* freed by its release */
    maybe_done(p);
}

static void on_agents_down(void *ctx, struct agent_group *g)
{
    struct netrun_parts *p = ctx;
    p->agents_down = true;
    maybe_done(p);
}

static void agents_teardown(struct netrun_parts *p)
{
    if (p->tearing) return;
    p->tearing = true;
    if (p->agents) return agent_group_teardown(p->agents, on_agents_down, p);
    p->agents_down = true; /* the build failed before they were started */
}

/* Every part let go: the local one released, the agents torn down (each
 * releases its part, then exits). */
static void parts_release(struct netrun_parts *p)
{
    if (p->releasing) return;
    p->releasing = true;
    ev_timer_stop(p->nr->loop, &p->build_deadline);
    p->nr->links_record = NULL; /* the agents' last samples are not the run's any more */
    agents_teardown(p);
    if (p->inner && p->inner_done) {
        netrun_release(p->inner, on_inner_released, p);
    } else if (p->inner) { /* a build still running here: abandoned */
        netrun_free(p->inner);
        p->inner = NULL;
    }
    maybe_done(p);
}

/* ---- the peers of every part ---- */

static void on_inner_exit(void *ctx, int node, int wait_status)
{
    struct netrun *nr = ctx;
    int whole = nr->parts->part.whole_node[node];
    if (nr->on_exit) nr->on_exit(nr->ctx, whole, wait_status);
}

static void on_remote_exit(void *ctx, int wait_status)
{
    struct netrun_peer *peer = ctx;
    if (peer->nr->on_exit) peer->nr->on_exit(peer->nr->ctx, peer->node, wait_status);
}

/* Each host's client into the outer peers: the local part's, or one
 * relayed by its machine's agent. */
static int peers_gather(struct netrun *nr, char *err, size_t errlen)
{
    struct netrun_parts *p = nr->parts;
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        const struct topo_node *n = &nr->net->nodes[i];
        struct netrun_peer *peer = &nr->peers[i];
        *peer = (struct netrun_peer){.nr = nr, .node = (int)i, .template_id = -1};
        if (n->kind != TOPO_NODE_HOST) continue;
        if (p->local_node[i] >= 0) {
            peer->client = netrun_peer(p->inner, p->local_node[i]);
            continue;
        }
        struct peer_client_hooks hooks = {.on_exit = on_remote_exit, .ctx = peer};
        struct agent_client *ac = p->agent[p->placement.machine[i]];
        char why[256];
        peer->client = agent_client_open_peer(ac, (int)i, n->name, &hooks, why, sizeof why);
        if (!peer->client)
            return snprintf(err, errlen, "node '%s' on machine %s: %s", n->name,
                            machine_of(p, (int)i), why),
                   -1;
    }
    return 0;
}

static void part_answered(struct netrun_parts *p, size_t m)
{
    struct netrun *nr = p->nr;
    if (p->releasing) return; /* the build failed: late answers are dropped */
    p->stage[m] = PART_ANSWERED;
    if (--p->parts_left > 0) return;
    ev_timer_stop(nr->loop, &p->build_deadline);
    char err[512];
    if (peers_gather(nr, err, sizeof err) < 0) {
        net_error_set(&p->error, NET_ERR_ENVIRONMENT, -1, -1, err);
        return parts_release(p); /* on_later tells `built` */
    }
    p->built = true;
    nr->building = false;
    if (p->inner) { /* what this machine's part runs on, and why */
        nr->backend = p->inner->backend;
        snprintf(nr->reason, sizeof nr->reason, "spread over %zu machines; here: %s", p->machines.n,
                 p->inner->reason);
    }
    nr->net->backend_used = nr->backend; /* net.backend, as a local build says it */
    netrun_phase_end(nr, "parts built");
    if (nr->links_made) nr->links_made(nr->built_ctx);
    nr->built(nr->built_ctx, nr, NULL);
}

static void part_failed(struct netrun_parts *p, const struct net_error *e)
{
    if (p->error.code == NET_OK) p->error = *e;
}

/* The builds still in flight abandoned (a late answer is dropped). */
static void parts_abandon(struct netrun_parts *p)
{
    for (size_t m = 0; m < p->machines.n; m++)
        if (p->agent[m] && agent_client_build_pending(p->agent[m]))
            agent_client_build_abandon(p->agent[m]);
}

/* The build's first failure (later ones are dropped): every part let go,
 * built, building or not sent yet (on_later tells `built`). A failure
 * once built is no build's: the run's other paths (an agent's loss) say it. */
static void build_fail(struct netrun_parts *p, const struct net_error *e)
{
    if (p->built && !p->releasing) /* an agent lost once built: on_agent_lost ends its nodes */
        ctl_log("warning: network '%s': %s", p->nr->net->name, e->message);
    if (p->built || p->releasing) return;
    part_failed(p, e);
    parts_underlay_cancel(p->probe); /* no pair's end starts an agent or a part now */
    parts_abandon(p);
    parts_release(p);
}

static void on_inner_built(void *ctx, struct netrun *inner, const struct net_error *error)
{
    struct netrun_parts *p = ctx;
    p->inner = inner; /* NULL after a failure: freed, nothing left */
    p->inner_done = inner != NULL;
    if (error) return build_fail(p, error);
    char phases[512]; /* its phases, as each agent logs its own */
    netrun_describe_start(inner, phases, sizeof phases);
    ctl_log("network '%s': machine %s built its part (%zu nodes) in %s", p->nr->net->name,
            p->machines.v[p->local].name, topo_part_local_nodes(&p->part), phases);
    part_answered(p, p->local);
}

static void on_agent_built(void *ctx, struct agent_client *ac, const struct agent_build_reply *r,
                           const struct agent_build_error *e)
{
    struct netrun_parts *p = ctx;
    if (e) {
        struct net_error ne;
        enum net_error_code code =
            e->code == NET_ERR_SCENARIO ? NET_ERR_SCENARIO : NET_ERR_ENVIRONMENT;
        net_error_set(&ne, code, e->node[0] ? topo_node_find(p->nr->net, e->node) : -1, -1,
                      e->message);
        return build_fail(p, &ne);
    }
    int m = topo_machines_find(&p->machines, agent_client_machine(ac));
    ctl_log("network '%s': machine %s built its part (%llu nodes, registry %s)", p->nr->net->name,
            agent_client_machine(ac), (unsigned long long)r->nodes, r->registry);
    if (m >= 0) part_answered(p, (size_t)m);
}

/* The machines with nodes in stage below `before` whose agent answered
 * hello (hello true; this machine too) or not, "m2, m3" into names; how
 * many. */
static size_t machines_late(const struct netrun_parts *p, enum part_stage before, bool hello,
                            char *names, size_t cap)
{
    size_t at = 0, count = 0;
    names[0] = '\0';
    for (size_t m = 0; m < p->machines.n; m++) {
        if (p->stage[m] == PART_NONE || p->stage[m] >= before) continue;
        if (m != p->local && p->hello[m] != hello) continue;
        if (m == p->local && !hello) continue;
        int n = snprintf(names + at, cap - at, "%s%s", count ? ", " : "", p->machines.v[m].name);
        if (n > 0 && (size_t)n < cap - at) at += (size_t)n;
        count++;
    }
    return count;
}

/* An agent that never answers hello, or answers pings but not its
 * `underlay` or `build`, must not hold the start for ever: the build fails naming
 * what is late (first this machine's round trips when the agents were not
 * started for them, then the agents without hello, then the underlay's
 * pairs, then the parts), and every part, built or not, is released. */
static void on_build_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun_parts *p = container_of(w, struct netrun_parts, build_deadline);
    char names[256], line[512];
    const char *net = p->nr->net->name;
    if (!p->agents) {
        parts_underlay_unmeasured(p->probe, p->local, names, sizeof names);
        snprintf(line, sizeof line,
                 "network '%s': this machine's round trips to the other machines were not all "
                 "measured within %g s (HIERNET_BUILD_TIMEOUT), so no agent was started: %s; "
                 "every part built is released",
                 net, p->build_timeout_s, names[0] ? names : "?");
    } else if (machines_late(p, PART_ANSWERED, false, names, sizeof names))
        snprintf(line, sizeof line,
                 "network '%s': the agent(s) of machine(s) %s did not answer hello within %g s "
                 "(HIERNET_BUILD_TIMEOUT); every part built is released",
                 net, names, p->build_timeout_s);
    else if (parts_underlay_unmeasured(p->probe, p->machines.n, names, sizeof names))
        snprintf(line, sizeof line,
                 "network '%s': the underlay's round trips between the machines were not all "
                 "measured within %g s (HIERNET_BUILD_TIMEOUT): %s; every part built is released",
                 net, p->build_timeout_s, names);
    else {
        machines_late(p, PART_ANSWERED, true, names, sizeof names);
        snprintf(line, sizeof line,
                 "network '%s': machine(s) %s did not build their part within %g s "
                 "(HIERNET_BUILD_TIMEOUT); every part built is released",
                 net, names[0] ? names : "?", p->build_timeout_s);
    }
    struct net_error e;
    net_error_set(&e, NET_ERR_ENVIRONMENT, -1, -1, line);
    build_fail(p, &e);
}

/* ---- the build ----
 *
 * Every step starts as soon as what it needs is there, not once every
 * agent is: the placement, this machine's round trips (a few echoes; to a
 * machine listed by name, after its agent's hello), then the agents and
 * the routes, computed while their ssh connections (a good part of a
 * second each, docs/guide.md) run; this machine's part builds meanwhile. A
 * part needs the underlay addresses of the machines its cut links reach
 * (the machines file's when it gives IPv4, else the agent's, at its
 * hello) and those pairs' round trips (parts_underlay_begin: from here,
 * or by the agent of the end that answered hello first); a remote part
 * also needs its own agent's hello, and is sent then (its clock pings go
 * on meanwhile). progress() takes every step that can go, after each
 * event. */

/* An IPv4 address text into *out: 0, or -1 with err naming machine m. */
static int underlay_parse(struct netrun_parts *p, size_t m, const char *text, uint32_t *out,
                          char *err, size_t errlen)
{
    struct in_addr a;
    if (inet_pton(AF_INET, text, &a) != 1)
        return snprintf(err, errlen,
                        "machine %s: underlay address '%s' is not IPv4 (VXLAN needs one)",
                        p->machines.v[m].name, text),
               -1;
    *out = ntohl(a.s_addr);
    if ((*out >> 24) == 127)
        return snprintf(err, errlen,
                        "machine %s: underlay address %s is loopback, which the other machines "
                        "cannot reach (list it by an address they reach)",
                        p->machines.v[m].name, text),
               -1;
    return 0;
}

/* The addresses known before any agent answers: this machine's and
 * every IPv4 one of the machines file (a remote machine listed by name
 * waits for its agent's). */
static int underlay_known(struct netrun_parts *p, char *err, size_t errlen)
{
    struct in_addr a;
    for (size_t m = 0; m < p->machines.n; m++) {
        const char *text = p->machines.v[m].address;
        if (m != p->local && inet_pton(AF_INET, text, &a) != 1) continue;
        if (underlay_parse(p, m, text, &p->underlay[m], err, errlen) < 0) return -1;
        p->known[m] = true;
    }
    return 0;
}

/* Each other machine's agent, once started (p->agent allocated by
 * build_prepare). */
static int agents_by_machine(struct netrun_parts *p, char *err, size_t errlen)
{
    for (size_t i = 0; i < agent_group_count(p->agents); i++) {
        struct agent_client *ac = agent_group_agent(p->agents, i);
        int m = topo_machines_find(&p->machines, agent_client_machine(ac));
        if (m >= 0) p->agent[m] = ac;
    }
    for (size_t m = 0; m < p->machines.n; m++)
        if (m != p->local && p->placement.count[m] && !p->agent[m])
            return snprintf(err, errlen, "machine %s has nodes but no agent",
                            p->machines.v[m].name),
                   -1;
    return 0;
}

/* The placement; the machines copied whole, once (an agent's ssh needs
 * user=; the list was checked when it was read). */
static int parts_place(struct netrun_parts *p, const struct topo_machines *machines, char *err,
                       size_t errlen)
{
    struct topo_network *net = p->nr->net;
    size_t n = machines->n;
    if (!(p->machines.v = calloc(n ? n : 1, sizeof *p->machines.v)))
        return snprintf(err, errlen, "out of memory"), -1;
    memcpy(p->machines.v, machines->v, n * sizeof *p->machines.v);
    p->machines.n = p->machines.cap = n;
    snprintf(p->machines.source, sizeof p->machines.source, "%s", machines->source);
    p->local = n;
    for (size_t m = 0; m < n; m++)
        if (machines->v[m].local) p->local = m;
    return topo_placement_compute(net, &p->machines, &p->placement, err, errlen);
}

/* The whole network's address plan and routes, which every part needs,
 * computed once the agents are started: their connections take longer
 * (65 ms for the 999-node tree here, seconds for a large network). */
static int parts_routes(struct netrun_parts *p, struct net_error *e)
{
    if (topo_assign_addresses(p->nr->net, e->message, sizeof e->message) < 0 ||
        topo_routing_compute(p->nr->net, &p->routing, e->message, sizeof e->message) < 0)
        return e->code = NET_ERR_SCENARIO, -1;
    p->routed = true;
    netrun_phase_end(p->nr, "routes");
    return 0;
}

/* The local part's indices by whole-network index: -1 until it is made. */
static int local_maps_alloc(struct netrun_parts *p)
{
    const struct topo_network *net = p->nr->net;
    p->local_node = malloc((net->n_nodes ? net->n_nodes : 1) * sizeof *p->local_node);
    p->local_link = malloc((net->n_links ? net->n_links : 1) * sizeof *p->local_link);
    p->end_link = malloc((net->n_links ? net->n_links : 1) * sizeof *p->end_link);
    if (!p->local_node || !p->local_link || !p->end_link) return -1;
    for (size_t i = 0; i < net->n_nodes; i++)
        p->local_node[i] = -1;
    for (size_t l = 0; l < net->n_links; l++)
        p->local_link[l] = p->end_link[l] = -1;
    return 0;
}

static void local_maps_fill(struct netrun_parts *p)
{
    for (size_t i = 0; i < p->part.net->n_nodes; i++)
        if (!p->part.net->nodes[i].remote) p->local_node[p->part.whole_node[i]] = (int)i;
    for (size_t l = 0; l < p->part.net->n_links; l++) {
        p->end_link[p->part.whole_link[l]] = (int)l;
        if (!p->part.net->links[l].vni) p->local_link[p->part.whole_link[l]] = (int)l;
    }
}

/* Machine m's part in its wire form, kept until its agent's hello. */
static int part_encode(struct netrun_parts *p, size_t m, const struct topo_part *part, char *err,
                       size_t errlen)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(&p->wire[m]);
    msgpack_packer_init(&pk, &p->wire[m], msgpack_sbuffer_write);
    if (topo_part_encode(part, &pk)) return 0;
    return snprintf(err, errlen, "out of memory"), -1;
}

static int send_part(struct netrun_parts *p, size_t m, char *err, size_t errlen)
{
    /* links.csv's rows of its part, and its linkd stalls at the whole network's threshold */
    agent_client_on_stats(p->agent[m], on_agent_stats, p, linkd_stall_threshold(p->nr->net));
    agent_client_on_program(p->agent[m], on_agent_program, p);
    agent_client_on_lost(p->agent[m], on_agent_lost, p);
    int rc = agent_client_build(p->agent[m], p->wire[m].data, p->wire[m].size, on_agent_built, p,
                                err, errlen);
    msgpack_sbuffer_destroy(&p->wire[m]); /* copied by the client */
    p->wire[m] = (msgpack_sbuffer){0};
    return rc;
}

static int build_local(struct netrun_parts *p, struct net_error *error)
{
    struct netrun_config c = p->cfg;
    c.links_made = NULL;
    c.routing = &p->part.routing;
    c.data_secret = p->nr->data_secret;
    c.spread = NULL;
    if (netrun_build(p->nr->loop, p->part.net, &c, on_inner_exit, p->nr, on_inner_built, p,
                     &p->inner, error) < 0)
        return p->inner = NULL, -1;
    return 0;
}

/* Machine m's part made (its cut links' round trips all measured) and
 * checked: every cut link's delay covers its underlay's, and no two cut
 * links of the machine share linkd's UDP port. The local one kept, a
 * remote one in its wire form. */
static int part_make(struct netrun_parts *p, size_t m, struct net_error *e)
{
    char *err = e->message;
    size_t errlen = sizeof e->message;
    struct topo_part part = {0};
    int rc = topo_part_make(p->nr->net, &p->routing, &p->plan, m, &part, err, errlen);
    if (rc == 0) rc = topo_part_check_underlay(&part, err, errlen);
    if (rc == 0) rc = topo_part_check_ports(&part, err, errlen);
    if (rc == 0 && m != p->local) rc = part_encode(p, m, &part, err, errlen);
    if (rc == 0 && m == p->local) {
        p->part = part; /* kept: built here */
        local_maps_fill(p);
    } else {
        topo_part_free(&part);
    }
    if (rc < 0) return e->code = NET_ERR_SCENARIO, -1;
    p->stage[m] = PART_MADE;
    return 0;
}

/* Machine m's part sent to its agent, or begun here. */
static int part_begin(struct netrun_parts *p, size_t m, struct net_error *e)
{
    int rc = m == p->local ? build_local(p, e) : send_part(p, m, e->message, sizeof e->message);
    if (rc < 0 && m != p->local) e->code = NET_ERR_ENVIRONMENT;
    if (rc < 0) return -1;
    p->stage[m] = PART_SENT;
    /* where a spread start's time goes (docs/guide.md, the multihost figures) */
    ctl_log("network '%s': machine %s's part %s %.3f s into the build", p->nr->net->name,
            p->machines.v[m].name, m == p->local ? "begun here" : "sent to its agent",
            mono_s() - p->nr->start_s);
    return 0;
}

static struct parts_underlay_setup underlay_setup(struct netrun_parts *p)
{
    return (struct parts_underlay_setup){p->nr->loop, p->nr->net, &p->placement, &p->machines,
                                         p->local,    p->agent,   p->underlay};
}

/* Every step that can be taken now: pairs to measure, parts to make, to
 * send, to build here. 0, or -1 with *e. */
static int progress(struct netrun_parts *p, struct net_error *e)
{
    struct parts_underlay_setup setup = underlay_setup(p);
    if (parts_underlay_begin(p->probe, &setup, p->known, p->hello, e->message, sizeof e->message) <
        0)
        return e->code = NET_ERR_ENVIRONMENT, -1;
    for (size_t m = 0; m < p->machines.n; m++) {
        if (p->stage[m] == PART_WAITING && p->routed && parts_underlay_machine_done(p->probe, m) &&
            part_make(p, m, e) < 0)
            return -1;
        if (p->stage[m] == PART_MADE && (m == p->local || p->hello[m]) && part_begin(p, m, e) < 0)
            return -1;
    }
    return 0;
}

/* This machine's pairs begun all measured (or none to measure): a pair
 * whose far end is listed by name has no address before that agent's
 * hello, so it must not hold the agents' start; it is measured from here
 * after that hello (progress), before either end's part is made. */
static bool local_pairs_done(const struct netrun_parts *p)
{
    return p->local == p->machines.n || parts_underlay_machine_begun_done(p->probe, p->local);
}

static void progress_or_fail(struct netrun_parts *p)
{
    struct net_error e;
    net_error_clear(&e);
    if (p->releasing || progress(p, &e) == 0) return;
    build_fail(p, &e);
}

static int agents_then_routes(struct netrun_parts *p, struct net_error *e);

/* The local part's pairs measured, the agents start; the first pair of
 * another machine's part may then be measured, the part made, sent. */
static void on_pair_measured(void *ctx, struct parts_underlay *u, size_t a, size_t b,
                             const char *error)
{
    struct netrun_parts *p = ctx;
    struct net_error e;
    (void)u, (void)a, (void)b;
    if (p->releasing) return;
    net_error_clear(&e);
    if (error)
        net_error_set(&e, NET_ERR_ENVIRONMENT, -1, -1, error);
    else if (p->agents || !local_pairs_done(p) || agents_then_routes(p, &e) == 0)
        return progress_or_fail(p);
    build_fail(p, &e);
}

/* Machine m's agent answered hello: its underlay address (the file's when
 * it gave IPv4: the parts may be made with it already; a difference is
 * logged), then whatever waited for it. */
static void on_agent_hello(void *ctx, struct agent_group *g, struct agent_client *ac)
{
    struct netrun_parts *p = ctx;
    const char *found = agent_client_hello(ac)->underlay_address;
    int m = topo_machines_find(&p->machines, agent_client_machine(ac));
    struct net_error e;
    (void)g;
    if (m < 0 || p->releasing) return;
    net_error_clear(&e);
    p->hello[m] = true;
    if (!p->known[m] &&
        underlay_parse(p, (size_t)m, found, &p->underlay[m], e.message, sizeof e.message) < 0)
        return e.code = NET_ERR_ENVIRONMENT, build_fail(p, &e);
    if (p->known[m] && found[0] && strcmp(found, p->machines.v[m].address) != 0)
        ctl_log("network '%s': machine %s: its agent routes to this machine from %s; its cut "
                "links use %s, its address in %s",
                p->nr->net->name, p->machines.v[m].name, found, p->machines.v[m].address,
                p->machines.source);
    p->known[m] = true;
    progress_or_fail(p);
}

/* Every agent ready (the spread's hook records them), or the first one
 * that failed before: the build fails naming it. */
static void on_agents_ready(void *ctx, struct agent_group *g, const char *error)
{
    struct netrun_parts *p = ctx;
    struct net_error e;
    if (!error) {
        if (p->agents_ready) p->agents_ready(p->agents_ctx, g);
        return;
    }
    net_error_set(&e, NET_ERR_ENVIRONMENT, -1, -1, "");
    snprintf(e.message, sizeof e.message, "%s%s%s", p->agents_why, p->agents_why[0] ? ": " : "",
             error);
    build_fail(p, &e);
}

/* The build's config, kept for the local part's build (its strings
 * copied: the caller's may go). */
static void config_keep(struct netrun_parts *p, const struct netrun_config *cfg)
{
    p->cfg = *cfg;
    p->cfg.spread = NULL; /* its machines copied, its agents p's */
    snprintf(p->run_id, sizeof p->run_id, "%s", cfg->run_id ? cfg->run_id : "run");
    p->cfg.run_id = p->run_id;
    if (cfg->peer_path) snprintf(p->peer_path, sizeof p->peer_path, "%s", cfg->peer_path);
    if (cfg->peer_path) p->cfg.peer_path = p->peer_path;
    const struct netrun_spread *s = cfg->spread;
    snprintf(p->agents_why, sizeof p->agents_why, "%s", s->why ? s->why : "");
    p->agent_opts = *s->agents; /* its strings: the caller's, for the network's life */
    p->agents_ready = s->agents_ready;
    p->agents_ctx = s->agents_ctx;
    p->build_timeout_s = s->build_timeout_s > 0 ? s->build_timeout_s : NETRUN_BUILD_TIMEOUT_S;
}

/* The agents, once this machine's round trips are measured: their ssh
 * connections are the longest wait of the start, but the echoes, a few
 * round trips long, are measured on a machine not yet busy with them (the
 * controller's ssh's key exchange, and on the namespace cluster every
 * machine's login, share this host's cores; an echo delayed by them
 * would lengthen the underlay's delay and so shorten the emulated one). */
static int agents_start(struct netrun_parts *p, struct net_error *e)
{
    struct agent_group_hooks hooks = {on_agent_hello, on_agents_ready, p};
    p->agents = agent_group_start_each(p->nr->loop, &p->machines, &p->agent_opts, &hooks,
                                       e->message, sizeof e->message);
    if (!p->agents || agents_by_machine(p, e->message, sizeof e->message) < 0)
        return e->code = NET_ERR_ENVIRONMENT, -1;
    netrun_phase_end(p->nr, "agents started");
    return 0;
}

static int agents_then_routes(struct netrun_parts *p, struct net_error *e)
{
    return agents_start(p, e) < 0 || parts_routes(p, e) < 0 ? -1 : 0;
}

/* What every part shares: per-machine state, the data secret, the VNI
 * base, the underlay's pairs to measure. */
static int build_prepare(struct netrun_parts *p, char *err, size_t errlen)
{
    size_t n = p->machines.n;
    uint64_t random = 0;
    p->underlay = calloc(n, sizeof *p->underlay);
    p->known = calloc(n, sizeof *p->known);
    p->hello = calloc(n, sizeof *p->hello);
    p->stage = calloc(n, sizeof *p->stage);
    p->wire = calloc(n, sizeof *p->wire);
    p->agent = calloc(n, sizeof *p->agent);
    if (!p->underlay || !p->known || !p->hello || !p->stage || !p->wire || !p->agent ||
        local_maps_alloc(p) < 0 ||
        getrandom(p->nr->data_secret, sizeof p->nr->data_secret, 0) !=
            (ssize_t)sizeof p->nr->data_secret ||
        getrandom(&random, sizeof random, 0) != (ssize_t)sizeof random)
        return snprintf(err, errlen, "out of memory or no random bits"), -1;
    for (size_t m = 0; m < n; m++)
        if (p->placement.count[m]) p->stage[m] = PART_WAITING, p->parts_left++;
    if (underlay_known(p, err, errlen) < 0) return -1;
    struct parts_underlay_setup setup = underlay_setup(p);
    if (!(p->probe = parts_underlay_new(&setup, on_pair_measured, p)))
        return snprintf(err, errlen, "out of memory"), -1;
    p->plan = (struct topo_part_plan){p->run_id,
                                      &p->placement,
                                      &p->machines,
                                      p->underlay,
                                      topo_part_vni_base(random),
                                      p->nr->data_secret,
                                      parts_underlay_delays(p->probe)};
    return 0;
}

static struct netrun *outer_new(struct ev_loop *loop, struct topo_network *net,
                                const struct netrun_config *cfg, netrun_exit_fn on_exit, void *ctx,
                                netrun_built_fn built, void *built_ctx)
{
    struct netrun *nr = calloc(1, sizeof *nr);
    struct netrun_parts *p = nr ? calloc(1, sizeof *p) : NULL;
    if (p) nr->peers = calloc(net->n_nodes ? net->n_nodes : 1, sizeof *nr->peers);
    if (!p || !nr->peers) {
        if (nr) free(nr->peers);
        free(p);
        free(nr);
        return NULL;
    }
    *nr = (struct netrun){.loop = loop,
                          .net = net,
                          .backend = net->backend, /* the local part's once built */
                          .peers = nr->peers,
                          .parts = p,
                          .on_exit = on_exit,
                          .ctx = ctx,
                          .built = built,
                          .built_ctx = built_ctx,
                          .links_made = cfg->links_made,
                          .building = true,
                          .secret_given = true};
    nr->start_s = nr->phase_mark = mono_s();
    p->nr = nr;
    ev_idle_init(&p->later, on_later);
    p->later.data = p;
    ev_timer_init(&p->build_deadline, on_build_deadline, 0, 0);
    return nr;
}

int netrun_parts_build(struct ev_loop *loop, struct topo_network *net,
                       const struct netrun_config *cfg, netrun_exit_fn on_exit, void *ctx,
                       netrun_built_fn built, void *built_ctx, struct netrun **out,
                       struct net_error *error)
{
    net_error_clear(error);
    char *err = error->message;
    size_t errlen = sizeof error->message;
    struct netrun *nr = outer_new(loop, net, cfg, on_exit, ctx, built, built_ctx);
    if (!nr) return net_error_set(error, NET_ERR_SCENARIO, -1, -1, "out of memory"), -1;
    struct netrun_parts *p = nr->parts;
    config_keep(p, cfg);
    snprintf(nr->reason, sizeof nr->reason, "spread over %zu machines, each choosing its own",
             cfg->spread->machines->n);
    if (parts_place(p, cfg->spread->machines, err, errlen) < 0 || build_prepare(p, err, errlen) < 0)
        error->code = NET_ERR_SCENARIO;
    netrun_phase_end(nr, "placement");
    if (error->code == NET_OK) {
        /* one deadline for the agents, the underlay's round trips and every part's build */
        ev_timer_set(&p->build_deadline, p->build_timeout_s, 0);
        ev_timer_start(loop, &p->build_deadline);
        if (progress(p, error) == 0 && local_pairs_done(p) && agents_then_routes(p, error) == 0)
            progress(p, error);
    }
    if (error->code != NET_OK) {
        outer_free(nr); /* the agents' ssh, if started, ended: nothing was sent them */
        return -1;
    }
    *out = nr;
    return 0;
}

/* ---- the network's functions, over its parts ---- */

char *netrun_underlay_json(const struct netrun *nr)
{
    const struct netrun_parts *p = nr->parts;
    char *buf = NULL;
    size_t len = 0;
    if (!p || !p->probe) return NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    const char *sep = "";
    for (size_t a = 0; a < p->machines.n; a++)
        for (size_t b = a + 1; b < p->machines.n; b++) {
            int64_t rtt = parts_underlay_rtt_ns(p->probe, a, b);
            if (!rtt) continue;
            fprintf(f, "%s{\"network\": ", sep);
            json_write_string(f, nr->net->name);
            fputs(", \"a\": ", f);
            json_write_string(f, p->machines.v[a].name);
            fputs(", \"b\": ", f);
            json_write_string(f, p->machines.v[b].name);
            fprintf(f, ", \"rtt_ms\": %.3f, \"one_way_ms\": %.3f}", (double)rtt / 1e6,
                    parts_underlay_delays(p->probe)[a * p->machines.n + b] / 1e3);
            sep = ", ";
        }
    if (fclose(f) != 0 || !len) return free(buf), NULL;
    return buf;
}

void netrun_parts_close_peers(struct netrun *nr)
{
    struct netrun_parts *p = nr->parts;
    if (netrun_parts_inner(nr)) netrun_close_peers(p->inner);
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client && p->local_node[i] < 0) peer_client_close(nr->peers[i].client);
    /* A remote peer ends with its part: the agent releases it, reports
     * its peers' exits, answers and exits (no per-node EOF crosses). */
    agents_teardown(p);
}

/* The signal reaches the local part's peers only. The other parts' peers
 * need none: netrun_kill_peers' one caller is netlife's stop deadline
 * (SIGKILL), after netrun_close_peers asked every agent to tear down, and
 * an agent's teardown is netrun_release of its part, which SIGKILLs every
 * peer of it still running at once, then answers (bounded by the agent
 * client's ping timeout, after which its relayed peers end as killed).
 * A kill op per node would find the agents tearing down (agent_client
 * refuses new changes then); the teardown below only makes sure it was
 * asked. */
void netrun_parts_kill_peers(struct netrun *nr, int sig)
{
    if (netrun_parts_inner(nr)) netrun_kill_peers(nr->parts->inner, sig);
    agents_teardown(nr->parts);
}

void netrun_parts_release(struct netrun *nr, netrun_released_fn released, void *ctx)
{
    struct netrun_parts *p = nr->parts;
    p->released = released;
    p->released_ctx = ctx;
    parts_release(p);
}

void netrun_parts_free(struct netrun *nr)
{
    outer_free(nr);
}
