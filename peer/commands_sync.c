/* commands_sync.c — wait and batch (see commands_sync.h): gates of the
 * worker's FIFO driven on the loop thread. At most one wait is pending at a
 * time (it holds the FIFO, alone or inside the batch that does); sync keeps
 * it, with the abort marks, as its state in the server (a peer_module), so
 * that arrivals and shutdown find it. */
#include "peer/commands_sync.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/container.h"
#include "peer/command_job.h"
#include "peer/dataplane.h"

#define WAIT_K_MAX STORE_ARRIVALS_MAX /* more can never be pending */
#define WAIT_DEFAULT_TIMEOUT_S 60.0

/* ---- wait ---- */

struct wait_params {
    char (*names)[COMMAND_NAME_SIZE]; /* sorted, each once: what arrivals must match */
    uint32_t n_names;
    char (*from)[COMMAND_NAME_SIZE]; /* sorted senders that count; NULL: any */
    uint32_t n_from;
    bool clear; /* discard the matching pending arrivals, never wait */
    int64_t k;
    double timeout_s; /* 0: none */
    double started_ms;
    ev_timer timer;
    struct command_job *job;
};
COMMAND_PARAMS_OF(wait)

struct abort_mark;

/* What sync keeps in the server between commands, made on first use. */
struct sync_state {
    struct command_job *waiter; /* the wait holding the FIFO, if any */
    struct abort_mark *aborts;  /* aborts that commands queued before them must see */
};

static const struct peer_module sync_module;

const char sync_abort_cause[] = "aborted: the node was cut off or died";
const char sync_abort_wait_cause[] =
    "aborted by the controller (a node it waited for was cut off or died)";

static struct sync_state *sync_state_of(const struct peer_server *s)
{
    return peer_server_state(s, &sync_module);
}

/* NULL when out of memory (then nothing is kept). */
static struct sync_state *sync_state_make(struct peer_server *s)
{
    struct sync_state *st = sync_state_of(s);
    if (st) return st;
    st = calloc(1, sizeof *st);
    if (st && !peer_server_keep(s, &sync_module, st)) {
        free(st);
        st = NULL;
    }
    return st;
}

static struct command_job *sync_waiter(const struct peer_server *s)
{
    const struct sync_state *st = sync_state_of(s);
    return st ? st->waiter : NULL;
}

static int name_compare(const void *a, const void *b)
{
    return strcmp(a, b);
}

static bool wait_match(const struct store_arrival *a, const void *ctx)
{
    const struct wait_params *p = ctx;
    return bsearch(a->name, p->names, p->n_names, sizeof *p->names, name_compare) != NULL &&
           (!p->from || bsearch(a->from, p->from, p->n_from, sizeof *p->from, name_compare));
}

static void on_wait_timeout(EV_P_ ev_timer *w, int revents);

/* tensors = {...} or tensor = name; k defaults to the number listed. */
static bool wait_parse_names(struct wait_params *p, struct proto_args *a)
{
    char one[COMMAND_NAME_SIZE];
    int got_one = cmd_arg_name(a, "tensor", one);
    if (got_one < 0) return false;
    int got_list = cmd_arg_names(a, "tensors", &p->names, &p->n_names);
    if (got_list < 0) return false;
    if ((got_one == 1) == (got_list == 1))
        return cmd_arg_fail(a, "give one of 'tensor' (a name) and 'tensors' (a list)");
    if (got_one == 1) {
        p->names = malloc(sizeof *p->names);
        if (!p->names) return cmd_arg_fail(a, "out of memory");
        memcpy(p->names[0], one, sizeof one);
        p->n_names = 1;
    }
    if (p->n_names == 0) return cmd_arg_fail(a, "param 'tensors': empty");
    p->k = p->n_names;
    qsort(p->names, p->n_names, sizeof *p->names, name_compare);
    uint32_t unique = 0;
    for (uint32_t i = 0; i < p->n_names; i++)
        if (unique == 0 || strcmp(p->names[unique - 1], p->names[i]) != 0)
            memmove(p->names[unique++], p->names[i], sizeof *p->names);
    p->n_names = unique;
    return true;
}

