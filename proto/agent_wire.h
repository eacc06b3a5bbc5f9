/* agent_wire.h — the messages between the controller and a `hiernet agent`
 * (issue 20; docs/design-notes.md, "Several machines, the design").
 *
 * The agent speaks MessagePack-RPC on its stdin and stdout, framed and
 * enveloped by proto/protocol.h exactly as a peer's control channel is;
 * this module names the messages (all of them, in one table) and encodes
 * and decodes their params and results: hello, ping, teardown, build,
 * call, exit, link, kill, restart, partition, heal, stats, underlay,
 * counters, trace, run, signal, program and reroute. Decoders
 * check every field and say which is wrong; they copy what they keep, so
 * a decoded struct outlives the message, except the bytes of build's part
 * and call's data and link's params map, which point into the message
 * (valid until the reader's next message); partition's sides and stats'
 * rows and reroute's routes are allocated (agent_sides_free,
 * agent_stats_free, agent_reroute_free). Encoders write
 * a params or result map into a caller's msgmap. */
#pragma once

#include "proto/msgmap.h"
#include "proto/names.h"
#include "proto/protocol.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum agent_method {
    AGENT_UNKNOWN = 0,
    AGENT_HELLO,     /* request: versions, machine, clocks */
    AGENT_PING,      /* request: the controller's send time */
    AGENT_TEARDOWN,  /* request: release everything, then exit */
    AGENT_BUILD,     /* request: build this machine's part (once) */
    AGENT_CALL,      /* notification, both ways: bytes of a peer's control stream */
    AGENT_LINK,      /* request: set, up or down a link of the part */
    AGENT_KILL,      /* request: SIGKILL a node's peer */
    AGENT_RESTART,   /* request: a fresh peer in the node */
    AGENT_PARTITION, /* request: a partition, sides per whole-network node */
    AGENT_HEAL,      /* request: heal partitions */
    AGENT_STATS,     /* notification, agent to controller: links.csv rows of the part */
    AGENT_EXIT,      /* notification, agent to controller: a peer of the part exited */
    AGENT_UNDERLAY,  /* request: the round trip to another machine's underlay address */
    AGENT_COUNTERS,  /* request: a link's counters (l:stats) in the part */
    AGENT_TRACE,     /* request: play a link trace on the part's end of a link */
    AGENT_RUN,       /* request: start a program in a host of the part */
    AGENT_SIGNAL,    /* request: signal a program the agent started */
    AGENT_PROGRAM,   /* notification, agent to controller: a program ended */
    AGENT_REROUTE,   /* request: a move's changes: the link (if held here), hosts' routes */
    AGENT_METHOD_COUNT
};

/* The wire name of a method ("hello"), "" for AGENT_UNKNOWN. */
const char *agent_method_name(enum agent_method m);
/* The method named by len bytes (not NUL-terminated), or AGENT_UNKNOWN. */
enum agent_method agent_method_find(const char *name, uint32_t len);
/* Whether the agent of this version serves the method. */
bool agent_method_served(enum agent_method m);

#define AGENT_VERSION_MAX 96
#define AGENT_NAME_MAX 64 /* a machine's name (TOPO_MACHINE_NAME_MAX) */
#define AGENT_RUN_ID_MAX 64
#define AGENT_ADDR_MAX 64 /* an IPv4 or IPv6 address as text */
#define AGENT_DEV_MAX 16  /* IFNAMSIZ */
#define AGENT_FEATURES_MAX 256

struct agent_hello {
    char version[AGENT_VERSION_MAX]; /* the controller's; the agent refuses another */
    char run_id[AGENT_RUN_ID_MAX];
    char machine[AGENT_NAME_MAX];
    int64_t clock_ns; /* the controller's CLOCK_MONOTONIC when sent */
};

struct agent_hello_reply {
    char version[AGENT_VERSION_MAX];
    char hostname[AGENT_NAME_MAX];
    /* Names of the kernel features the emu probe found, space-separated
     * ("veth bridge htb tbf"); "" when the probe could not run. */
    char features[AGENT_FEATURES_MAX];
    char underlay_address[AGENT_ADDR_MAX]; /* "" when unknown */
    char underlay_device[AGENT_DEV_MAX];
    int64_t underlay_mtu; /* 0 when unknown */
    int64_t uid;          /* the agent's effective uid */
    bool cap_net_admin;   /* in its effective set */
    int64_t clock_ns;     /* the agent's CLOCK_MONOTONIC when answering */
};

