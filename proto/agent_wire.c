/* agent_wire.c — the agent's messages (see agent_wire.h). */
#include "proto/agent_wire.h"

#include "proto/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one table of method names: the controller, the agent and the fuzz
 * target all go through it. */
static const struct {
    const char *name;
    bool served;
} agent_methods[AGENT_METHOD_COUNT] = {
    [AGENT_UNKNOWN] = {"", false},         [AGENT_HELLO] = {"hello", true},
    [AGENT_PING] = {"ping", true},         [AGENT_TEARDOWN] = {"teardown", true},
    [AGENT_BUILD] = {"build", true},       [AGENT_CALL] = {"call", true},
    [AGENT_LINK] = {"link", true},         [AGENT_KILL] = {"kill", true},
    [AGENT_RESTART] = {"restart", true},   [AGENT_PARTITION] = {"partition", true},
    [AGENT_HEAL] = {"heal", true},         [AGENT_STATS] = {"stats", true},
    [AGENT_EXIT] = {"exit", true},         [AGENT_UNDERLAY] = {"underlay", true},
    [AGENT_COUNTERS] = {"counters", true}, [AGENT_TRACE] = {"trace", true},
    [AGENT_RUN] = {"run", true},           [AGENT_SIGNAL] = {"signal", true},
    [AGENT_PROGRAM] = {"program", true},   [AGENT_REROUTE] = {"reroute", true},
};

const char *agent_method_name(enum agent_method m)
{
    return (unsigned)m < AGENT_METHOD_COUNT ? agent_methods[m].name : "";
}

enum agent_method agent_method_find(const char *name, uint32_t len)
{
    for (int m = AGENT_UNKNOWN + 1; m < AGENT_METHOD_COUNT; m++)
        if (proto_method_is(agent_methods[m].name, name, len)) return (enum agent_method)m;
    return AGENT_UNKNOWN;
}

bool agent_method_served(enum agent_method m)
{
    return (unsigned)m < AGENT_METHOD_COUNT && agent_methods[m].served;
}

/* ---- encoders ---- */

void agent_wire_hello(struct msgmap *m, const struct agent_hello *h)
{
    msgmap_str(m, "version", h->version);
    msgmap_str(m, "run", h->run_id);
    msgmap_str(m, "machine", h->machine);
    msgmap_i64(m, "clock_ns", h->clock_ns);
}

void agent_wire_hello_reply(struct msgmap *m, const struct agent_hello_reply *r)
{
    msgmap_str(m, "version", r->version);
    msgmap_str(m, "hostname", r->hostname);
    msgmap_str(m, "features", r->features);
    msgmap_str(m, "underlay_address", r->underlay_address);
    msgmap_str(m, "underlay_device", r->underlay_device);
    msgmap_i64(m, "underlay_mtu", r->underlay_mtu);
    msgmap_i64(m, "uid", r->uid);
    msgmap_bool(m, "cap_net_admin", r->cap_net_admin);
    msgmap_i64(m, "clock_ns", r->clock_ns);
}

void agent_wire_ping(struct msgmap *m, const struct agent_ping *p)
{
    msgmap_i64(m, "t0_ns", p->t0_ns);
}

void agent_wire_pong(struct msgmap *m, const struct agent_pong *p)
{
    msgmap_i64(m, "t1_ns", p->t1_ns);
    msgmap_i64(m, "t2_ns", p->t2_ns);
}

void agent_wire_build(struct msgmap *m, const struct agent_build *b)
{
    msgmap_bin(m, "part", b->part, b->part_len);
    if (b->stats) msgmap_bool(m, "stats", true);
    if (b->stall_threshold_ns) msgmap_u64(m, "stall_threshold_ns", b->stall_threshold_ns);
}

void agent_wire_build_reply(struct msgmap *m, const struct agent_build_reply *r)
{
    msgmap_str(m, "registry", r->registry);
    msgmap_u64(m, "nodes", r->nodes);
}

void agent_wire_build_error(struct msgmap *m, const struct agent_build_error *e)
{
    msgmap_i64(m, "code", e->code);
    msgmap_str(m, "node", e->node);
    msgmap_str(m, "link", e->link);
    msgmap_str(m, "message", e->message);
}

