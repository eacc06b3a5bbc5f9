/* fuzz_agent_wire.c — libFuzzer target for the agent's messages
 * (proto/agent_wire.c over proto/protocol.c's framing): the bytes an agent
 * reads from its stdin and the controller from the agent's stdout.
 *
 * Every message decoded is looked up in the method table and its params
 * (or result) handed to every decoder, the run-time changes' (link, kill,
 * partition, heal, stats, counters, trace, reroute) included. A decoder that accepts must give
 * NUL-terminated strings within their buffers, and its struct, encoded
 * again and decoded, must come back the same (no field lost or bent). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "topo/trace_wire.h"

#define FUZZ_MAX_MESSAGE 4096

static void fuzz_str(const char *s, size_t cap)
{
    if (strnlen(s, cap) >= cap) abort();
}

/* Encodes with enc, decodes with dec into a fresh struct, compares. */
#define ROUND_TRIP(type, value, enc, dec)                                                          \
    do {                                                                                           \
        struct msgmap m;                                                                           \
        msgmap_init(&m);                                                                           \
        enc(&m, &(value));                                                                         \
        msgpack_sbuffer sb;                                                                        \
        msgpack_sbuffer_init(&sb);                                                                 \
        msgpack_packer pk;                                                                         \
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);                                      \
        if (!msgmap_end(&m, &pk)) abort();                                                         \
        msgpack_unpacked u;                                                                        \
        msgpack_unpacked_init(&u);                                                                 \
        type again;                                                                                \
        char e2[256];                                                                              \
        if (msgpack_unpack_next(&u, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) abort();    \
        if (dec(&u.data, &again, e2, sizeof e2) != 0) abort();                                     \
        if (!same_##type(&(value), &again)) abort();                                               \
        msgpack_unpacked_destroy(&u);                                                              \
        msgpack_sbuffer_destroy(&sb);                                                              \
    } while (0)

typedef struct agent_hello hello_t;
typedef struct agent_hello_reply reply_t;
typedef struct agent_ping ping_t;
typedef struct agent_pong pong_t;
typedef struct agent_build build_t;
typedef struct agent_build_reply build_reply_t;
typedef struct agent_build_error build_error_t;
typedef struct agent_call call_t;
typedef struct agent_exit exit_t;

static bool same_hello_t(const hello_t *a, const hello_t *b)
{
    return !strcmp(a->version, b->version) && !strcmp(a->run_id, b->run_id) &&
           !strcmp(a->machine, b->machine) && a->clock_ns == b->clock_ns;
}

static bool same_reply_t(const reply_t *a, const reply_t *b)
{
    return !strcmp(a->version, b->version) && !strcmp(a->hostname, b->hostname) &&
           !strcmp(a->features, b->features) && !strcmp(a->underlay_address, b->underlay_address) &&
           !strcmp(a->underlay_device, b->underlay_device) && a->underlay_mtu == b->underlay_mtu &&
           a->uid == b->uid && a->cap_net_admin == b->cap_net_admin && a->clock_ns == b->clock_ns;
}

static bool same_ping_t(const ping_t *a, const ping_t *b)
{
    return a->t0_ns == b->t0_ns;
}

static bool same_pong_t(const pong_t *a, const pong_t *b)
{
    return a->t1_ns == b->t1_ns && a->t2_ns == b->t2_ns;
}

static bool same_build_t(const build_t *a, const build_t *b)
{
    return a->part_len == b->part_len && !memcmp(a->part, b->part, a->part_len) &&
           a->stats == b->stats;
}

/* Encoders and decoders of the run-time changes under one signature, so
 * ROUND_TRIP takes them. */
typedef struct agent_node node_t;
typedef struct agent_sides sides_t;
typedef struct agent_stats stats_t;

static bool same_node_t(const node_t *a, const node_t *b)
{
    return a->node == b->node;
}

static bool same_sides_t(const sides_t *a, const sides_t *b)
{
    bool same = a->n == b->n && !memcmp(a->side, b->side, a->n);
    agent_sides_free((sides_t *)b); /* the round trip's copy */
    return same;
}

static bool same_stats_t(const stats_t *a, const stats_t *b)
{
    bool same = a->t_ns == b->t_ns && a->n_rows == b->n_rows && a->n_tcp == b->n_tcp &&
                (!a->n_rows || !memcmp(a->rows, b->rows, a->n_rows * sizeof *a->rows)) &&
                (!a->n_tcp || !memcmp(a->tcp, b->tcp, a->n_tcp * sizeof *a->tcp));
    stats_t *again = (stats_t *)b;
    agent_stats_free(again); /* the round trip's copy */
    return same;
}

typedef uint64_t counters_t;

static bool same_counters_t(const counters_t *a, const counters_t *b)
{
    return *a == *b;
}

static void write_counters(struct msgmap *m, const counters_t *link)
{
    agent_wire_counters(m, *link);
}

/* run (argv NULL-terminated, no NUL inside), signal and program: what a
 * decoder accepts is in range. */
static void fuzz_programs(const msgpack_object *map)
{
    struct agent_run r;
    struct agent_signal s;
    struct agent_program p;
    char err[256];
    if (agent_wire_read_run(map, &r, err, sizeof err) == 0) {
        if (!r.argc || r.argv[r.argc]) abort();
        for (size_t i = 0; i < r.argc; i++)
            if (!r.argv[i]) abort();
        agent_run_free(&r);
    }
    if (agent_wire_read_signal(map, &s, err, sizeof err) == 0 && (s.sig < 1 || s.sig > 64)) abort();
    if (agent_wire_read_program(map, &p, err, sizeof err) == 0 && (p.status < 0 || p.status > 255))
        abort();
}

/* A trace request: its fields in range, its map through topo_trace_read
 * (whose arrays are freed), and back. */
static void fuzz_trace(const msgpack_object *map)
{
    struct agent_trace t, again;
    struct topo_trace trace;
    char err[256];
    if (agent_wire_read_trace(map, &t, err, sizeof err) < 0) return;
    if (t.dir > 2 || t.interp > 1 || !t.step_ns || t.trace->type != MSGPACK_OBJECT_MAP) abort();
    if (topo_trace_read(t.trace, &trace, err, sizeof err) == 0) {
        if (!trace.n_samples || trace.samples[0].t_s < 0) abort();
        topo_trace_free(&trace);
    }
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_trace(&m, &t, "\x80", 1); /* an empty map */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (!msgmap_end(&m, &pk)) abort();
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS ||
        agent_wire_read_trace(&u.data, &again, err, sizeof err) != 0 || again.link != t.link ||
        again.dir != t.dir || again.interp != t.interp || again.loop != t.loop ||
        again.step_ns != t.step_ns)
        abort();
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static int read_kill(const msgpack_object *map, node_t *out, char *err, size_t errlen)
{
    return agent_wire_read_node("kill", map, out, err, errlen);
}

static int read_partition(const msgpack_object *map, sides_t *out, char *err, size_t errlen)
{
    return agent_wire_read_sides("partition", map, true, out, err, errlen);
}

/* A link request: its params map, when set, must be a map; encoded again
 * with those params' bytes it decodes the same. */
static void fuzz_link(const msgpack_object *map)
{
    struct agent_link l, again;
    char err[256];
    if (agent_wire_read_link(map, &l, err, sizeof err) < 0) return;
    if ((l.op == AGENT_LINK_SET) != (l.params != NULL)) abort();
    if (l.params && l.params->type != MSGPACK_OBJECT_MAP) abort();
    msgpack_sbuffer ps, sb;
    msgpack_sbuffer_init(&ps);
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &ps, msgpack_sbuffer_write);
    if (l.params) msgpack_pack_object(&pk, *l.params);
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_link(&m, l.link, l.op, l.params ? ps.data : NULL, ps.size);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (!msgmap_end(&m, &pk)) abort();
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, sb.data, sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) abort();
    if (agent_wire_read_link(&u.data, &again, err, sizeof err) != 0) abort();
    if (again.link != l.link || again.op != l.op || !again.params != !l.params) abort();
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_destroy(&ps);
}

