/* commands_data.c — send and peers (see commands_data.h): params on the loop
 * thread, the snapshot on the worker, the transfers through dataplane.c (one
 * per destination, all from the one snapshot). */
#include "peer/commands_data.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/container.h"
#include "peer/command_job.h"
#include "peer/commands_sync.h"
#include "peer/data_auth.h"
#include "peer/dataplane.h"

/* Destinations of one broadcast: far more than a network's nodes is a bug. */
#define SEND_MAX_DESTINATIONS 4096

struct send_params;

/* One destination of a send: its transfer, owned by the send's job. */
struct send_dest {
    struct dataplane_send ds; /* addr, to; the rest is filled in after() */
    struct send_params *send;
};

struct send_params {
    struct cmd_range range;
    char tensor[COMMAND_NAME_SIZE], as[COMMAND_NAME_SIZE];
    bool has_at, add;
    int64_t at;
    struct send_dest *dests;
    uint32_t n_dests;
    struct command_job *job;
    /* The snapshot (worker): the tensor held whole, or a copy of its range. */
    struct store_tensor *snapshot;
    const float *data;
    uint64_t count, version;
    uint64_t pattern; /* trailing elements of a virtual tensor, sent as zeros */
    /* The transfers (loop thread). */
    uint32_t pending; /* destinations not done yet (+1 while they start) */
    uint32_t failed;
    bool cancelled;
    uint64_t bytes;
    double ms;
    char error[600]; /* the first failure */
};

/* The port of addresses that name none: ours, as all peers of a run
 * normally listen on the same one. */
static int data_default_port(const struct peer_server *s)
{
    return s->cfg.data_port ? s->cfg.data_port : DATAPLANE_DEFAULT_PORT;
}

/* ---- send: params ---- */

static bool send_dests_alloc(struct send_params *p, struct proto_args *a, uint32_t n)
{
    if (n == 0) return cmd_arg_fail(a, "param 'to': no destination");
    if (n > SEND_MAX_DESTINATIONS)
        return cmd_arg_fail(a, "param 'to': %" PRIu32 " destinations, at most %d", n,
                            SEND_MAX_DESTINATIONS);
    p->dests = calloc(n, sizeof *p->dests);
    if (!p->dests) return cmd_arg_fail(a, "out of memory");
    p->n_dests = n;
    return true;
}

/* Destination i by node name (the peers{} table gives the address). */
static bool send_dest_node(const struct dataplane *dp, struct send_params *p, struct proto_args *a,
                           uint32_t i, const msgpack_object *o)
{
    struct dataplane_send *ds = &p->dests[i].ds;
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 || o->via.str.size >= sizeof ds->to ||
        memchr(o->via.str.ptr, '\0', o->via.str.size))
        return cmd_arg_fail(a, "param 'to': %s %" PRIu32 " is not a node name",
                            p->n_dests > 1 ? "element" : "value", i + 1);
    memcpy(ds->to, o->via.str.ptr, o->via.str.size);
    ds->to[o->via.str.size] = '\0';
    for (uint32_t k = 0; k < i; k++)
        if (strcmp(p->dests[k].ds.to, ds->to) == 0)
            return cmd_arg_fail(a, "param 'to': node '%s' is listed twice", ds->to);
    if (!dataplane_lookup(dp, ds->to, &ds->addr, &ds->addr_len))
        return cmd_arg_fail(a,
                            "param 'to': no address for node '%s' (the controller gives "
                            "them with peers{})",
                            ds->to);
    return true;
}

/* to = node | {node, ...}, or to_addr = "A[:PORT]". */
static bool send_parse_destinations(struct command_job *j, struct send_params *p,
                                    struct proto_args *a)
{
    const msgpack_object *to = proto_args_get(a, "to");
    bool by_addr = proto_args_get(a, "to_addr") != NULL;
    if ((to != NULL) == by_addr) return cmd_arg_fail(a, "give one of 'to' (a node) and 'to_addr'");
    if (by_addr) {
        char addr_text[128] = "", err[200];
        if (!cmd_arg_text(a, "to_addr", true, addr_text, sizeof addr_text) ||
            !send_dests_alloc(p, a, 1))
            return false;
        struct dataplane_send *ds = &p->dests[0].ds;
        if (dataplane_parse_addr(addr_text, data_default_port(j->server), &ds->addr, &ds->addr_len,
                                 err, sizeof err) != 0)
            return cmd_arg_fail(a, "param 'to_addr': %s", err);
        return true;
    }
    if (to->type == MSGPACK_OBJECT_MAP && to->via.map.size == 0) /* {} from Lua */
        return send_dests_alloc(p, a, 0);
    if (to->type != MSGPACK_OBJECT_ARRAY)
        return send_dests_alloc(p, a, 1) && send_dest_node(j->server->dataplane, p, a, 0, to);
    if (!send_dests_alloc(p, a, to->via.array.size)) return false;
    for (uint32_t i = 0; i < p->n_dests; i++)
        if (!send_dest_node(j->server->dataplane, p, a, i, &to->via.array.ptr[i])) return false;
    return true;
}