void agent_wire_call(struct msgmap *m, const struct agent_call *c)
{
    msgmap_u64(m, "node", c->node);
    msgmap_bin(m, "data", c->data, c->len);
}

void agent_wire_exit(struct msgmap *m, const struct agent_exit *e)
{
    msgmap_u64(m, "node", e->node);
    msgmap_i64(m, "status", e->status);
}

/* ---- decoders ----
 * Each message is a list of fields: key, kind and where it goes. */

enum field_kind { FIELD_STR, FIELD_I64, FIELD_U64, FIELD_BOOL, FIELD_BIN };

struct field {
    const char *key;
    enum field_kind kind;
    void *dst;
    size_t cap;    /* strings: the buffer's size; bins: the most bytes */
    uint32_t *len; /* bins: where the length goes */
};

/* A bin of 1 .. f->cap bytes; dst is a const uint8_t ** into the message. */
static int read_bin(struct proto_args *a, const struct field *f)
{
    const void *bytes;
    int r = proto_arg_bin(a, f->key, &bytes, f->len);
    if (r != 1) return r;
    if (*f->len == 0 || *f->len > f->cap) {
        snprintf(a->err, sizeof a->err, "param '%s': %u bytes, expected 1 to %zu", f->key, *f->len,
                 f->cap);
        return -1;
    }
    *(const uint8_t **)f->dst = bytes;
    return 1;
}

static int read_field(struct proto_args *a, const struct field *f)
{
    switch (f->kind) {
    case FIELD_U64:
        return proto_arg_u64(a, f->key, f->dst);
    case FIELD_BIN:
        return read_bin(a, f);
    case FIELD_STR:
        return proto_arg_strcpy(a, f->key, f->dst, f->cap);
    case FIELD_I64:
        return proto_arg_i64(a, f->key, f->dst);
    case FIELD_BOOL:
        return proto_arg_bool(a, f->key, f->dst);
    }
    return -1;
}

static int read_fields(const char *what, const msgpack_object *map, const struct field *fields,
                       size_t n, char *err, size_t errlen)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return snprintf(err, errlen, "%s: not a map", what), -1;
    struct proto_args a;
    proto_args_init(&a, map);
    for (size_t i = 0; i < n; i++) {
        int r = read_field(&a, &fields[i]);
        if (r == 0) proto_args_missing(&a, fields[i].key);
        if (r != 1) return snprintf(err, errlen, "%s: %s", what, a.err), -1;
    }
    return 0;
}

#define FIELDS(...) ((const struct field[]){__VA_ARGS__})
#define NFIELDS(...) (sizeof FIELDS(__VA_ARGS__) / sizeof(struct field))
#define READ_FIELDS(what, map, err, errlen, ...)                                                   \
    read_fields(what, map, FIELDS(__VA_ARGS__), NFIELDS(__VA_ARGS__), err, errlen)
#define STR(key, buf)                                                                              \
    {                                                                                              \
        key, FIELD_STR, (buf), sizeof(buf), NULL                                                   \
    }
#define I64(key, ptr)                                                                              \
    {                                                                                              \
        key, FIELD_I64, (ptr), 0, NULL                                                             \
    }
#define U64(key, ptr)                                                                              \
    {                                                                                              \
        key, FIELD_U64, (ptr), 0, NULL                                                             \
    }
#define BOOL(key, ptr)                                                                             \
    {                                                                                              \
        key, FIELD_BOOL, (ptr), 0, NULL                                                            \
    }
#define BIN(key, ptr, max, lenp)                                                                   \
    {                                                                                              \
        key, FIELD_BIN, (ptr), (max), (lenp)                                                       \
    }

int agent_wire_read_hello(const msgpack_object *map, struct agent_hello *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("hello", map, err, errlen, STR("version", out->version),
                       STR("run", out->run_id), STR("machine", out->machine),
                       I64("clock_ns", &out->clock_ns));
}