/* from = node or {nodes}: only arrivals sent by those count. */
static bool wait_parse_from(struct wait_params *p, struct proto_args *a)
{
    const msgpack_object *o = proto_args_get(a, "from");
    if (!o || o->type == MSGPACK_OBJECT_NIL) return true;
    if (o->type == MSGPACK_OBJECT_STR) {
        p->from = calloc(1, sizeof *p->from);
        if (!p->from) return cmd_arg_fail(a, "out of memory");
        p->n_from = 1;
        return cmd_arg_text(a, "from", true, p->from[0], sizeof p->from[0]);
    }
    if (cmd_arg_names(a, "from", &p->from, &p->n_from) < 0) return false;
    if (p->n_from == 0) return cmd_arg_fail(a, "param 'from': empty");
    qsort(p->from, p->n_from, sizeof *p->from, name_compare);
    return true;
}

static bool wait_parse(struct command_job *j, struct wait_params *p, struct proto_args *a)
{
    p->job = j;
    p->timeout_s = WAIT_DEFAULT_TIMEOUT_S;
    ev_init(&p->timer, on_wait_timeout);
    if (!wait_parse_names(p, a) || !wait_parse_from(p, a) ||
        !cmd_arg_int(a, "k", false, 1, WAIT_K_MAX, &p->k) ||
        !cmd_arg_float(a, "timeout", false, WAIT_DEFAULT_TIMEOUT_S, &p->timeout_s) ||
        !cmd_arg_bool(a, "clear", &p->clear))
        return false;
    if (p->clear && proto_args_get(a, "k"))
        return cmd_arg_fail(a, "param 'k': not with clear (which discards every matching arrival)");
    if (!(p->timeout_s >= 0) || !isfinite(p->timeout_s))
        return cmd_arg_fail(a, "param 'timeout': %g is not a number of seconds >= 0 (0: none)",
                            p->timeout_s);
    return true;
}

/* Packs the claimed arrivals as three parallel arrays. */
static void wait_result(struct command_job *j, const struct store_arrival *list, size_t k)
{
    cmd_result_key(j, "arrived");
    msgpack_pack_array(&j->result.pk, k);
    for (const struct store_arrival *a = list; a; a = a->next)
        proto_pack_str(&j->result.pk, a->name);
    cmd_result_key(j, "from");
    msgpack_pack_array(&j->result.pk, k);
    for (const struct store_arrival *a = list; a; a = a->next)
        proto_pack_str(&j->result.pk, a->from);
    cmd_result_key(j, "versions");
    msgpack_pack_array(&j->result.pk, k);
    for (const struct store_arrival *a = list; a; a = a->next)
        msgpack_pack_uint64(&j->result.pk, a->version);
}

static void wait_end(struct wait_params *p)
{
    struct command_job *j = p->job;
    struct peer_server *s = j->server;
    struct sync_state *st = sync_state_of(s);
    if (st && st->waiter == j) st->waiter = NULL;
    ev_timer_stop(s->loop, &p->timer);
    j->work.wall_ms = command_now_ms() - p->started_ms;
    command_job_finish(j);
}

/* Claims the arrivals when enough are pending; false while not. A clear
 * claims every matching one at once (perhaps none). */
static bool wait_try(struct wait_params *p)
{
    struct command_job *j = p->job;
    struct store_arrival *claimed;
    size_t k = (size_t)p->k;
    if (p->clear) k = store_arrivals_describe(j->store, wait_match, p, NULL, 0);
    size_t pending = store_arrivals_claim(j->store, wait_match, p, k, &claimed);
    if (pending < k) return false;
    wait_result(j, claimed, k);
    store_arrivals_free(claimed);
    wait_end(p);
    return true;
}