static bool send_parse(struct command_job *j, struct send_params *p, struct proto_args *a)
{
    p->job = j;
    if (!cmd_arg_required_name(a, "tensor", p->tensor) || !cmd_arg_range(a, &p->range) ||
        !send_parse_destinations(j, p, a))
        return false;
    int got = cmd_arg_name(a, "as", p->as);
    if (got == 0) memcpy(p->as, p->tensor, sizeof p->tensor);
    p->has_at = proto_args_get(a, "at") != NULL;
    bool nowait = false;
    if (got < 0 || !cmd_arg_int(a, "at", false, 0, (int64_t)STORE_MAX_ELEMENTS, &p->at) ||
        !cmd_arg_bool(a, "add", &p->add) || !cmd_arg_bool(a, "nowait", &nowait))
        return false;
    /* nowait: the batch's next command need not wait for the receiver's
     * ack (the snapshot is still taken in order); alone it would mean
     * answering before the send is done, which no caller can use. */
    if (nowait && !j->parent)
        return cmd_arg_fail(a, "param 'nowait': only for a send inside a batch");
    j->detached = nowait;
    return true;
}

/* ---- send: snapshot (worker) ---- */

/* In order with compute: the whole tensor is held by reference (patchers
 * then copy on write, store.h); a part of it is copied, so that receiving
 * into other parts of it meanwhile needs no copy. */
static bool send_run(struct command_job *j, struct send_params *p)
{
    struct store_tensor *t = cmd_find(j, p->tensor);
    uint64_t offset, n;
    if (!t || !cmd_range_of(j, &p->range, t, &offset, &n)) {
        store_tensor_release(t);
        return false;
    }
    if (p->has_at && n > STORE_MAX_ELEMENTS - (uint64_t)p->at) {
        store_tensor_release(t);
        return cmd_fail(j, "at %" PRId64 " + %" PRIu64 " elements is beyond any tensor", p->at, n);
    }
    p->count = n;
    p->version = store_tensor_version(t);
    /* A virtual tensor's elements past its resident prefix go as the pattern. */
    uint64_t held = store_resident_span(t, offset, n);
    p->pattern = n - held;
    if (n == t->size) {
        p->snapshot = t;
        p->data = t->data;
        return true;
    }
    struct store_tensor *part = cmd_new_virtual_tensor(j, t->name, n, held, false);
    if (part) memcpy(part->data, t->data + offset, held * sizeof(float));
    store_tensor_release(t);
    p->snapshot = part;
    p->data = part ? part->data : NULL;
    return part != NULL;
}

/* A snapshot by reference is brief; a range is copied (read and write).
 * Run here or on the worker, its transfer is handed to the data plane in
 * command order (worker.c on_wakeup), which a ring's waits rely on. */
static bool send_brief(struct command_job *j, const struct send_params *p)
{
    return !p->range.set || cmd_brief_elements(p->range.count, 2);
}

/* ---- send: transfers (loop thread) ---- */

static void send_finish(struct send_params *p)
{
    struct command_job *j = p->job;
    if (p->cancelled) {
        command_job_cancel(j);
        return;
    }
    if (p->failed > 1)
        cmd_fail(j, "%s (and %" PRIu32 " more of %" PRIu32 " destinations failed)", p->error,
                 p->failed - 1, p->n_dests);
    else if (p->failed)
        cmd_fail(j, "%s", p->error);
    if (!p->failed) {
        cmd_result_u64(j, "bytes", p->bytes);
        cmd_result_u64(j, "transfer", p->dests[0].ds.id);
        cmd_result_u64(j, "transfers", p->n_dests);
        cmd_result_u64(j, "version", p->version);
        cmd_result_f64(j, "snapshot_ms", peer_emulated_ms(j->server, j->work.wall_ms));
        j->work.wall_ms = p->ms;
    }
    command_job_finish(j);
}