struct agent_ping {
    int64_t t0_ns; /* the controller's clock when sent */
};

struct agent_pong {
    int64_t t1_ns; /* the agent's clock when the ping was read */
    int64_t t2_ns; /* the agent's clock when the answer was written */
};

/* Encoders: the entries of the params (or result) map into m. */
void agent_wire_hello(struct msgmap *m, const struct agent_hello *h);
void agent_wire_hello_reply(struct msgmap *m, const struct agent_hello_reply *r);
void agent_wire_ping(struct msgmap *m, const struct agent_ping *p);
void agent_wire_pong(struct msgmap *m, const struct agent_pong *p);

/* Decoders of a params or result map: 0, or -1 with err naming the field
 * ("hello: field 'version': expected string, got integer"). Every field
 * is required; strings too long for their buffer are refused. */
int agent_wire_read_hello(const msgpack_object *map, struct agent_hello *out, char *err,
                          size_t errlen);
int agent_wire_read_hello_reply(const msgpack_object *map, struct agent_hello_reply *out, char *err,
                                size_t errlen);
int agent_wire_read_ping(const msgpack_object *map, struct agent_ping *out, char *err,
                         size_t errlen);
int agent_wire_read_pong(const msgpack_object *map, struct agent_pong *out, char *err,
                         size_t errlen);

/* ---- the part build and the relay ---- */

#define AGENT_REGISTRY_ID_MAX (HN_RUN_ID_MAX + 1) /* controller/registry.h REGISTRY_ID_MAX */
#define AGENT_NODE_MAX HN_NODE_NAME_SIZE
#define AGENT_LINK_MAX (2 * HN_NODE_NAME_SIZE) /* "a-b": a link named by its ends */
#define AGENT_ERROR_MAX 1024                   /* controller/net_error.h's message */
#define AGENT_CALL_DATA_MAX 65536              /* bytes of one call chunk */
/* The bytes of a part (topo/part_wire.h TOPO_PART_WIRE_MAX): a build
 * request may be this much larger than PROTO_MAX_MESSAGE, so the agent
 * reads its channel with AGENT_MESSAGE_MAX. */
#define AGENT_PART_MAX (64u << 20)
#define AGENT_MESSAGE_MAX (AGENT_PART_MAX + 4096u)

/* build's params: the part's topo/part_wire.h bytes (into the message),
 * and whether the agent sends `stats` (optional on the wire, false when
 * absent): links.csv's rows of the part at netrun_sample_links' period,
 * one emulated second. */
struct agent_build {
    const uint8_t *part;
    uint32_t part_len; /* >= 1 */
    bool stats;
    /* The whole network's linkd stall threshold (controller/linkd_stalls.h),
     * ns: flows of hosts on every machine cross a part's links. 0 (absent
     * on the wire): the part's own hosts'. */
    uint64_t stall_threshold_ns;
};

/* build's result. */
struct agent_build_reply {
    char registry[AGENT_REGISTRY_ID_MAX]; /* the part's registry id */
    uint64_t nodes;                       /* the part's own nodes */
};

/* The failure of build, link, kill, restart, partition and heal: the
 * response's error is this map, not a string (net_error's fields; node
 * and link "" when none). */
struct agent_build_error {
    int64_t code; /* enum net_error_code */
    char node[AGENT_NODE_MAX];
    char link[AGENT_LINK_MAX];
    char message[AGENT_ERROR_MAX]; /* one line naming node/link and value */
};

/* call: a chunk of one node's peer control byte stream, in order; node is
 * its index in the whole network (topo/part.h keeps them). */
struct agent_call {
    uint64_t node;
    const uint8_t *data; /* into the message */
    uint32_t len;        /* 1 .. AGENT_CALL_DATA_MAX */
};

/* exit: a peer of the part exited. */
struct agent_exit {
    uint64_t node;  /* whole-network index */
    int64_t status; /* its wait status */
};