static void on_wait_timeout(EV_P_ ev_timer *w, int revents)
{
    struct wait_params *p = container_of(w, struct wait_params, timer);
    struct command_job *j = p->job;
    char names[256];
    size_t pending = store_arrivals_describe(j->store, wait_match, p, names, sizeof names);
    cmd_fail(j, "timeout after %g s: %zu of %" PRId64 " arrivals%s%s%s", p->timeout_s, pending,
             p->k, pending ? " (" : "", names, pending ? ")" : "");
    wait_end(p);
}

static bool wait_aborted_since(const struct peer_server *s, const struct wait_params *p,
                               uint64_t received);

static void wait_start(struct command_job *j, struct wait_params *p)
{
    struct peer_server *s = j->server;
    p->started_ms = command_now_ms();
    if (sync_waiter(s)) { /* cannot happen: a wait holds the FIFO */
        cmd_fail(j, "another wait is pending");
        wait_end(p);
        return;
    }
    sync_forget_aborts(s, j->received);
    if (wait_try(p)) return;
    if (!p->clear && wait_aborted_since(s, p, j->received)) {
        cmd_fail(j, sync_abort_wait_cause);
        wait_end(p);
        return;
    }
    struct sync_state *st = sync_state_make(s);
    if (!st) {
        cmd_fail(j, "out of memory");
        wait_end(p);
        return;
    }
    st->waiter = j;
    /* timeout_s is emulated time: real time runs dilation times slower. */
    ev_timer_set(&p->timer, p->timeout_s * s->cfg.dilation, 0.0);
    if (p->timeout_s > 0) ev_timer_start(s->loop, &p->timer);
}

static void wait_cleanup(struct wait_params *p)
{
    free(p->names);
    free(p->from);
}

/* A receive recorded an arrival: the pending wait (if any) looks again. */
static void sync_on_arrival(struct peer_server *s, void *state)
{
    struct sync_state *st = state;
    if (st->waiter) wait_try(wait_params_of(st->waiter));
}

/* The peer is shutting down: a pending wait is cancelled (and its batch). */
static void sync_on_shutdown(struct peer_server *s, void *state)
{
    struct sync_state *st = state;
    struct command_job *j = st->waiter;
    if (!j) return;
    struct wait_params *p = wait_params_of(j);
    st->waiter = NULL;
    ev_timer_stop(s->loop, &p->timer);
    command_job_cancel(j);
}

static void abort_marks_free(struct sync_state *st);

static void sync_state_destroy(void *state)
{
    abort_marks_free(state);
    free(state);
}

static const struct peer_module sync_module = {
    .name = "sync",
    .on_arrival = sync_on_arrival,
    .on_shutdown = sync_on_shutdown,
    .destroy = sync_state_destroy,
};

/* ---- abort ---- */

/* abort{nodes = {...}, any_wait = false, incarnations = {node = n}}: a fault took these nodes
 * away. incarnations: for a node named, the last incarnation the fault concerns (the restarts the
 * controller knew of when it asked): connections of a later one, a restart that reconnected before
 * this abort was processed, stay (dataplane_abort); a node not named there: all. The pending wait
 * (if any, and unless its `from` names none of them) fails, ending the batch that holds it, and the
 * sends on their way to those nodes fail, so that the peer's queue moves on instead of waiting out
 * the timeouts. any_wait fails the pending wait whatever its `from`: in a collective step (a ring)
 * a peer waits on a live neighbour whose own step the lost node has stopped. Answered at once,
 * like ping. */
struct abort_params {
    char (*nodes)[COMMAND_NAME_SIZE]; /* sorted; moves into the abort's mark */
    uint64_t *upto;                   /* per node: its last incarnation aborted */
    uint32_t n_nodes;
    bool any_wait;
};

/* An abort as the commands queued before it see it (sync_aborted_since). */
struct abort_mark {
    struct abort_mark *next; /* newer first */
    uint64_t received;
    char (*nodes)[COMMAND_NAME_SIZE]; /* sorted */
    uint32_t n_nodes;
    bool any_wait;
};