int agent_wire_read_hello_reply(const msgpack_object *map, struct agent_hello_reply *out, char *err,
                                size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("hello reply", map, err, errlen, STR("version", out->version),
                       STR("hostname", out->hostname), STR("features", out->features),
                       STR("underlay_address", out->underlay_address),
                       STR("underlay_device", out->underlay_device),
                       I64("underlay_mtu", &out->underlay_mtu), I64("uid", &out->uid),
                       BOOL("cap_net_admin", &out->cap_net_admin), I64("clock_ns", &out->clock_ns));
}

int agent_wire_read_ping(const msgpack_object *map, struct agent_ping *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("ping", map, err, errlen, I64("t0_ns", &out->t0_ns));
}

int agent_wire_read_pong(const msgpack_object *map, struct agent_pong *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("ping reply", map, err, errlen, I64("t1_ns", &out->t1_ns),
                       I64("t2_ns", &out->t2_ns));
}

int agent_wire_read_build(const msgpack_object *map, struct agent_build *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("build", map, err, errlen,
                    BIN("part", &out->part, AGENT_PART_MAX, &out->part_len)) < 0)
        return -1;
    struct proto_args a;
    proto_args_init(&a, map);
    if (proto_arg_bool(&a, "stats", &out->stats) < 0 || /* optional: absent is false */
        proto_arg_u64(&a, "stall_threshold_ns", &out->stall_threshold_ns) < 0) /* absent: 0 */
        return snprintf(err, errlen, "build: %s", a.err), -1;
    return 0;
}

int agent_wire_read_build_reply(const msgpack_object *map, struct agent_build_reply *out, char *err,
                                size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("build reply", map, err, errlen, STR("registry", out->registry),
                       U64("nodes", &out->nodes));
}

int agent_wire_read_build_error(const msgpack_object *map, struct agent_build_error *out, char *err,
                                size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("build error", map, err, errlen, I64("code", &out->code),
                       STR("node", out->node), STR("link", out->link),
                       STR("message", out->message));
}

int agent_wire_read_call(const msgpack_object *map, struct agent_call *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("call", map, err, errlen, U64("node", &out->node),
                       BIN("data", &out->data, AGENT_CALL_DATA_MAX, &out->len));
}

int agent_wire_read_exit(const msgpack_object *map, struct agent_exit *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("exit", map, err, errlen, U64("node", &out->node),
                       I64("status", &out->status));
}

/* ---- the underlay's round trip ---- */

void agent_wire_underlay(struct msgmap *m, const struct agent_underlay *u)
{
    msgmap_str(m, "address", u->address);
}

void agent_wire_underlay_reply(struct msgmap *m, const struct agent_underlay_reply *r)
{
    msgmap_i64(m, "rtt_ns", r->rtt_ns);
}

int agent_wire_read_underlay(const msgpack_object *map, struct agent_underlay *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS("underlay", map, err, errlen, STR("address", out->address));
}

int agent_wire_read_underlay_reply(const msgpack_object *map, struct agent_underlay_reply *out,
                                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("underlay reply", map, err, errlen, I64("rtt_ns", &out->rtt_ns)) < 0) return -1;
    if (out->rtt_ns <= 0)
        return snprintf(err, errlen, "underlay reply: field 'rtt_ns': %lld, expected > 0",
                        (long long)out->rtt_ns),
               -1;
    return 0;
}

/* ---- run-time changes ---- */

static const char *const link_ops[] = {
    [AGENT_LINK_SET] = "set", [AGENT_LINK_UP] = "up", [AGENT_LINK_DOWN] = "down"};

const char *agent_link_op_name(enum agent_link_op op)
{
    return (unsigned)op <= AGENT_LINK_DOWN ? link_ops[op] : "";
}

void agent_wire_link(struct msgmap *m, uint64_t link, enum agent_link_op op, const void *params,
                     size_t params_len)
{
    msgmap_u64(m, "link", link);
    msgmap_str(m, "op", agent_link_op_name(op));
    if (!params) return;
    msgmap_key(m, "params");
    msgmap_raw(m, params, params_len);
}

void agent_wire_node(struct msgmap *m, const struct agent_node *n)
{
    msgmap_u64(m, "node", n->node);
}