void agent_wire_build(struct msgmap *m, const struct agent_build *b);
void agent_wire_build_reply(struct msgmap *m, const struct agent_build_reply *r);
/* The error map; send it with msgmap_error_response. */
void agent_wire_build_error(struct msgmap *m, const struct agent_build_error *e);
void agent_wire_call(struct msgmap *m, const struct agent_call *c);
void agent_wire_exit(struct msgmap *m, const struct agent_exit *e);

int agent_wire_read_build(const msgpack_object *map, struct agent_build *out, char *err,
                          size_t errlen);
int agent_wire_read_build_reply(const msgpack_object *map, struct agent_build_reply *out, char *err,
                                size_t errlen);
/* Of the response's error object (a map; a string is refused here). */
int agent_wire_read_build_error(const msgpack_object *map, struct agent_build_error *out, char *err,
                                size_t errlen);
int agent_wire_read_call(const msgpack_object *map, struct agent_call *out, char *err,
                         size_t errlen);
int agent_wire_read_exit(const msgpack_object *map, struct agent_exit *out, char *err,
                         size_t errlen);

/* ---- the underlay's round trip (issue 20 item 3) ---- */

/* underlay's params: another machine's underlay address (IPv4 text). */
struct agent_underlay {
    char address[AGENT_ADDR_MAX];
};

/* underlay's result: the smallest ICMP echo round trip to it (emu/
 * underlay_rtt.h), in ns (> 0). A failure is a plain error string. */
struct agent_underlay_reply {
    int64_t rtt_ns;
};

void agent_wire_underlay(struct msgmap *m, const struct agent_underlay *u);
void agent_wire_underlay_reply(struct msgmap *m, const struct agent_underlay_reply *r);
int agent_wire_read_underlay(const msgpack_object *map, struct agent_underlay *out, char *err,
                             size_t errlen);
int agent_wire_read_underlay_reply(const msgpack_object *map, struct agent_underlay_reply *out,
                                   char *err, size_t errlen);

/* ---- run-time changes (answered with an empty map, "done", or the
 * agent_build_error map) ---- */

/* More nodes than a part holds: the whole network's (partition's sides). */
#define AGENT_SIDES_MAX 1000000
#define AGENT_STATS_ROWS_MAX 2000000 /* two directions of a part's links */

enum agent_link_op { AGENT_LINK_SET, AGENT_LINK_UP, AGENT_LINK_DOWN };
/* The op's wire word ("set", "up", "down"). */
const char *agent_link_op_name(enum agent_link_op op);

/* link: {link = whole-network index, op = "set"|"up"|"down", params = the
 * link's parameters (set only; absent for up and down)}. The params map
 * is topo/part_wire.h's (topo_part_params_pack / _read), the one a part's
 * links carry: netrun_link_set's struct topo_link_params, emulated
 * (undilated) values. */
struct agent_link {
    uint64_t link;
    enum agent_link_op op;
    const msgpack_object *params; /* set: a map, into the message; else NULL */
};

/* kill and restart: {node = whole-network index}. */
struct agent_node {
    uint64_t node;
};

/* partition: {sides = [side of whole-network node 0, 1, ...]}, each 0
 * (neither group), 1 or 2 (netrun_partition's side). heal: {} heals
 * every partition, or {sides = ...} only those that cut its two groups
 * (netrun_heal); heal's result is {healed = how many went}. */
struct agent_sides {
    unsigned char *side; /* NULL for heal's {} */
    size_t n;
};

/* link's params: the bytes of one packed map (topo_part_params_pack), or
 * NULL (len 0) for up and down. */
void agent_wire_link(struct msgmap *m, uint64_t link, enum agent_link_op op, const void *params,
                     size_t params_len);
void agent_wire_node(struct msgmap *m, const struct agent_node *n);
/* s->side NULL: nothing (heal's {}). */
void agent_wire_sides(struct msgmap *m, const struct agent_sides *s);
void agent_wire_heal_reply(struct msgmap *m, uint64_t healed);

/* counters: {link = whole-network index}; the result is the part's
 * netrun_link_stats map (hiernet-linkd's {id, up, ab = {...}, ba = {...}}),
 * its id the whole network's link, or the agent_build_error map. */
void agent_wire_counters(struct msgmap *m, uint64_t link);
int agent_wire_read_counters(const msgpack_object *map, uint64_t *link, char *err, size_t errlen);