static void send_dest_done(struct dataplane_send *ds, const char *error, bool cancelled)
{
    struct send_dest *d = container_of(ds, struct send_dest, ds);
    struct send_params *p = d->send;
    if (cancelled) {
        p->cancelled = true;
    } else if (error) {
        if (!p->failed++) snprintf(p->error, sizeof p->error, "%s", error);
    } else {
        p->bytes += ds->bytes;
    }
    if (ds->ms > p->ms) p->ms = ds->ms; /* all start together: the last ack's */
    if (--p->pending == 0) send_finish(p);
}

/* Hands the snapshot to the data plane, once per destination (each
 * transfer holds a reference), and keeps the job until every one is done. */
static bool send_after(struct command_job *j, struct send_params *p)
{
    struct peer_server *s = j->server;
    sync_forget_aborts(s, j->received);
    p->pending = p->n_dests + 1; /* a done called at once must not end the send early */
    for (uint32_t i = 0; i < p->n_dests; i++) {
        struct dataplane_send *ds = &p->dests[i].ds;
        p->dests[i].send = p;
        if (ds->to[0] && sync_aborted_since(s, j->received, ds->to)) {
            send_dest_done(ds, sync_abort_cause, false);
            continue;
        }
        store_tensor_hold(p->snapshot);
        ds->snapshot = p->snapshot;
        ds->data = p->data;
        ds->count = p->count;
        ds->pattern = p->pattern;
        ds->has_range = p->has_at || p->range.set;
        ds->offset = p->has_at ? (uint64_t)p->at : p->range.offset;
        ds->add = p->add;
        ds->version = p->version;
        snprintf(ds->as, sizeof ds->as, "%s", p->as);
        ds->done = send_dest_done;
        dataplane_send(j->server->dataplane, ds);
    }
    if (--p->pending == 0) send_finish(p);
    return true;
}

static void send_cleanup(struct send_params *p)
{
    store_tensor_release(p->snapshot);
    p->snapshot = NULL;
    free(p->dests);
}

/* ---- peers ---- */

/* Checks one table entry and parses its address. */
static bool peers_entry(struct proto_args *a, const msgpack_object_kv *kv, int port,
                        struct sockaddr_storage *addr, socklen_t *len)
{
    const msgpack_object *k = &kv->key, *v = &kv->val;
    char name[FRAME_NODE_NAME_SIZE], text[128], err[200];
    if (k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 || k->via.str.size >= sizeof name ||
        memchr(k->via.str.ptr, '\0', k->via.str.size))
        return cmd_arg_fail(a, "param 'table': keys must be node names");
    memcpy(name, k->via.str.ptr, k->via.str.size);
    name[k->via.str.size] = '\0';
    if (v->type != MSGPACK_OBJECT_STR || v->via.str.size >= sizeof text)
        return cmd_arg_fail(a, "param 'table': node '%s': the address must be a string", name);
    memcpy(text, v->via.str.ptr, v->via.str.size);
    text[v->via.str.size] = '\0';
    if (dataplane_parse_addr(text, port, addr, len, err, sizeof err) != 0)
        return cmd_arg_fail(a, "param 'table': node '%s': %s", name, err);
    return true;
}

struct peers_params {
    const msgpack_object *table; /* the request's, or `copy` in a batch; may be NULL */
    bool replace, copied, has_secret, has_incarnation;
    uint64_t incarnation; /* the node's restarts before this peer (dataplane.h) */
    uint8_t secret[DATA_AUTH_SECRET_BYTES];
    msgpack_sbuffer packed;
    msgpack_unpacked copy;
};

/* A batch runs its commands after the request is gone: the table is kept
 * as a copy (packed and unpacked again into memory of its own). */
static bool peers_keep_table(struct peers_params *p, struct proto_args *a)
{
    msgpack_sbuffer_init(&p->packed);
    msgpack_unpacked_init(&p->copy);
    p->copied = true;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &p->packed, msgpack_sbuffer_write);
    if (msgpack_pack_object(&pk, *p->table) != 0 ||
        msgpack_unpack_next(&p->copy, p->packed.data, p->packed.size, NULL) !=
            MSGPACK_UNPACK_SUCCESS)
        return cmd_arg_fail(a, "out of memory");
    p->table = &p->copy.data;
    return true;
}