void agent_wire_sides(struct msgmap *m, const struct agent_sides *s)
{
    if (!s->side) return;
    msgmap_key(m, "sides");
    msgpack_pack_array(&m->pk, (uint32_t)s->n);
    for (size_t i = 0; i < s->n; i++)
        msgpack_pack_uint8(&m->pk, s->side[i]);
}

void agent_wire_heal_reply(struct msgmap *m, uint64_t healed)
{
    msgmap_u64(m, "healed", healed);
}

int agent_wire_read_node(const char *what, const msgpack_object *map, struct agent_node *out,
                         char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    return READ_FIELDS(what, map, err, errlen, U64("node", &out->node));
}

static int link_op_find(const char *word, enum agent_link_op *op)
{
    for (int i = AGENT_LINK_SET; i <= AGENT_LINK_DOWN; i++)
        if (!strcmp(word, link_ops[i])) return *op = (enum agent_link_op)i, 0;
    return -1;
}

int agent_wire_read_link(const msgpack_object *map, struct agent_link *out, char *err,
                         size_t errlen)
{
    char op[8];
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("link", map, err, errlen, U64("link", &out->link), STR("op", op)) < 0)
        return -1;
    if (link_op_find(op, &out->op) < 0)
        return snprintf(err, errlen, "link: field 'op': '%s' is none of set, up, down", op), -1;
    struct proto_args a;
    proto_args_init(&a, map);
    const msgpack_object *params = proto_args_get(&a, "params");
    if (out->op != AGENT_LINK_SET && params)
        return snprintf(err, errlen, "link: field 'params': op '%s' takes none", op), -1;
    if (out->op == AGENT_LINK_SET && !params)
        return snprintf(err, errlen, "link: field 'params' is missing (op 'set')"), -1;
    if (params && params->type != MSGPACK_OBJECT_MAP)
        return snprintf(err, errlen, "link: field 'params': expected map, got %s",
                        proto_type_name(params->type)),
               -1;
    out->params = params;
    return 0;
}

/* sides: 1 .. AGENT_SIDES_MAX entries of 0, 1 or 2. */
static int read_side_array(const char *what, const msgpack_object *o, struct agent_sides *out,
                           char *err, size_t errlen)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return snprintf(err, errlen, "%s: field 'sides': expected array, got %s", what,
                        proto_type_name(o->type)),
               -1;
    uint32_t n = o->via.array.size;
    if (n == 0 || n > AGENT_SIDES_MAX)
        return snprintf(err, errlen, "%s: field 'sides': %u entries, expected 1 to %d", what, n,
                        AGENT_SIDES_MAX),
               -1;
    if (!(out->side = malloc(n))) return snprintf(err, errlen, "%s: out of memory", what), -1;
    out->n = n;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *v = &o->via.array.ptr[i];
        if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 > 2) {
            agent_sides_free(out);
            return snprintf(err, errlen, "%s: field 'sides': node %u: expected 0, 1 or 2", what, i),
                   -1;
        }
        out->side[i] = (unsigned char)v->via.u64;
    }
    return 0;
}

int agent_wire_read_sides(const char *what, const msgpack_object *map, bool required,
                          struct agent_sides *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return snprintf(err, errlen, "%s: not a map", what), -1;
    struct proto_args a;
    proto_args_init(&a, map);
    const msgpack_object *o = proto_args_get(&a, "sides");
    if (!o && required) return snprintf(err, errlen, "%s: field 'sides' is missing", what), -1;
    return o ? read_side_array(what, o, out, err, errlen) : 0;
}

void agent_sides_free(struct agent_sides *s)
{
    free(s->side);
    s->side = NULL;
    s->n = 0;
}

void agent_wire_counters(struct msgmap *m, uint64_t link)
{
    msgmap_u64(m, "link", link);
}

int agent_wire_read_counters(const msgpack_object *map, uint64_t *link, char *err, size_t errlen)
{
    *link = 0;
    return READ_FIELDS("counters", map, err, errlen, U64("link", link));
}

