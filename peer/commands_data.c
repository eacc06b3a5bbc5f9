/* commands_data.c — send and peers (see commands_data.h): params on the loop
 * thread, the snapshot on the worker, the transfer through dataplane.c. */
#include "peer/commands_data.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "peer/command_job.h"
#include "peer/dataplane.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct send_params {
    struct dataplane_send ds; /* addr, to, as, then the snapshot */
    struct command_job *job;
    char tensor[COMMAND_NAME_SIZE];
};

/* The port of addresses that name none: ours, as all peers of a run
 * normally listen on the same one. */
static int data_default_port(const struct peer_server *s)
{
    return s->cfg.data_port ? s->cfg.data_port : DATAPLANE_DEFAULT_PORT;
}

/* ---- send ---- */

/* Fills p->ds's destination from to= or to_addr=. */
static bool send_parse_destination(struct command_job *j, struct send_params *p,
                                   struct proto_args *a)
{
    char addr_text[128] = "";
    bool by_name = proto_args_get(a, "to") != NULL, by_addr = proto_args_get(a, "to_addr") != NULL;
    if (by_name == by_addr) return cmd_arg_fail(a, "give one of 'to' (a node) and 'to_addr'");
    if (by_name) {
        if (!cmd_arg_text(a, "to", true, p->ds.to, sizeof p->ds.to)) return false;
        if (!dataplane_lookup(j->server->dataplane, p->ds.to, &p->ds.addr, &p->ds.addr_len))
            return cmd_arg_fail(a,
                                "param 'to': no address for node '%s' (the controller gives "
                                "them with peers{})",
                                p->ds.to);
        return true;
    }
    char err[200];
    if (!cmd_arg_text(a, "to_addr", true, addr_text, sizeof addr_text)) return false;
    if (dataplane_parse_addr(addr_text, data_default_port(j->server), &p->ds.addr, &p->ds.addr_len,
                             err, sizeof err) != 0)
        return cmd_arg_fail(a, "param 'to_addr': %s", err);
    return true;
}

static bool send_parse(struct command_job *j, struct proto_args *a)
{
    struct send_params *p = j->extra;
    p->job = j;
    if (!cmd_arg_required_name(a, "tensor", p->tensor) || !cmd_arg_range(j, a) ||
        !send_parse_destination(j, p, a))
        return false;
    int got = cmd_arg_name(a, "as", p->ds.as);
    if (got == 0) memcpy(p->ds.as, p->tensor, sizeof p->tensor);
    return got >= 0;
}

/* On the worker, in order with compute: the whole tensor is held by
 * reference (patchers then copy on write, store.h); a part of it is copied,
 * so that receiving into other parts of it meanwhile needs no copy. */
static bool send_run(struct command_job *j)
{
    struct send_params *p = j->extra;
    struct store_tensor *t = cmd_find(j, p->tensor);
    float *start;
    uint64_t n;
    if (!t || !cmd_span(j, t, &start, &n)) {
        store_tensor_release(t);
        return false;
    }
    p->ds.count = n;
    p->ds.has_range = j->has_range;
    p->ds.offset = j->range_offset;
    if (n == t->size) {
        p->ds.snapshot = t;
        p->ds.data = start;
        return true;
    }
    struct store_tensor *part = cmd_new_tensor(j, t->name, n, false);
    if (part) memcpy(part->data, start, n * sizeof(float));
    store_tensor_release(t);
    p->ds.snapshot = part;
    p->ds.data = part ? part->data : NULL;
    return part != NULL;
}

static void send_done(struct dataplane_send *ds, const char *error, bool cancelled)
{
    struct send_params *p = container_of(ds, struct send_params, ds);
    struct command_job *j = p->job;
    if (cancelled) {
        command_job_discard(j);
        return;
    }
    if (error) {
        cmd_fail(j, "%s", error);
    } else {
        cmd_result_u64(j, "bytes", ds->bytes);
        cmd_result_u64(j, "transfer", ds->id);
        cmd_result_f64(j, "snapshot_ms", j->work.wall_ms);
        j->work.wall_ms = ds->ms;
    }
    command_job_reply(j);
}