typedef struct agent_reroute reroute_t;

static bool same_reroute_t(const reroute_t *a, const reroute_t *b)
{
    bool same = a->move == b->move &&
                (!a->move || (a->link == b->link && a->stays == b->stays && a->to == b->to)) &&
                a->n_routes == b->n_routes;
    for (size_t i = 0; same && i < a->n_routes; i++) {
        const struct agent_route *x = &a->routes[i], *y = &b->routes[i];
        same = x->node == y->node && x->link == y->link && x->dst == y->dst &&
               x->gateway == y->gateway && x->dst_len == y->dst_len && x->dst_node == y->dst_node &&
               x->via == y->via;
    }
    agent_reroute_free((reroute_t *)b); /* the round trip's copy */
    return same;
}

static void fuzz_reroute(const msgpack_object *map)
{
    char err[256];
    reroute_t rr;
    if (agent_wire_read_reroute(map, &rr, err, sizeof err) != 0) return;
    for (size_t i = 0; i < rr.n_routes; i++)
        if (rr.routes[i].dst_len > 32 || rr.routes[i].dst_node < -1 || rr.routes[i].via < -2)
            abort();
    ROUND_TRIP(reroute_t, rr, agent_wire_reroute, agent_wire_read_reroute);
    agent_reroute_free(&rr);
}