/* trace: {link = whole-network index, dir = 0 (a to b), 1 or 2 (both),
 * interp = 0 (step) or 1 (linear), loop = bool, step_ns = linear's step
 * (> 0), trace = the trace's map (topo/trace_wire.h; into the message)}:
 * the agent plays it on its end as netrun_link_trace does, from when it
 * reads the request. Answered done, or the error map. */
struct agent_trace {
    uint64_t link;
    uint64_t dir;    /* 0, 1, 2 */
    uint64_t interp; /* enum topo_trace_interp */
    bool loop;
    uint64_t step_ns;
    const msgpack_object *trace; /* a map, into the message */
};
/* trace's params; the trace map's bytes given packed (topo_trace_pack). */
void agent_wire_trace(struct msgmap *m, const struct agent_trace *t, const void *trace,
                      size_t trace_len);
int agent_wire_read_trace(const msgpack_object *map, struct agent_trace *out, char *err,
                          size_t errlen);

/* ---- programs in the part's hosts (node:run, node:spawn) ---- */

#define AGENT_ARGV_MAX 4096 /* arguments of one program */

/* run: {node = whole-network index of a host of the part, id = the
 * controller's name for the program, argv = [string, ...] (1 to
 * AGENT_ARGV_MAX, no NUL inside)}; answered {pid} once started (its pid on
 * that machine), or the error map. Decoded argv is allocated
 * (agent_run_free), NULL-terminated. */
struct agent_run {
    uint64_t node, id;
    char **argv;
    size_t argc;
};

/* signal: {id, sig}: signals the program (1 .. 64), done or the error map;
 * sig 0 is kill(2)'s liveness probe: {alive = bool}, false once the
 * program ended (or is not known: its `program` notification went first). */
struct agent_signal {
    uint64_t id;
    int64_t sig;
};

/* program: {id, status (exit code, or 128 + signal), out, err (bin)}: the
 * program ended; out and err point into the message. The controller reads
 * an agent's messages up to PROTO_MAX_MESSAGE, so each stream is cut at
 * AGENT_PROGRAM_OUTPUT_MAX (a local program keeps 16 MiB of each). */
#define AGENT_PROGRAM_OUTPUT_MAX (PROTO_MAX_MESSAGE / 2 - 4096)
struct agent_program {
    uint64_t id;
    int64_t status;
    const char *out, *err;
    uint32_t out_len, err_len;
};

void agent_wire_run(struct msgmap *m, const struct agent_run *r);
void agent_wire_signal(struct msgmap *m, const struct agent_signal *s);
void agent_wire_program(struct msgmap *m, const struct agent_program *p);
int agent_wire_read_run(const msgpack_object *map, struct agent_run *out, char *err, size_t errlen);
void agent_run_free(struct agent_run *r);
int agent_wire_read_signal(const msgpack_object *map, struct agent_signal *out, char *err,
                           size_t errlen);
int agent_wire_read_program(const msgpack_object *map, struct agent_program *out, char *err,
                            size_t errlen);

/* what: "kill" or "restart", which names the message in err. */
int agent_wire_read_node(const char *what, const msgpack_object *map, struct agent_node *out,
                         char *err, size_t errlen);
int agent_wire_read_link(const msgpack_object *map, struct agent_link *out, char *err,
                         size_t errlen);
/* required: partition's sides must be there; heal's may be absent. */
int agent_wire_read_sides(const char *what, const msgpack_object *map, bool required,
                          struct agent_sides *out, char *err, size_t errlen);
void agent_sides_free(struct agent_sides *s);
int agent_wire_read_heal_reply(const msgpack_object *map, uint64_t *healed, char *err,
                               size_t errlen);

/* ---- stats (notification, agent to controller) ----
 * {t_ns = the agent's CLOCK_MONOTONIC when the sample reached its loop,
 *  rows = [{link = whole-network index, dir = "ab"|"ba", up = bool,
 *           packets = .., bytes = .., ...}]}: one row per direction of each
 * link of the part, links.csv's columns after `up` (AGENT_STATS_COUNTERS),
 * each an integer, -1 where links.csv leaves the cell empty (the kernel
 * backend counts no queue), and optionally tcp = [{node = whole-network
 * index, retrans = .., ...}]: tcp.csv's rows of the part's running hosts
 * (AGENT_TCP_COUNTERS). The controller puts t_ns on its timeline with its
 * clock estimate of the agent. */