/* Loop thread: hands the snapshot to the data plane and keeps the job. */
static bool send_after(struct command_job *j)
{
    struct send_params *p = j->extra;
    p->ds.done = send_done;
    dataplane_send(j->server->dataplane, &p->ds);
    return true;
}

static void send_cleanup(struct command_job *j)
{
    struct send_params *p = j->extra;
    store_tensor_release(p->ds.snapshot);
    p->ds.snapshot = NULL;
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

/* Validates every entry, then (second pass) stores them: a bad entry
 * changes nothing. */
static bool peers_apply(struct peer_server *s, struct proto_args *a, const msgpack_object *table,
                        bool replace)
{
    uint32_t n = table->type == MSGPACK_OBJECT_MAP ? table->via.map.size : 0;
    struct sockaddr_storage addr;
    socklen_t len;
    int port = data_default_port(s);
    for (uint32_t i = 0; i < n; i++)
        if (!peers_entry(a, &table->via.map.ptr[i], port, &addr, &len)) return false;
    if (replace) dataplane_clear_peers(s->dataplane);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &table->via.map.ptr[i].key;
        char name[FRAME_NODE_NAME_SIZE];
        memcpy(name, k->via.str.ptr, k->via.str.size);
        name[k->via.str.size] = '\0';
        peers_entry(a, &table->via.map.ptr[i], port, &addr, &len);
        if (dataplane_set_peer(s->dataplane, name, &addr, len) != 0)
            return cmd_arg_fail(a, "out of memory");
    }
    return true;
}

/* The network's data secret (peer/data_auth.h), when given: binary. */
static bool peers_secret(struct peer_server *s, struct proto_args *a)
{
    const msgpack_object *secret = proto_args_get(a, "secret");
    char why[128];
    if (!secret) return true;
    if (secret->type != MSGPACK_OBJECT_BIN)
        return cmd_arg_fail(a, "param 'secret': expected binary, got %s",
                            proto_type_name(secret->type));
    if (dataplane_set_secret(s->dataplane, secret->via.bin.ptr, secret->via.bin.size, why,
                             sizeof why) < 0)
        return cmd_arg_fail(a, "param 'secret': %s", why);
    return true;
}

static void peers_reply(struct peer_server *s, uint32_t msgid, double start_ms,
                        struct proto_args *a)
{
    const msgpack_object *table = proto_args_get(a, "table");
    bool replace = false;
    bool ok = proto_arg_bool(a, "replace", &replace) >= 0 && peers_secret(s, a);
    if (ok && !table) ok = proto_args_missing(a, "table");
    /* An empty Lua table arrives as an empty array. */
    if (ok && table->type != MSGPACK_OBJECT_MAP &&
        !(table->type == MSGPACK_OBJECT_ARRAY && table->via.array.size == 0))
        ok = cmd_arg_fail(a, "param 'table': expected a map of node names to addresses, got %s",
                          proto_type_name(table->type));
    if (ok) ok = peers_apply(s, a, table, replace);
    if (!ok) {
        char message[400];
        snprintf(message, sizeof message, "peers: %s", a->err);
        proto_pack_error(&s->pk, msgid, message);
        return;
    }
    proto_pack_response_begin(&s->pk, msgid, 2);
    proto_pack_kv_i64(&s->pk, "peers", (int64_t)dataplane_peer_count(s->dataplane));
    proto_pack_kv_f64(&s->pk, "ms", command_now_ms() - start_ms);
}

/* ---- table entries ---- */

static const char *const keys_send[] = {"tensor", "to", "to_addr", "as", "range", NULL};
static const char *const keys_peers[] = {"table", "replace", "secret", NULL};

const struct command data_cmd_send = {"send",
                                      keys_send,
                                      .parse = send_parse,
                                      .run = send_run,
                                      .after = send_after,
                                      .cleanup = send_cleanup,
                                      .extra_size = sizeof(struct send_params)};
const struct command data_cmd_peers = {"peers", keys_peers, .reply_inline = peers_reply};