/* Marks beyond this many (aborts with no wait or send starting between
 * them) are dropped, oldest first: a bound on memory, far above the few
 * aborts a fault sends. */
#define ABORT_MARKS_MAX 256

static void abort_mark_free(struct abort_mark *m)
{
    free(m->nodes);
    free(m);
}

static void abort_marks_free(struct sync_state *st)
{
    while (st->aborts) {
        struct abort_mark *m = st->aborts;
        st->aborts = m->next;
        abort_mark_free(m);
    }
}

void sync_forget_aborts(struct peer_server *s, uint64_t received)
{
    struct sync_state *st = sync_state_of(s);
    if (!st) return;
    struct abort_mark **at = &st->aborts;
    for (unsigned n = 0; *at; n++) {
        if ((*at)->received <= received || n >= ABORT_MARKS_MAX) {
            struct abort_mark *old = *at;
            *at = old->next;
            abort_mark_free(old);
        } else {
            at = &(*at)->next;
        }
    }
}

static bool mark_names(const struct abort_mark *m, const char *node)
{
    return bsearch(node, m->nodes, m->n_nodes, sizeof *m->nodes, name_compare) != NULL;
}

/* The marks newer first, or NULL. */
static const struct abort_mark *sync_aborts(const struct peer_server *s)
{
    const struct sync_state *st = sync_state_of(s);
    return st ? st->aborts : NULL;
}

bool sync_aborted_since(const struct peer_server *s, uint64_t received, const char *node)
{
    for (const struct abort_mark *m = sync_aborts(s); m && m->received > received; m = m->next)
        if (mark_names(m, node)) return true;
    return false;
}

/* An abort received after the wait that concerns it (as abort_run judges a
 * pending one: any_wait, a wait on any sender, or one of its senders). */
static bool wait_aborted_since(const struct peer_server *s, const struct wait_params *p,
                               uint64_t received)
{
    for (const struct abort_mark *m = sync_aborts(s); m && m->received > received; m = m->next) {
        if (m->any_wait || !p->from) return true;
        for (uint32_t i = 0; i < p->n_from; i++)
            if (mark_names(m, p->from[i])) return true;
    }
    return false;
}

/* Keeps the abort for the commands received before it that have yet to
 * start; takes the params' node list. */
static void abort_mark_add(struct peer_server *s, uint64_t received, struct abort_params *p)
{
    struct sync_state *st = sync_state_make(s);
    struct abort_mark *m = st ? calloc(1, sizeof *m) : NULL;
    if (!m) return; /* queued commands then wait out their timeouts, as before */
    m->received = received;
    m->nodes = p->nodes;
    m->n_nodes = p->n_nodes;
    m->any_wait = p->any_wait;
    p->nodes = NULL;
    m->next = st->aborts;
    st->aborts = m;
}