void agent_wire_trace(struct msgmap *m, const struct agent_trace *t, const void *trace,
                      size_t trace_len)
{
    msgmap_u64(m, "link", t->link);
    msgmap_u64(m, "dir", t->dir);
    msgmap_u64(m, "interp", t->interp);
    msgmap_bool(m, "loop", t->loop);
    msgmap_u64(m, "step_ns", t->step_ns);
    msgmap_key(m, "trace");
    msgmap_raw(m, trace, trace_len);
}

int agent_wire_read_trace(const msgpack_object *map, struct agent_trace *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("trace", map, err, errlen, U64("link", &out->link), U64("dir", &out->dir),
                    U64("interp", &out->interp), BOOL("loop", &out->loop),
                    U64("step_ns", &out->step_ns)) < 0)
        return -1;
    if (out->dir > 2)
        return snprintf(err, errlen, "trace: field 'dir': %llu is not 0, 1 or 2",
                        (unsigned long long)out->dir),
               -1;
    if (out->interp > 1)
        return snprintf(err, errlen, "trace: field 'interp': %llu is not 0 or 1",
                        (unsigned long long)out->interp),
               -1;
    if (!out->step_ns) return snprintf(err, errlen, "trace: field 'step_ns': 0 is not > 0"), -1;
    struct proto_args a;
    proto_args_init(&a, map);
    out->trace = proto_args_get(&a, "trace");
    if (!out->trace || out->trace->type != MSGPACK_OBJECT_MAP)
        return snprintf(err, errlen, "trace: field 'trace': expected map, got %s",
                        out->trace ? proto_type_name(out->trace->type) : "nothing"),
               -1;
    return 0;
}

void agent_wire_run(struct msgmap *m, const struct agent_run *r)
{
    msgmap_u64(m, "node", r->node);
    msgmap_u64(m, "id", r->id);
    msgmap_key(m, "argv");
    msgpack_pack_array(&m->pk, (uint32_t)r->argc);
    for (size_t i = 0; i < r->argc; i++)
        proto_pack_str(&m->pk, r->argv[i]);
}

void agent_wire_signal(struct msgmap *m, const struct agent_signal *s)
{
    msgmap_u64(m, "id", s->id);
    msgmap_i64(m, "sig", s->sig);
}

void agent_wire_program(struct msgmap *m, const struct agent_program *p)
{
    msgmap_u64(m, "id", p->id);
    msgmap_i64(m, "status", p->status);
    msgmap_bin(m, "out", p->out, p->out_len);
    msgmap_bin(m, "err", p->err, p->err_len);
}

void agent_run_free(struct agent_run *r)
{
    for (size_t i = 0; r->argv && i < r->argc; i++)
        free(r->argv[i]);
    free(r->argv);
    r->argv = NULL;
    r->argc = 0;
}

/* argv's strings copied, NUL-terminated, with a NULL after the last. */
static int read_argv(const msgpack_object *a, struct agent_run *out, char *err, size_t errlen)
{
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size ||
        a->via.array.size > AGENT_ARGV_MAX)
        return snprintf(err, errlen, "run: field 'argv': expected 1 to %d strings", AGENT_ARGV_MAX),
               -1;
    out->argv = calloc(a->via.array.size + 1, sizeof *out->argv);
    if (!out->argv) return snprintf(err, errlen, "run: out of memory"), -1;
    for (uint32_t i = 0; i < a->via.array.size; i++, out->argc++) {
        const msgpack_object *s = &a->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR || memchr(s->via.str.ptr, 0, s->via.str.size))
            return snprintf(err, errlen, "run: field 'argv': argument %u is not a string", i), -1;
        if (!(out->argv[i] = strndup(s->via.str.ptr, s->via.str.size)))
            return snprintf(err, errlen, "run: out of memory"), -1;
    }
    return 0;
}

int agent_wire_read_run(const msgpack_object *map, struct agent_run *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("run", map, err, errlen, U64("node", &out->node), U64("id", &out->id)) < 0)
        return -1;
    struct proto_args a;
    proto_args_init(&a, map);
    if (read_argv(proto_args_get(&a, "argv"), out, err, errlen) < 0) {
        agent_run_free(out);
        return -1;
    }
    return 0;
}