static void fuzz_change_map(const msgpack_object *map)
{
    char err[256];
    node_t n;
    sides_t s;
    stats_t st;
    uint64_t healed;
    fuzz_link(map);
    if (read_kill(map, &n, err, sizeof err) == 0) ROUND_TRIP(node_t, n, agent_wire_node, read_kill);
    if (read_partition(map, &s, err, sizeof err) == 0) {
        for (size_t i = 0; i < s.n; i++)
            if (s.side[i] > 2) abort();
        ROUND_TRIP(sides_t, s, agent_wire_sides, read_partition);
        agent_sides_free(&s);
    }
    if (agent_wire_read_sides("heal", map, false, &s, err, sizeof err) == 0) agent_sides_free(&s);
    if (agent_wire_read_stats(map, &st, err, sizeof err) == 0) {
        for (size_t i = 0; i < st.n_rows; i++)
            if (strcmp(st.rows[i].dir, "ab") && strcmp(st.rows[i].dir, "ba")) abort();
        ROUND_TRIP(stats_t, st, agent_wire_stats, agent_wire_read_stats);
        agent_stats_free(&st);
    }
    counters_t link;
    if (agent_wire_read_counters(map, &link, err, sizeof err) == 0)
        ROUND_TRIP(counters_t, link, write_counters, agent_wire_read_counters);
    fuzz_trace(map);
    fuzz_programs(map);
    fuzz_reroute(map);
    agent_wire_read_heal_reply(map, &healed, err, sizeof err);
    if (strnlen(err, sizeof err) >= sizeof err) abort();
}

static bool same_build_reply_t(const build_reply_t *a, const build_reply_t *b)
{
    return !strcmp(a->registry, b->registry) && a->nodes == b->nodes;
}

static bool same_build_error_t(const build_error_t *a, const build_error_t *b)
{
    return a->code == b->code && !strcmp(a->node, b->node) && !strcmp(a->link, b->link) &&
           !strcmp(a->message, b->message);
}

static bool same_call_t(const call_t *a, const call_t *b)
{
    return a->node == b->node && a->len == b->len && !memcmp(a->data, b->data, a->len);
}

static bool same_exit_t(const exit_t *a, const exit_t *b)
{
    return a->node == b->node && a->status == b->status;
}

/* The decoders of the part build and the relay; bytes they point to must
 * lie within the bounds they promise. */