/* (clang-format 14 moves this list on every run: left as written) */
/* clang-format off */
#define AGENT_STATS_COUNTERS(X)                                                                    \
    X(packets) X(bytes) X(delivered) X(delivered_bytes) X(drops_loss) X(drops_queue)               \
    X(drops_down) X(queue_peak) X(queue_len) X(marked) X(bw_bps)
/* clang-format on */
#define AGENT_STATS_FIELD_(name) int64_t name;
struct agent_stats_row {
    uint64_t link;
    char dir[3]; /* "ab" or "ba" */
    bool up;
    AGENT_STATS_COUNTERS(AGENT_STATS_FIELD_)
};
#undef AGENT_STATS_FIELD_

/* tcp.csv's counters of one host of the part (controller/tcp_counters.h
 * TCP_COUNTER_NAMES, in that order), each >= 0. */
/* clang-format off */
#define AGENT_TCP_COUNTERS(X) X(retrans) X(rtos) X(fast_retrans) X(lost_retrans) X(recoveries)
/* clang-format on */
#define AGENT_TCP_FIELD_(name) uint64_t name;
struct agent_tcp_row {
    uint64_t node; /* whole-network index */
    AGENT_TCP_COUNTERS(AGENT_TCP_FIELD_)
};
#undef AGENT_TCP_FIELD_

/* A stall of one of the part's hiernet-linkd processes since the last
 * sample (controller/linkd_stalls.h): when it began, the agent's
 * CLOCK_MONOTONIC, and how long linkd waited for a core, both ns >= 0. */
struct agent_stall {
    int64_t t_ns, wall_ns;
};
/* A bound on one notification's stalls: a linkd makes at most one per
 * reading (10 a second), a part has at most 4 x cores of them, and the
 * agent sends from its loop's next turn; past it they are dropped, logged. */
#define AGENT_STALLS_MAX 4096

/* A sample may carry link rows, tcp rows or both; `tcp` and `stalls`
 * ([{t_ns, wall_ns}]) are optional on the wire (absent: none), so a
 * links-only sample reads as before. */
struct agent_stats {
    int64_t t_ns;
    struct agent_stats_row *rows; /* decoded: allocated (agent_stats_free) */
    size_t n_rows;
    struct agent_tcp_row *tcp; /* tcp.csv's rows of the part's running hosts; allocated */
    size_t n_tcp;
    struct agent_stall *stalls; /* allocated */
    size_t n_stalls;
};

void agent_wire_stats(struct msgmap *m, const struct agent_stats *s);
int agent_wire_read_stats(const msgpack_object *map, struct agent_stats *out, char *err,
                          size_t errlen);
void agent_stats_free(struct agent_stats *s);

/* ---- a move over machines (t:move; controller/netrun_parts.c) ----
 * reroute: {move = {link, stays, to} (only to the machine that holds the
 * link: its end at node `stays` stays, the other goes to node `to`),
 * routes = [{node, dst, dst_len, gateway, link, dst_node, via}, ...]}:
 * the routes the move changes for the part's hosts, each replacing its
 * host's route to the same dst/dst_len (topo/route_change.h), in the
 * whole network's indices (dst_node -1: none; via -1 none, -2 on-link),
 * each host's consecutive. Answered done, or the error map. */
#define AGENT_ROUTES_MAX 4000000
struct agent_route {
    uint64_t node, link;
    uint32_t dst, gateway;
    uint8_t dst_len;  /* 0 .. 32 */
    int64_t dst_node; /* >= -1 */
    int64_t via;      /* >= -2 */
};

struct agent_reroute {
    bool move;
    uint64_t link, stays, to;   /* when move */
    struct agent_route *routes; /* decoded: allocated (agent_reroute_free) */
    size_t n_routes;
};

void agent_wire_reroute(struct msgmap *m, const struct agent_reroute *r);
int agent_wire_read_reroute(const msgpack_object *map, struct agent_reroute *out, char *err,
                            size_t errlen);
void agent_reroute_free(struct agent_reroute *r);