/* One entry of incarnations: a node of the list and a count. */
static bool abort_incarnation(struct abort_params *p, struct proto_args *a,
                              const msgpack_object_kv *kv)
{
    char name[COMMAND_NAME_SIZE];
    if (kv->key.type != MSGPACK_OBJECT_STR || kv->key.via.str.size == 0 ||
        kv->key.via.str.size >= sizeof name)
        return cmd_arg_fail(a, "param 'incarnations': expected node names as keys");
    uint32_t len = kv->key.via.str.size;
    memcpy(name, kv->key.via.str.ptr, len);
    name[len] = '\0';
    const char(*at)[COMMAND_NAME_SIZE] =
        bsearch(name, p->nodes, p->n_nodes, sizeof *p->nodes, name_compare);
    if (!at) return cmd_arg_fail(a, "param 'incarnations': node '%s' is not in nodes", name);
    if (kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return cmd_arg_fail(a, "param 'incarnations': node '%s': expected a count, got %s", name,
                            proto_type_name(kv->val.type));
    p->upto[at - p->nodes] = kv->val.via.u64;
    return true;
}

/* incarnations = {node = n}, after the sorted nodes: every node's last
 * aborted incarnation, all of them (DATAPLANE_ALL_INCARNATIONS) unless named.
 * An empty Lua table may arrive as an empty array. */
static bool abort_parse_incarnations(struct abort_params *p, struct proto_args *a)
{
    p->upto = malloc((p->n_nodes ? p->n_nodes : 1) * sizeof *p->upto);
    if (!p->upto) return cmd_arg_fail(a, "out of memory");
    for (uint32_t i = 0; i < p->n_nodes; i++)
        p->upto[i] = DATAPLANE_ALL_INCARNATIONS;
    const msgpack_object *o = proto_args_get(a, "incarnations");
    if (!o || o->type == MSGPACK_OBJECT_NIL ||
        (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 0))
        return true;
    if (o->type != MSGPACK_OBJECT_MAP)
        return cmd_arg_fail(a,
                            "param 'incarnations': expected a map of node names to counts, got %s",
                            proto_type_name(o->type));
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (!abort_incarnation(p, a, &o->via.map.ptr[i])) return false;
    return true;
}

static bool abort_parse(struct command_job *j, struct abort_params *p, struct proto_args *a)
{
    int rc = cmd_arg_names(a, "nodes", &p->nodes, &p->n_nodes);
    if (rc == 0) return proto_args_missing(a, "nodes");
    if (rc < 0 || !cmd_arg_bool(a, "any_wait", &p->any_wait)) return false;
    qsort(p->nodes, p->n_nodes, sizeof *p->nodes, name_compare);
    return abort_parse_incarnations(p, a);
}

/* Does the pending wait count arrivals from one of the aborted nodes? A
 * wait on any sender might; a wait on others' data stays. */
static bool wait_hears_from(const struct wait_params *w, const struct abort_params *p)
{
    if (!w->from) return true;
    for (uint32_t i = 0; i < p->n_nodes; i++)
        if (bsearch(p->nodes[i], w->from, w->n_from, sizeof *w->from, name_compare)) return true;
    return false;
}

static bool abort_run(struct command_job *j, struct abort_params *p)
{
    struct peer_server *s = j->server;
    uint64_t closed = 0;
    for (uint32_t i = 0; i < p->n_nodes; i++)
        closed += dataplane_abort(s->dataplane, p->nodes[i], p->upto[i], sync_abort_cause);
    struct command_job *w = sync_waiter(s);
    bool waited = w && (p->any_wait || wait_hears_from(wait_params_of(w), p));
    if (waited) {
        cmd_fail(w, sync_abort_wait_cause);
        wait_end(wait_params_of(w));
    }
    cmd_result_u64(j, "connections_closed", closed);
    cmd_result_u64(j, "waits_aborted", waited);
    abort_mark_add(s, j->received, p);
    return true;
}

static void abort_cleanup(struct abort_params *p)
{
    free(p->nodes);
    free(p->upto);
}

/* ---- batch ---- */

struct batch_params {
    struct command_job **children; /* not started yet; NULL once started */
    uint32_t n, next;
    uint32_t in_flight;      /* started, not completed, holding the batch */
    uint32_t detached;       /* nowait sends started, not completed */
    struct growbuf *results; /* per command, its packed result map once done */
    uint32_t n_results;
    double started_ms, cpu_ms;
    bool stepping, advance; /* batch_step's trampoline */
    bool cancelled;
    atomic_bool stopped; /* a command failed on the worker: skip the ones after it */
};
COMMAND_PARAMS_OF(batch)

static void batch_child_done(struct command_job *c);

/* params of one command: a map; absent, nil or {} (an empty Lua table, which
 * may arrive as an empty array) mean none. NULL when it is something else. */
static const msgpack_object *batch_child_params(const msgpack_object *entry)
{
    static const msgpack_object none = {.type = MSGPACK_OBJECT_MAP};
    if (entry->via.array.size < 2) return &none;
    const msgpack_object *o = &entry->via.array.ptr[1];
    if (o->type == MSGPACK_OBJECT_MAP) return o;
    if (o->type == MSGPACK_OBJECT_NIL || (o->type == MSGPACK_OBJECT_ARRAY && !o->via.array.size))
        return &none;
    return NULL;
}

/* Parses command i ({name, params}) into a job of its own. */
static bool batch_parse_child(struct command_job *j, struct batch_params *p, struct proto_args *a,
                              uint32_t i, const msgpack_object *entry)
{
    if (entry->type != MSGPACK_OBJECT_ARRAY || entry->via.array.size < 1 ||
        entry->via.array.size > 2 || entry->via.array.ptr[0].type != MSGPACK_OBJECT_STR)
        return cmd_arg_fail(a, "command %" PRIu32 ": expected {name, params}", i + 1);
    const msgpack_object *name = &entry->via.array.ptr[0];
    const struct command_entry *cmd = command_find(name->via.str.ptr, name->via.str.size);
    int len = name->via.str.size < 64 ? (int)name->via.str.size : 64;
    if (!cmd)
        return cmd_arg_fail(a, "command %" PRIu32 ": unknown command '%.*s'", i + 1, len,
                            len ? name->via.str.ptr : "");
    if (cmd->cmd == &sync_cmd_batch)
        return cmd_arg_fail(a, "command %" PRIu32 " (batch): batches do not nest", i + 1);
    const msgpack_object *params = batch_child_params(entry);
    if (!params)
        return cmd_arg_fail(a, "command %" PRIu32 " (%s): params must be a table", i + 1,
                            cmd->name);
    struct command_job *c = command_job_new(j->server, cmd, 0);
    if (!c) return cmd_arg_fail(a, "out of memory");
    c->parent = j;
    c->index = i + 1;
    c->complete = batch_child_done;
    p->children[i] = c;
    struct proto_args ca;
    if (!command_job_parse(c, params, &ca))
        return cmd_arg_fail(a, "command %" PRIu32 " (%s): %s", i + 1, cmd->name, ca.err);
    return true;
}

static bool batch_parse(struct command_job *j, struct batch_params *p, struct proto_args *a)
{
    const msgpack_object *list = proto_args_get(a, "commands");
    if (!list) return proto_args_missing(a, "commands");
    if (list->type == MSGPACK_OBJECT_MAP && list->via.map.size == 0) return true; /* {} */
    if (list->type != MSGPACK_OBJECT_ARRAY)
        return cmd_arg_fail(a, "param 'commands': expected a list of {name, params}, got %s",
                            proto_type_name(list->type));
    if (list->via.array.size > BATCH_MAX)
        return cmd_arg_fail(a, "param 'commands': %" PRIu32 " commands, at most %d",
                            list->via.array.size, BATCH_MAX);
    p->children = calloc(list->via.array.size ? list->via.array.size : 1, sizeof *p->children);
    p->results = calloc(list->via.array.size ? list->via.array.size : 1, sizeof *p->results);
    if (!p->children || !p->results) return cmd_arg_fail(a, "out of memory");
    p->n = list->via.array.size;
    for (uint32_t i = 0; i < p->n; i++)
        if (!batch_parse_child(j, p, a, i, &list->via.array.ptr[i])) return false;
    return true;
}

/* The results in command order (a nowait send may complete after commands
 * that follow it). */
static void batch_end(struct command_job *j, struct batch_params *p)
{
    for (uint32_t i = 0; i < p->n && !j->err[0]; i++)
        if (p->results[i].failed) cmd_fail(j, "out of memory packing the results");
    if (!j->err[0]) {
        cmd_result_key(j, "results");
        msgpack_pack_array(&j->result.pk, p->n_results);
        for (uint32_t i = 0; i < p->n; i++)
            msgmap_raw(&j->result, p->results[i].data, p->results[i].len);
    }
    j->work.wall_ms = command_now_ms() - p->started_ms;
    j->work.cpu_ms = p->cpu_ms;
    command_job_finish(j);
}

/* A command whose completion is the end of its run on the worker: the next
 * worker command may be queued behind it at once, since the worker runs
 * them in order (and skips the rest once one failed, sync_batch_stopped). */
static bool batch_chainable(const struct command_job *c)
{
    return c->cmd->kind == COMMAND_WORKER && !c->cmd->after;
}

/* Starts the next commands (a run of worker commands goes to the worker
 * together; a nowait send does not hold up what follows it: its snapshot is
 * queued in order before them), or ends the batch once nothing is in
 * flight. Commands that complete at once (ping, a satisfied wait) come back
 * here through batch_child_done: the loop then goes on instead of
 * recursing. */
static void batch_step(struct command_job *j, struct batch_params *p)
{
    if (p->stepping) {
        p->advance = true;
        return;
    }
    p->stepping = true;
    do {
        p->advance = false;
        if (p->in_flight) break;
        if (j->err[0] || p->next == p->n) {
            if (p->detached) break; /* the batch ends when its last send does */
            p->stepping = false;
            batch_end(j, p);
            return;
        }
        bool go_on;
        do {
            struct command_job *c = p->children[p->next];
            p->children[p->next++] = NULL;
            go_on = c->detached || (batch_chainable(c) && p->next < p->n &&
                                    p->children[p->next]->cmd->kind == COMMAND_WORKER);
            if (c->detached)
                p->detached++;
            else
                p->in_flight++;
            /* Its completion only records its result while the chain goes on. */
            c->work.quiet_done = go_on && !c->detached;
            command_job_start(c);
        } while (go_on && p->next < p->n && !j->err[0]);
    } while (p->advance);
    p->stepping = false;
}

static void batch_child_done(struct command_job *c)
{
    struct command_job *j = c->parent;
    struct batch_params *p = batch_params_of(j);
    if (c->detached)
        p->detached--;
    else
        p->in_flight--;
    if (c->cancelled) {
        p->cancelled = true;
    } else if (c->err[0]) {
        if (!j->err[0]) cmd_fail(j, "command %" PRIu32 " (%s): %s", c->index, c->name, c->err);
    } else if (!c->skipped) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &p->results[c->index - 1], growbuf_write);
        if (!command_job_pack_result(c, &pk)) p->results[c->index - 1].failed = true;
        p->n_results++;
        p->cpu_ms += c->work.cpu_ms;
    }
    command_job_free(c);
    if (p->cancelled) {
        if (!p->in_flight && !p->detached) command_job_cancel(j);
        return;
    }
    batch_step(j, p);
}