static void fuzz_build_map(const msgpack_object *map)
{
    char err[256];
    build_t b;
    build_reply_t br;
    build_error_t be;
    call_t c;
    exit_t x;
    if (agent_wire_read_build(map, &b, err, sizeof err) == 0) {
        if (b.part_len == 0 || b.part_len > AGENT_PART_MAX) abort();
        ROUND_TRIP(build_t, b, agent_wire_build, agent_wire_read_build);
    }
    if (agent_wire_read_build_reply(map, &br, err, sizeof err) == 0) {
        fuzz_str(br.registry, sizeof br.registry);
        ROUND_TRIP(build_reply_t, br, agent_wire_build_reply, agent_wire_read_build_reply);
    }
    if (agent_wire_read_build_error(map, &be, err, sizeof err) == 0) {
        fuzz_str(be.message, sizeof be.message);
        ROUND_TRIP(build_error_t, be, agent_wire_build_error, agent_wire_read_build_error);
    }
    if (agent_wire_read_call(map, &c, err, sizeof err) == 0) {
        if (c.len == 0 || c.len > AGENT_CALL_DATA_MAX) abort();
        ROUND_TRIP(call_t, c, agent_wire_call, agent_wire_read_call);
    }
    if (agent_wire_read_exit(map, &x, err, sizeof err) == 0)
        ROUND_TRIP(exit_t, x, agent_wire_exit, agent_wire_read_exit);
    if (strnlen(err, sizeof err) >= sizeof err) abort();
    char text[128];
    proto_error_text(map, text, sizeof text);
    if (strnlen(text, sizeof text) >= sizeof text) abort();
}

static void fuzz_map(const msgpack_object *map)
{
    fuzz_build_map(map);
    fuzz_change_map(map);
    char err[256];
    hello_t h;
    reply_t r;
    ping_t p;
    pong_t q;
    if (agent_wire_read_hello(map, &h, err, sizeof err) == 0) {
        fuzz_str(h.version, sizeof h.version);
        fuzz_str(h.machine, sizeof h.machine);
        ROUND_TRIP(hello_t, h, agent_wire_hello, agent_wire_read_hello);
    }
    if (agent_wire_read_hello_reply(map, &r, err, sizeof err) == 0) {
        fuzz_str(r.features, sizeof r.features);
        ROUND_TRIP(reply_t, r, agent_wire_hello_reply, agent_wire_read_hello_reply);
    }
    if (agent_wire_read_ping(map, &p, err, sizeof err) == 0)
        ROUND_TRIP(ping_t, p, agent_wire_ping, agent_wire_read_ping);
    if (agent_wire_read_pong(map, &q, err, sizeof err) == 0)
        ROUND_TRIP(pong_t, q, agent_wire_pong, agent_wire_read_pong);
    if (strnlen(err, sizeof err) >= sizeof err) abort();
}

static void fuzz_message(const struct proto_msg *m)
{
    enum agent_method method = agent_method_find(m->method, m->method_len);
    const char *name = agent_method_name(method);
    if (method != AGENT_UNKNOWN && strlen(name) != m->method_len) abort();
    fuzz_map(m->params);
    fuzz_map(m->result);
    fuzz_map(m->error); /* a structured error is a map too */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proto_reader r;
    if (proto_reader_init(&r, FUZZ_MAX_MESSAGE) != 0) abort();
    size_t avail;
    char *buf = proto_reader_buffer(&r, size ? size : 1, &avail);
    if (!buf) abort();
    if (size) memcpy(buf, data, size);
    proto_reader_consumed(&r, size);
    for (;;) {
        struct proto_msg m;
        bool has_msgid;
        char err[128];
        enum proto_next next = proto_reader_next(&r, &m, &has_msgid, err, sizeof err);
        if (next == PROTO_NEXT_MORE || next == PROTO_NEXT_FATAL) break;
        if (next == PROTO_NEXT_MESSAGE) fuzz_message(&m);
    }
    proto_reader_destroy(&r);
    return 0;
}