int agent_wire_read_signal(const msgpack_object *map, struct agent_signal *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("signal", map, err, errlen, U64("id", &out->id), I64("sig", &out->sig)) < 0)
        return -1;
    if (out->sig < 0 || out->sig > 64)
        return snprintf(err, errlen, "signal: field 'sig': %lld is not 0 to 64",
                        (long long)out->sig),
               -1;
    return 0;
}

int agent_wire_read_program(const msgpack_object *map, struct agent_program *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof *out);
    const void *o = NULL, *e = NULL;
    if (READ_FIELDS("program", map, err, errlen, U64("id", &out->id), I64("status", &out->status)) <
        0)
        return -1;
    struct proto_args a; /* out and err may be empty, which BIN refuses */
    proto_args_init(&a, map);
    if (proto_arg_bin(&a, "out", &o, &out->out_len) != 1 ||
        proto_arg_bin(&a, "err", &e, &out->err_len) != 1)
        return snprintf(err, errlen, "program: fields 'out' and 'err' must be bin"), -1;
    out->out = o;
    out->err = e;
    if (out->status < 0 || out->status > 255)
        return snprintf(err, errlen, "program: field 'status': %lld is not 0 to 255",
                        (long long)out->status),
               -1;
    return 0;
}

int agent_wire_read_heal_reply(const msgpack_object *map, uint64_t *healed, char *err,
                               size_t errlen)
{
    *healed = 0;
    return READ_FIELDS("heal reply", map, err, errlen, U64("healed", healed));
}

/* ---- stats ---- */

static void pack_stats_row(msgpack_packer *pk, const struct agent_stats_row *r)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "link", r->link);
    msgmap_str(&m, "dir", r->dir);
    msgmap_bool(&m, "up", r->up);
#define PACK_COUNTER_(name) msgmap_i64(&m, #name, r->name);
    AGENT_STATS_COUNTERS(PACK_COUNTER_)
#undef PACK_COUNTER_
    msgmap_end(&m, pk);
}

static void pack_tcp_row(msgpack_packer *pk, const struct agent_tcp_row *r)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "node", r->node);
#define PACK_TCP_(name) msgmap_u64(&m, #name, r->name);
    AGENT_TCP_COUNTERS(PACK_TCP_)
#undef PACK_TCP_
    msgmap_end(&m, pk);
}

void agent_wire_stats(struct msgmap *m, const struct agent_stats *s)
{
    msgmap_i64(m, "t_ns", s->t_ns);
    msgmap_key(m, "rows");
    msgpack_pack_array(&m->pk, (uint32_t)s->n_rows);
    for (size_t i = 0; i < s->n_rows; i++)
        pack_stats_row(&m->pk, &s->rows[i]);
    if (s->n_tcp) { /* optional: a links-only sample */
        msgmap_key(m, "tcp");
        msgpack_pack_array(&m->pk, (uint32_t)s->n_tcp);
        for (size_t i = 0; i < s->n_tcp; i++)
            pack_tcp_row(&m->pk, &s->tcp[i]);
    }
    if (!s->n_stalls) return;
    msgmap_key(m, "stalls");
    msgpack_pack_array(&m->pk, (uint32_t)s->n_stalls);
    for (size_t i = 0; i < s->n_stalls; i++) {
        struct msgmap st;
        msgmap_init(&st);
        msgmap_i64(&st, "t_ns", s->stalls[i].t_ns);
        msgmap_i64(&st, "wall_ns", s->stalls[i].wall_ns);
        msgmap_end(&st, &m->pk);
    }
}