/* The network's data secret (peer/data_auth.h), when given: binary of
 * DATA_AUTH_SECRET_BYTES, kept until run. */
static bool peers_parse_secret(struct peers_params *p, struct proto_args *a)
{
    const msgpack_object *secret = proto_args_get(a, "secret");
    if (!secret) return true;
    if (secret->type != MSGPACK_OBJECT_BIN)
        return cmd_arg_fail(a, "param 'secret': expected binary, got %s",
                            proto_type_name(secret->type));
    if (secret->via.bin.size != sizeof p->secret)
        return cmd_arg_fail(a, "param 'secret': expected %zu bytes, got %u", sizeof p->secret,
                            secret->via.bin.size);
    memcpy(p->secret, secret->via.bin.ptr, sizeof p->secret);
    p->has_secret = true;
    return true;
}

/* Checks every entry: a bad table is refused before anything changes. A
 * call may give the secret, the table or both. */
static bool peers_parse(struct command_job *j, struct peers_params *p, struct proto_args *a)
{
    p->table = proto_args_get(a, "table");
    if (!cmd_arg_bool(a, "replace", &p->replace)) return false;
    if (!peers_parse_secret(p, a)) return false;
    int inc = proto_arg_u64(a, "incarnation", &p->incarnation);
    if (inc < 0) return false;
    p->has_incarnation = inc == 1;
    if (!p->table && !p->has_secret) return proto_args_missing(a, "table");
    if (!p->table) return true;
    /* An empty Lua table arrives as an empty array. */
    if (p->table->type != MSGPACK_OBJECT_MAP &&
        !(p->table->type == MSGPACK_OBJECT_ARRAY && p->table->via.array.size == 0))
        return cmd_arg_fail(a, "param 'table': expected a map of node names to addresses, got %s",
                            proto_type_name(p->table->type));
    uint32_t n = p->table->type == MSGPACK_OBJECT_MAP ? p->table->via.map.size : 0;
    struct sockaddr_storage addr;
    socklen_t len;
    for (uint32_t i = 0; i < n; i++)
        if (!peers_entry(a, &p->table->via.map.ptr[i], data_default_port(j->server), &addr, &len))
            return false;
    return !command_job_in_batch(j) || peers_keep_table(p, a);
}

/* Stores the entries parse() checked. */
static bool peers_run(struct command_job *j, const struct peers_params *p)
{
    struct peer_server *s = j->server;
    char why[128];
    if (p->has_secret &&
        dataplane_set_secret(s->dataplane, p->secret, sizeof p->secret, why, sizeof why) < 0)
        return cmd_fail(j, "param 'secret': %s", why);
    if (p->has_incarnation) dataplane_set_incarnation(s->dataplane, p->incarnation);
    uint32_t n = p->table && p->table->type == MSGPACK_OBJECT_MAP ? p->table->via.map.size : 0;
    struct proto_args a;
    struct sockaddr_storage addr;
    socklen_t len;
    if (p->replace) dataplane_clear_peers(s->dataplane);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &p->table->via.map.ptr[i].key;
        char name[FRAME_NODE_NAME_SIZE];
        memcpy(name, k->via.str.ptr, k->via.str.size);
        name[k->via.str.size] = '\0';
        peers_entry(&a, &p->table->via.map.ptr[i], data_default_port(s), &addr, &len);
        if (dataplane_set_peer(s->dataplane, name, &addr, len) != 0)
            return cmd_fail(j, "out of memory");
    }
    cmd_result_u64(j, "peers", dataplane_peer_count(s->dataplane));
    return true;
}

static void peers_cleanup(struct peers_params *p)
{
    if (!p->copied) return;
    msgpack_unpacked_destroy(&p->copy);
    msgpack_sbuffer_destroy(&p->packed);
}

/* ---- table entries ---- */

static const char *const keys_send[] = {"tensor", "to",  "to_addr", "as", "range",
                                        "at",     "add", "nowait",  NULL};
static const char *const keys_peers[] = {"table", "replace", "secret", "incarnation", NULL};

COMMAND_DEFINE(data_cmd_send, send, COMMAND_WORKER, (parse, run, after, cleanup, brief));
COMMAND_DEFINE(data_cmd_peers, peers, COMMAND_NOW, (parse, run, cleanup), .bare = true);