bool sync_batch_stopped(struct command_job *batch)
{
    struct batch_params *p = batch_params_of(batch);
    return atomic_load(&p->stopped);
}

void sync_batch_stop(struct command_job *batch)
{
    struct batch_params *p = batch_params_of(batch);
    atomic_store(&p->stopped, true);
}

static void batch_start(struct command_job *j, struct batch_params *p)
{
    p->started_ms = command_now_ms();
    batch_step(j, p);
}

static void batch_cleanup(struct batch_params *p)
{
    for (uint32_t i = 0; p->children && i < p->n; i++)
        command_job_free(p->children[i]);
    free(p->children);
    for (uint32_t i = 0; p->results && i < p->n; i++)
        growbuf_free(&p->results[i]);
    free(p->results);
}

/* ---- table entries ---- */

static const char *const keys_wait[] = {"tensors", "tensor", "k", "from", "timeout", "clear", NULL};
static const char *const keys_batch[] = {"commands", NULL};
static const char *const keys_abort[] = {"nodes", "any_wait", "incarnations", NULL};

COMMAND_DEFINE(sync_cmd_wait, wait, COMMAND_GATE, (parse, start, cleanup));
COMMAND_DEFINE(sync_cmd_batch, batch, COMMAND_GATE, (parse, start, cleanup));
COMMAND_DEFINE(sync_cmd_abort, abort, COMMAND_NOW, (parse, run, cleanup));