static int read_stats_row(const msgpack_object *o, size_t i, void *row, char *err, size_t errlen)
{
    struct agent_stats_row *r = row;
    char what[48];
    snprintf(what, sizeof what, "stats: row %zu", i);
#define READ_COUNTER_(name) , I64(#name, &r->name)
    if (READ_FIELDS(what, o, err, errlen, U64("link", &r->link), STR("dir", r->dir),
                    BOOL("up", &r->up) AGENT_STATS_COUNTERS(READ_COUNTER_)) < 0)
        return -1;
#undef READ_COUNTER_
    if (strcmp(r->dir, "ab") && strcmp(r->dir, "ba"))
        return snprintf(err, errlen, "%s: field 'dir': '%s' is neither ab nor ba", what, r->dir),
               -1;
#define CHECK_COUNTER_(name)                                                                       \
    if (r->name < -1)                                                                              \
        return snprintf(err, errlen, "%s: field '%s': %lld is below -1", what, #name,              \
                        (long long)r->name),                                                       \
               -1;
    AGENT_STATS_COUNTERS(CHECK_COUNTER_)
#undef CHECK_COUNTER_
    return 0;
}

static int read_tcp_row(const msgpack_object *o, size_t i, void *row, char *err, size_t errlen)
{
    struct agent_tcp_row *r = row;
    char what[48];
    snprintf(what, sizeof what, "stats: tcp row %zu", i);
#define READ_TCP_(name) , U64(#name, &r->name)
    return READ_FIELDS(what, o, err, errlen, U64("node", &r->node) AGENT_TCP_COUNTERS(READ_TCP_));
#undef READ_TCP_
}

static int read_stall(const msgpack_object *o, size_t i, void *row, char *err, size_t errlen)
{
    struct agent_stall *st = row;
    char what[48];
    snprintf(what, sizeof what, "stats: stall %zu", i);
    if (READ_FIELDS(what, o, err, errlen, I64("t_ns", &st->t_ns), I64("wall_ns", &st->wall_ns)) < 0)
        return -1;
    if (st->t_ns < 0 || st->wall_ns < 0)
        return snprintf(err, errlen, "%s: a time below 0 (t_ns %lld, wall_ns %lld)", what,
                        (long long)st->t_ns, (long long)st->wall_ns),
               -1;
    return 0;
}

/* The array at key of the stats map into *out (allocated, n elements of
 * size), each element read by read_row: 0, or -1 with err and nothing
 * kept. An absent key is an error when required, else no rows. */
static int read_row_array(const char *what, const msgpack_object *map, const char *key,
                          bool required, size_t size, size_t max,
                          int (*read_row)(const msgpack_object *, size_t, void *, char *, size_t),
                          void **out, size_t *n_out, char *err, size_t errlen)
{
    struct proto_args a;
    proto_args_init(&a, map);
    const msgpack_object *rows = proto_args_get(&a, key);
    if (!rows && !required) return 0;
    if (!rows || rows->type != MSGPACK_OBJECT_ARRAY)
        return snprintf(err, errlen, "%s: field '%s': expected array, got %s", what, key,
                        rows ? proto_type_name(rows->type) : "nothing"),
               -1;
    uint32_t n = rows->via.array.size;
    if (n > max)
        return snprintf(err, errlen, "%s: field '%s': %u rows, at most %zu", what, key, n, max), -1;
    char *v = n ? calloc(n, size) : NULL;
    if (n && !v) return snprintf(err, errlen, "%s: out of memory", what), -1;
    for (uint32_t i = 0; i < n; i++)
        if (read_row(&rows->via.array.ptr[i], i, v + i * size, err, errlen) < 0) return free(v), -1;
    *out = v;
    *n_out = n;
    return 0;
}

int agent_wire_read_stats(const msgpack_object *map, struct agent_stats *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (READ_FIELDS("stats", map, err, errlen, I64("t_ns", &out->t_ns)) < 0) return -1;
    void *rows = NULL, *tcp = NULL;
    if (read_row_array("stats", map, "rows", true, sizeof *out->rows, AGENT_STATS_ROWS_MAX,
                       read_stats_row, &rows, &out->n_rows, err, errlen) < 0)
        return -1;
    out->rows = rows;
    if (read_row_array("stats", map, "tcp", false, sizeof *out->tcp, AGENT_STATS_ROWS_MAX,
                       read_tcp_row, &tcp, &out->n_tcp, err, errlen) < 0) {
        agent_stats_free(out);
        return -1;
    }
    out->tcp = tcp;
    void *stalls = NULL;
    if (read_row_array("stats", map, "stalls", false, sizeof *out->stalls, AGENT_STALLS_MAX,
                       read_stall, &stalls, &out->n_stalls, err, errlen) < 0) {
        agent_stats_free(out);
        return -1;
    }
    out->stalls = stalls;
    return 0;
}

void agent_stats_free(struct agent_stats *s)
{
    free(s->rows);
    free(s->tcp);
    free(s->stalls);
    s->rows = NULL;
    s->tcp = NULL;
    s->stalls = NULL;
    s->n_rows = s->n_tcp = s->n_stalls = 0;
}

/* ---- reroute ---- */

static void pack_route(msgpack_packer *pk, const struct agent_route *r)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "node", r->node);
    msgmap_u64(&m, "dst", r->dst);
    msgmap_u64(&m, "dst_len", r->dst_len);
    msgmap_u64(&m, "gateway", r->gateway);
    msgmap_u64(&m, "link", r->link);
    msgmap_i64(&m, "dst_node", r->dst_node);
    msgmap_i64(&m, "via", r->via);
    msgmap_end(&m, pk);
}

void agent_wire_reroute(struct msgmap *m, const struct agent_reroute *r)
{
    if (r->move) {
        struct msgmap mv;
        msgmap_init(&mv);
        msgmap_u64(&mv, "link", r->link);
        msgmap_u64(&mv, "stays", r->stays);
        msgmap_u64(&mv, "to", r->to);
        msgmap_key(m, "move");
        msgmap_end(&mv, &m->pk);
    }
    msgmap_key(m, "routes");
    msgpack_pack_array(&m->pk, (uint32_t)r->n_routes);
    for (size_t i = 0; i < r->n_routes; i++)
        pack_route(&m->pk, &r->routes[i]);
}

/* One route; its address fields must fit 32 bits, its prefix 0 .. 32. */
static int read_route(const msgpack_object *o, size_t i, void *row, char *err, size_t errlen)
{
    struct agent_route *r = row;
    uint64_t dst, gateway, len;
    char what[48];
    snprintf(what, sizeof what, "reroute: route %zu", i);
    if (READ_FIELDS(what, o, err, errlen, U64("node", &r->node), U64("dst", &dst),
                    U64("dst_len", &len), U64("gateway", &gateway), U64("link", &r->link),
                    I64("dst_node", &r->dst_node), I64("via", &r->via)) < 0)
        return -1;
    if (dst > UINT32_MAX || gateway > UINT32_MAX)
        return snprintf(err, errlen, "%s: field '%s': not an IPv4 address", what,
                        dst > UINT32_MAX ? "dst" : "gateway"),
               -1;
    if (len > 32)
        return snprintf(err, errlen, "%s: field 'dst_len': %llu, expected 0 to 32", what,
                        (unsigned long long)len),
               -1;
    if (r->dst_node < -1 || r->via < -2)
        return snprintf(err, errlen, "%s: field '%s': %lld is below %d", what,
                        r->dst_node < -1 ? "dst_node" : "via",
                        (long long)(r->dst_node < -1 ? r->dst_node : r->via),
                        r->dst_node < -1 ? -1 : -2),
               -1;
    r->dst = (uint32_t)dst, r->gateway = (uint32_t)gateway, r->dst_len = (uint8_t)len;
    return 0;
}

int agent_wire_read_reroute(const msgpack_object *map, struct agent_reroute *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return snprintf(err, errlen, "reroute: not a map"), -1;
    struct proto_args a;
    proto_args_init(&a, map);
    const msgpack_object *mv = proto_args_get(&a, "move");
    if (mv && READ_FIELDS("reroute: move", mv, err, errlen, U64("link", &out->link),
                          U64("stays", &out->stays), U64("to", &out->to)) < 0)
        return -1;
    out->move = mv != NULL;
    void *routes = NULL;
    if (read_row_array("reroute", map, "routes", true, sizeof *out->routes, AGENT_ROUTES_MAX,
                       read_route, &routes, &out->n_routes, err, errlen) < 0)
        return -1;
    out->routes = routes;
    return 0;
}

void agent_reroute_free(struct agent_reroute *r)
{
    free(r->routes);
    r->routes = NULL;
    r->n_routes = 0;
}
