/* test_agent_wire.c — the agent's messages (proto/agent_wire.c): the name
 * table, round trips of every served message through the real framing
 * (proto/protocol.c's reader), and decoders that name the field at fault. */
#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "check.h"

/* Packs m as a request's params and decodes the message back through a
 * reader it opens; the reader stays open (the caller destroys it) so
 * *msg's objects remain valid. */
static bool through_reader(struct msgmap *m, const char *method, struct proto_reader *r,
                           struct proto_msg *msg)
{
    proto_reader_init(r, 0);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    bool ok = msgmap_request(m, &pk, 7, method);
    size_t avail;
    char *buf = proto_reader_buffer(r, sb.size, &avail);
    memcpy(buf, sb.data, sb.size);
    proto_reader_consumed(r, sb.size);
    msgpack_sbuffer_destroy(&sb);
    bool has_msgid;
    char err[128];
    return ok && proto_reader_next(r, msg, &has_msgid, err, sizeof err) == PROTO_NEXT_MESSAGE;
}

static void names(void)
{
    CHECK(agent_method_find("hello", 5) == AGENT_HELLO);
    CHECK(agent_method_find("ping", 4) == AGENT_PING);
    CHECK(agent_method_find("teardown", 8) == AGENT_TEARDOWN);
    CHECK(agent_method_find("build", 5) == AGENT_BUILD);
    CHECK(agent_method_find("pingx", 5) == AGENT_UNKNOWN);
    CHECK(agent_method_find("pin", 3) == AGENT_UNKNOWN);
    CHECK(agent_method_find(NULL, 0) == AGENT_UNKNOWN);
    CHECK(agent_method_served(AGENT_HELLO) && agent_method_served(AGENT_PING) &&
          agent_method_served(AGENT_TEARDOWN));
    CHECK(agent_method_served(AGENT_BUILD) && agent_method_served(AGENT_CALL) &&
          agent_method_served(AGENT_EXIT));
    CHECK(agent_method_find("call", 4) == AGENT_CALL && agent_method_find("exit", 4) == AGENT_EXIT);
    CHECK(agent_method_served(AGENT_LINK) && agent_method_served(AGENT_KILL) &&
          agent_method_served(AGENT_RESTART) && agent_method_served(AGENT_PARTITION) &&
          agent_method_served(AGENT_HEAL) && agent_method_served(AGENT_STATS));
    CHECK(!agent_method_served(AGENT_UNKNOWN));
    CHECK(agent_method_find("link", 4) == AGENT_LINK && agent_method_find("kill", 4) == AGENT_KILL);
    CHECK(agent_method_find("restart", 7) == AGENT_RESTART &&
          agent_method_find("partition", 9) == AGENT_PARTITION);
    CHECK(agent_method_find("heal", 4) == AGENT_HEAL &&
          agent_method_find("stats", 5) == AGENT_STATS);
    CHECK(agent_method_served(AGENT_COUNTERS) &&
          agent_method_find("counters", 8) == AGENT_COUNTERS);
    CHECK(agent_method_served(AGENT_TRACE) && agent_method_find("trace", 5) == AGENT_TRACE);
    CHECK(agent_method_find("run", 3) == AGENT_RUN &&
          agent_method_find("signal", 6) == AGENT_SIGNAL &&
          agent_method_find("program", 7) == AGENT_PROGRAM);
    CHECK_STREQ(agent_link_op_name(AGENT_LINK_SET), "set");
    CHECK_STREQ(agent_link_op_name(AGENT_LINK_UP), "up");
    CHECK_STREQ(agent_link_op_name(AGENT_LINK_DOWN), "down");
    /* every name is distinct and found back */
    for (int m = AGENT_UNKNOWN + 1; m < AGENT_METHOD_COUNT; m++) {
        const char *n = agent_method_name((enum agent_method)m);
        CHECK_MSG(agent_method_find(n, (uint32_t)strlen(n)) == m, "%s", n);
    }
    CHECK_STREQ(agent_method_name(AGENT_METHOD_COUNT), "");
}

static void hello_round_trip(void)
{
    struct agent_hello h = {"0.9.0 (git abc)", "quick-1", "m2", -5000000000LL}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_hello(&m, &h);
    CHECK(through_reader(&m, agent_method_name(AGENT_HELLO), &r, &msg));
    CHECK(agent_method_find(msg.method, msg.method_len) == AGENT_HELLO);
    CHECK(agent_wire_read_hello(msg.params, &back, err, sizeof err) == 0);
    CHECK_STREQ(back.version, h.version);
    CHECK_STREQ(back.run_id, "quick-1");
    CHECK_STREQ(back.machine, "m2");
    CHECK(back.clock_ns == h.clock_ns);
    proto_reader_destroy(&r);
}

static void reply_round_trip(void)
{
    struct agent_hello_reply h = {.version = "v1",
                                  .hostname = "m3",
                                  .features = "veth htb",
                                  .underlay_address = "10.250.0.3",
                                  .underlay_device = "eth0",
                                  .underlay_mtu = 1550,
                                  .uid = 0,
                                  .cap_net_admin = true,
                                  .clock_ns = 123456789012345LL},
                             back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_hello_reply(&m, &h);
    CHECK(through_reader(&m, "x", &r, &msg));
    CHECK(agent_wire_read_hello_reply(msg.params, &back, err, sizeof err) == 0);
    CHECK_STREQ(back.version, "v1");
    CHECK_STREQ(back.hostname, "m3");
    CHECK_STREQ(back.features, "veth htb");
    CHECK_STREQ(back.underlay_address, "10.250.0.3");
    CHECK_STREQ(back.underlay_device, "eth0");
    CHECK(back.underlay_mtu == 1550 && back.uid == 0 && back.cap_net_admin);
    CHECK(back.clock_ns == h.clock_ns);
    proto_reader_destroy(&r);

    struct agent_pong p = {11, 22}, pb;
    struct agent_ping q = {-33}, qb;
    msgmap_init(&m);
    agent_wire_pong(&m, &p);
    CHECK(through_reader(&m, "x", &r, &msg));
    CHECK(agent_wire_read_pong(msg.params, &pb, err, sizeof err) == 0);
    CHECK(pb.t1_ns == 11 && pb.t2_ns == 22);
    proto_reader_destroy(&r);
    msgmap_init(&m);
    agent_wire_ping(&m, &q);
    CHECK(through_reader(&m, "ping", &r, &msg));
    CHECK(agent_wire_read_ping(msg.params, &qb, err, sizeof err) == 0);
    CHECK(qb.t0_ns == -33);
    proto_reader_destroy(&r);
}

/* A decoder names the message and the field: wrong type, missing, too long. */
static void bad_fields(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    struct agent_hello h;
    char err[256], long_name[200];
    msgmap_init(&m);
    msgmap_i64(&m, "version", 3);
    CHECK(through_reader(&m, "hello", &r, &msg));
    CHECK(agent_wire_read_hello(msg.params, &h, err, sizeof err) == -1);
    CHECK_STREQ(err, "hello: param 'version': expected string, got integer");
    proto_reader_destroy(&r);

    msgmap_init(&m);
    msgmap_str(&m, "version", "v");
    msgmap_str(&m, "run", "r");
    msgmap_str(&m, "machine", "m");
    CHECK(through_reader(&m, "hello", &r, &msg));
    CHECK(agent_wire_read_hello(msg.params, &h, err, sizeof err) == -1);
    CHECK_STREQ(err, "hello: param 'clock_ns': missing");
    proto_reader_destroy(&r);

    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    msgmap_init(&m);
    msgmap_str(&m, "version", "v");
    msgmap_str(&m, "run", "r");
    msgmap_str(&m, "machine", long_name);
    msgmap_i64(&m, "clock_ns", 1);
    CHECK(through_reader(&m, "hello", &r, &msg));
    CHECK(agent_wire_read_hello(msg.params, &h, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "param 'machine': string too long");
    proto_reader_destroy(&r);

    msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
    struct agent_pong p;
    CHECK(agent_wire_read_pong(&nil, &p, err, sizeof err) == -1);
    CHECK_STREQ(err, "ping reply: not a map");
}

static void build_round_trip(void)
{
    static const uint8_t part[5] = {0x93, 0x01, 0x00, 0xff, 0x02};
    struct agent_build b = {part, sizeof part}, bb;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_build(&m, &b);
    CHECK(through_reader(&m, "build", &r, &msg));
    CHECK(agent_method_find(msg.method, msg.method_len) == AGENT_BUILD);
    CHECK(agent_wire_read_build(msg.params, &bb, err, sizeof err) == 0);
    CHECK(bb.part_len == 5 && !memcmp(bb.part, part, 5) && !bb.stats);
    proto_reader_destroy(&r);
    b.stats = true; /* sent only when asked for */
    msgmap_init(&m);
    agent_wire_build(&m, &b);
    CHECK(through_reader(&m, "build", &r, &msg));
    CHECK(agent_wire_read_build(msg.params, &bb, err, sizeof err) == 0 && bb.stats);
    CHECK(msg.params->via.map.size == 2 && bb.stall_threshold_ns == 0); /* absent: 0 */
    proto_reader_destroy(&r);
    b.stall_threshold_ns = 40000000; /* the whole network's linkd stall threshold */
    msgmap_init(&m);
    agent_wire_build(&m, &b);
    CHECK(through_reader(&m, "build", &r, &msg));
    CHECK(agent_wire_read_build(msg.params, &bb, err, sizeof err) == 0 &&
          bb.stall_threshold_ns == 40000000 && msg.params->via.map.size == 3);
    proto_reader_destroy(&r);

    struct agent_build_reply rep = {"quick-1-m1", 3}, rb;
    msgmap_init(&m);
    agent_wire_build_reply(&m, &rep);
    CHECK(through_reader(&m, "x", &r, &msg));
    CHECK(agent_wire_read_build_reply(msg.params, &rb, err, sizeof err) == 0);
    CHECK_STREQ(rb.registry, "quick-1-m1");
    CHECK(rb.nodes == 3);
    proto_reader_destroy(&r);
}

/* The error travels as the response's error map: the reader accepts it,
 * proto_error_text gives its line, and the decoder gives every field. */
static void build_error_round_trip(void)
{
    struct agent_build_error e = {.code = 2,
                                  .node = "s1",
                                  .link = "s1-h2",
                                  .message = "link s1-h2: rate '0': must be positive"},
                             eb;
    struct msgmap m;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgmap_init(&m);
    agent_wire_build_error(&m, &e);
    CHECK(msgmap_error_response(&m, &pk, 9));
    struct proto_reader r;
    proto_reader_init(&r, 0);
    size_t avail;
    memcpy(proto_reader_buffer(&r, sb.size, &avail), sb.data, sb.size);
    proto_reader_consumed(&r, sb.size);
    struct proto_msg msg;
    bool has_msgid;
    char err[256];
    CHECK(proto_reader_next(&r, &msg, &has_msgid, err, sizeof err) == PROTO_NEXT_MESSAGE);
    CHECK(msg.kind == PROTO_RESPONSE && msg.msgid == 9);
    CHECK(msg.error->type == MSGPACK_OBJECT_MAP && msg.result->type == MSGPACK_OBJECT_NIL);
    proto_error_text(msg.error, err, sizeof err);
    CHECK_STREQ(err, "link s1-h2: rate '0': must be positive");
    CHECK(agent_wire_read_build_error(msg.error, &eb, err, sizeof err) == 0);
    CHECK(eb.code == 2);
    CHECK_STREQ(eb.node, "s1");
    CHECK_STREQ(eb.link, "s1-h2");
    CHECK_STREQ(eb.message, e.message);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&sb);

    msgpack_object s = {.type = MSGPACK_OBJECT_STR, .via.str = {3, "bad"}};
    proto_error_text(&s, err, sizeof err);
    CHECK_STREQ(err, "bad");
    CHECK(agent_wire_read_build_error(&s, &eb, err, sizeof err) == -1);
    CHECK_STREQ(err, "build error: not a map");
}

static void call_exit_round_trip(void)
{
    static uint8_t data[AGENT_CALL_DATA_MAX];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    struct agent_call c = {123456789012ULL, data, sizeof data}, cb;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_call(&m, &c);
    CHECK(through_reader(&m, "call", &r, &msg));
    CHECK(agent_wire_read_call(msg.params, &cb, err, sizeof err) == 0);
    CHECK(cb.node == c.node && cb.len == sizeof data && !memcmp(cb.data, data, sizeof data));
    proto_reader_destroy(&r);

    struct agent_exit x = {4, 9 /* killed by SIGKILL */}, xb;
    msgmap_init(&m);
    agent_wire_exit(&m, &x);
    CHECK(through_reader(&m, "exit", &r, &msg));
    CHECK(agent_wire_read_exit(msg.params, &xb, err, sizeof err) == 0);
    CHECK(xb.node == 4 && xb.status == 9);
    proto_reader_destroy(&r);
}

/* Decodes one map built by fill with dec and checks the refusal's line. */
#define REFUSED(fill, dec, type, want)                                                             \
    do {                                                                                           \
        struct msgmap m;                                                                           \
        struct proto_reader r;                                                                     \
        struct proto_msg msg;                                                                      \
        type out;                                                                                  \
        char err[256];                                                                             \
        msgmap_init(&m);                                                                           \
        fill;                                                                                      \
        CHECK(through_reader(&m, "x", &r, &msg));                                                  \
        CHECK(dec(msg.params, &out, err, sizeof err) == -1);                                       \
        CHECK_STREQ(err, want);                                                                    \
        proto_reader_destroy(&r);                                                                  \
    } while (0)

static void build_call_refusals(void)
{
    static uint8_t big[AGENT_CALL_DATA_MAX + 1];
    REFUSED(msgmap_str(&m, "part", "abc"), agent_wire_read_build, struct agent_build,
            "build: param 'part': expected binary, got string");
    REFUSED(msgmap_bin(&m, "part", "", 0), agent_wire_read_build, struct agent_build,
            "build: param 'part': 0 bytes, expected 1 to 67108864");
    REFUSED(msgmap_i64(&m, "other", 1), agent_wire_read_build, struct agent_build,
            "build: param 'part': missing");
    REFUSED(msgmap_i64(&m, "node", -1), agent_wire_read_call, struct agent_call,
            "call: param 'node': expected non-negative integer, got integer");
    REFUSED((msgmap_u64(&m, "node", 1), msgmap_bin(&m, "data", big, sizeof big)),
            agent_wire_read_call, struct agent_call,
            "call: param 'data': 65537 bytes, expected 1 to 65536");
    REFUSED(msgmap_u64(&m, "node", 1), agent_wire_read_call, struct agent_call,
            "call: param 'data': missing");
    REFUSED((msgmap_u64(&m, "node", 1), msgmap_str(&m, "status", "9")), agent_wire_read_exit,
            struct agent_exit, "exit: param 'status': expected integer, got string");
    REFUSED((msgmap_str(&m, "registry", "r"), msgmap_f64(&m, "nodes", 1.5)),
            agent_wire_read_build_reply, struct agent_build_reply,
            "build reply: param 'nodes': expected non-negative integer, got number");
    REFUSED((msgmap_i64(&m, "code", 1), msgmap_str(&m, "node", ""), msgmap_nil(&m, "link")),
            agent_wire_read_build_error, struct agent_build_error,
            "build error: param 'link': missing");
}

/* link, kill, restart, partition, heal and their answers. */
static void change_round_trips(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    /* set carries a params map (topo_part_params_pack's; any map here) */
    static const uint8_t params[] = {0x81, 0xa4, 'r', 'a', 't', 'e', 0xcd, 0x03, 0xe8};
    struct agent_link l;
    msgmap_init(&m);
    agent_wire_link(&m, 7, AGENT_LINK_SET, params, sizeof params);
    CHECK(through_reader(&m, "link", &r, &msg));
    CHECK(agent_wire_read_link(msg.params, &l, err, sizeof err) == 0);
    CHECK(l.link == 7 && l.op == AGENT_LINK_SET && l.params && l.params->via.map.size == 1);
    CHECK(l.params->via.map.ptr[0].val.via.u64 == 1000);
    proto_reader_destroy(&r);
    msgmap_init(&m);
    agent_wire_link(&m, 0, AGENT_LINK_DOWN, NULL, 0);
    CHECK(through_reader(&m, "link", &r, &msg));
    CHECK(agent_wire_read_link(msg.params, &l, err, sizeof err) == 0);
    CHECK(l.link == 0 && l.op == AGENT_LINK_DOWN && !l.params && msg.params->via.map.size == 2);
    proto_reader_destroy(&r);

    struct agent_node n;
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){42});
    CHECK(through_reader(&m, "restart", &r, &msg));
    CHECK(agent_wire_read_node("restart", msg.params, &n, err, sizeof err) == 0 && n.node == 42);
    proto_reader_destroy(&r);

    unsigned char side[5] = {1, 2, 2, 0, 1};
    struct agent_sides s;
    msgmap_init(&m);
    agent_wire_sides(&m, &(struct agent_sides){side, 5});
    CHECK(through_reader(&m, "partition", &r, &msg));
    CHECK(agent_wire_read_sides("partition", msg.params, true, &s, err, sizeof err) == 0);
    CHECK(s.n == 5 && !memcmp(s.side, side, 5));
    agent_sides_free(&s);
    CHECK(s.side == NULL && s.n == 0);
    proto_reader_destroy(&r);
    msgmap_init(&m); /* heal {}: every partition */
    agent_wire_sides(&m, &(struct agent_sides){NULL, 0});
    CHECK(through_reader(&m, "heal", &r, &msg));
    CHECK(msg.params->via.map.size == 0);
    CHECK(agent_wire_read_sides("heal", msg.params, false, &s, err, sizeof err) == 0 && !s.side);
    CHECK(agent_wire_read_sides("partition", msg.params, true, &s, err, sizeof err) == -1);
    CHECK_STREQ(err, "partition: field 'sides' is missing");
    proto_reader_destroy(&r);

    uint64_t healed = 0;
    msgmap_init(&m);
    agent_wire_heal_reply(&m, 3);
    CHECK(through_reader(&m, "x", &r, &msg));
    CHECK(agent_wire_read_heal_reply(msg.params, &healed, err, sizeof err) == 0 && healed == 3);
    proto_reader_destroy(&r);
}

static void stats_round_trip(void)
{
    struct agent_stats_row rows[2] = {
        {.link = 4,
         .dir = "ab",
         .up = true,
         .packets = 10,
         .bytes = 15140,
         .delivered = 10,
         .delivered_bytes = 15140,
         .drops_loss = -1,
         .drops_queue = -1,
         .drops_down = 0,
         .queue_peak = -1,
         .queue_len = -1,
         .marked = -1,
         .bw_bps = 20000000},
        {.link = 4,
         .dir = "ba",
         .up = false,
         .packets = 1,
         .bytes = 2,
         .delivered = 3,
         .delivered_bytes = 4,
         .drops_loss = 5,
         .drops_queue = 6,
         .drops_down = 7,
         .queue_peak = 8,
         .queue_len = 9,
         .marked = 10,
         .bw_bps = 11},
    };
    struct agent_stats st = {123456789012LL, rows, 2}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == 0);
    CHECK(back.t_ns == 123456789012LL && back.n_rows == 2);
    for (size_t i = 0; i < 2 && back.n_rows == 2; i++) {
        const struct agent_stats_row *a = &rows[i], *b = &back.rows[i];
        CHECK(a->link == b->link && !strcmp(a->dir, b->dir) && a->up == b->up);
#define SAME_(name) CHECK_MSG(a->name == b->name, "row %zu %s", i, #name);
        AGENT_STATS_COUNTERS(SAME_)
#undef SAME_
    }
    /* 3 keys before the counters, 11 counters: links.csv after 'up' */
    CHECK(msg.params->via.map.ptr[1].val.via.array.ptr[0].via.map.size == 14);
    agent_stats_free(&back);
    CHECK(!back.rows && !back.n_rows);
    proto_reader_destroy(&r);
}

/* stats with tcp rows: the node and the five counters come back; a
 * links-only sample has no tcp key (older readers see what they saw). */
static void stats_tcp_round_trip(void)
{
    struct agent_tcp_row tcp[] = {
        {.node = 3, .retrans = 1, .rtos = 2, .fast_retrans = 3, .lost_retrans = 4, .recoveries = 5},
        {.node = 999999, .retrans = 123456789012ULL},
    };
    struct agent_stats st = {42, NULL, 0, tcp, 2}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == 0);
    CHECK(back.t_ns == 42 && back.n_rows == 0 && back.n_tcp == 2);
    for (size_t i = 0; i < 2 && back.n_tcp == 2; i++) {
        const struct agent_tcp_row *a = &tcp[i], *b = &back.tcp[i];
        CHECK(a->node == b->node);
#define SAME_(name) CHECK_MSG(a->name == b->name, "tcp row %zu %s", i, #name);
        AGENT_TCP_COUNTERS(SAME_)
#undef SAME_
    }
    /* node and 5 counters: tcp.csv after 'node' */
    CHECK(msg.params->via.map.size == 3 &&
          msg.params->via.map.ptr[2].val.via.array.ptr[0].via.map.size == 6);
    agent_stats_free(&back);
    CHECK(!back.tcp && !back.n_tcp);
    proto_reader_destroy(&r);
    st.n_tcp = 0;
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(msg.params->via.map.size == 2); /* t_ns and rows: no tcp key */
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == 0 && back.n_tcp == 0);
    proto_reader_destroy(&r);
    REFUSED((msgmap_i64(&m, "t_ns", 1), msgmap_key(&m, "rows"), msgpack_pack_array(&m.pk, 0),
             msgmap_i64(&m, "tcp", 3)),
            agent_wire_read_stats, struct agent_stats,
            "stats: field 'tcp': expected array, got integer");
    REFUSED((msgmap_i64(&m, "t_ns", 1), msgmap_key(&m, "rows"), msgpack_pack_array(&m.pk, 0),
             msgmap_key(&m, "tcp"), msgpack_pack_array(&m.pk, 1), msgpack_pack_map(&m.pk, 1),
             msgpack_pack_str_with_body(&m.pk, "node", 4), msgpack_pack_int64(&m.pk, -1)),
            agent_wire_read_stats, struct agent_stats,
            "stats: tcp row 0: param 'node': expected non-negative integer, got integer");
}

/* stats with linkd stalls: each stall's t_ns and wall_ns come back, with
 * or without rows; a sample without stalls has no stalls key; a negative
 * time and a stall without its wait refused, naming the stall. */
static void stats_stalls_round_trip(void)
{
    struct agent_stall stalls[] = {{.t_ns = 123456789012345LL, .wall_ns = 470000000},
                                   {.t_ns = 0, .wall_ns = 1}};
    struct agent_stats st = {7, NULL, 0, NULL, 0, stalls, 2}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(msg.params->via.map.size == 3); /* t_ns, rows, stalls: no tcp key */
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == 0);
    CHECK(back.t_ns == 7 && back.n_rows == 0 && back.n_tcp == 0 && back.n_stalls == 2);
    for (size_t i = 0; i < 2 && back.n_stalls == 2; i++)
        CHECK_MSG(back.stalls[i].t_ns == stalls[i].t_ns &&
                      back.stalls[i].wall_ns == stalls[i].wall_ns,
                  "stall %zu", i);
    agent_stats_free(&back);
    CHECK(!back.stalls && !back.n_stalls);
    proto_reader_destroy(&r);
    REFUSED((msgmap_i64(&m, "t_ns", 1), msgmap_key(&m, "rows"), msgpack_pack_array(&m.pk, 0),
             msgmap_key(&m, "stalls"), msgpack_pack_array(&m.pk, 1), msgpack_pack_map(&m.pk, 2),
             msgpack_pack_str_with_body(&m.pk, "t_ns", 4), msgpack_pack_int64(&m.pk, -5),
             msgpack_pack_str_with_body(&m.pk, "wall_ns", 7), msgpack_pack_int64(&m.pk, 1)),
            agent_wire_read_stats, struct agent_stats,
            "stats: stall 0: a time below 0 (t_ns -5, wall_ns 1)");
    REFUSED((msgmap_i64(&m, "t_ns", 1), msgmap_key(&m, "rows"), msgpack_pack_array(&m.pk, 0),
             msgmap_key(&m, "stalls"), msgpack_pack_array(&m.pk, 1), msgpack_pack_map(&m.pk, 1),
             msgpack_pack_str_with_body(&m.pk, "t_ns", 4), msgpack_pack_int64(&m.pk, 5)),
            agent_wire_read_stats, struct agent_stats, "stats: stall 0: param 'wall_ns': missing");
}

/* trace: the fields and the trace's map (into the message) there and
 * back; a dir, interp or step out of range and a missing map refused. */
static void trace_round_trip(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    const unsigned char map[] = {0x81, 0xa1, 'x', 0x07}; /* {x = 7}: any map goes through */
    struct agent_trace t = {9, 1, 1, true, 100000000, NULL}, back;
    msgmap_init(&m);
    agent_wire_trace(&m, &t, map, sizeof map);
    CHECK(through_reader(&m, "trace", &r, &msg));
    CHECK(agent_wire_read_trace(msg.params, &back, err, sizeof err) == 0);
    CHECK(back.link == 9 && back.dir == 1 && back.interp == 1 && back.loop &&
          back.step_ns == 100000000);
    CHECK(back.trace && back.trace->type == MSGPACK_OBJECT_MAP && back.trace->via.map.size == 1 &&
          back.trace->via.map.ptr[0].val.via.u64 == 7);
    proto_reader_destroy(&r);
#define TRACE_FIELDS(dir, interp, step)                                                            \
    msgmap_u64(&m, "link", 1), msgmap_u64(&m, "dir", dir), msgmap_u64(&m, "interp", interp),       \
        msgmap_bool(&m, "loop", false), msgmap_u64(&m, "step_ns", step)
    REFUSED((TRACE_FIELDS(3, 0, 1), msgmap_key(&m, "trace"), msgmap_raw(&m, map, sizeof map)),
            agent_wire_read_trace, struct agent_trace, "trace: field 'dir': 3 is not 0, 1 or 2");
    REFUSED((TRACE_FIELDS(2, 2, 1), msgmap_key(&m, "trace"), msgmap_raw(&m, map, sizeof map)),
            agent_wire_read_trace, struct agent_trace, "trace: field 'interp': 2 is not 0 or 1");
    REFUSED((TRACE_FIELDS(2, 0, 0), msgmap_key(&m, "trace"), msgmap_raw(&m, map, sizeof map)),
            agent_wire_read_trace, struct agent_trace, "trace: field 'step_ns': 0 is not > 0");
    REFUSED(TRACE_FIELDS(0, 0, 1), agent_wire_read_trace, struct agent_trace,
            "trace: field 'trace': expected map, got nothing");
#undef TRACE_FIELDS
}

/* run, signal (0 too: the liveness probe) and program: there and back; an
 * empty argv, a NUL inside an argument, a signal out of range and a status
 * out of range refused. */
static void program_round_trips(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    char *argv[] = {"/bin/sh", "-c", "echo hi", NULL};
    struct agent_run run = {5, 77, argv, 3}, rb;
    msgmap_init(&m);
    agent_wire_run(&m, &run);
    CHECK(through_reader(&m, "run", &r, &msg));
    CHECK(agent_wire_read_run(msg.params, &rb, err, sizeof err) == 0);
    CHECK(rb.node == 5 && rb.id == 77 && rb.argc == 3 && rb.argv[3] == NULL);
    for (size_t i = 0; i < 3 && rb.argc == 3; i++)
        CHECK_STREQ(rb.argv[i], argv[i]);
    agent_run_free(&rb);
    CHECK(!rb.argv && !rb.argc);
    proto_reader_destroy(&r);
    struct agent_signal sg = {77, 15}, sb;
    msgmap_init(&m);
    agent_wire_signal(&m, &sg);
    CHECK(through_reader(&m, "signal", &r, &msg));
    CHECK(agent_wire_read_signal(msg.params, &sb, err, sizeof err) == 0 && sb.id == 77 &&
          sb.sig == 15);
    proto_reader_destroy(&r);
    msgmap_init(&m); /* signal 0: the liveness probe */
    agent_wire_signal(&m, &(struct agent_signal){78, 0});
    CHECK(through_reader(&m, "signal", &r, &msg));
    CHECK(agent_wire_read_signal(msg.params, &sb, err, sizeof err) == 0 && sb.id == 78 &&
          sb.sig == 0);
    proto_reader_destroy(&r);
    struct agent_program pg = {77, 3, "out\n", "", 4, 0}, pb;
    msgmap_init(&m);
    agent_wire_program(&m, &pg);
    CHECK(through_reader(&m, "program", &r, &msg));
    CHECK(agent_wire_read_program(msg.params, &pb, err, sizeof err) == 0);
    CHECK(pb.id == 77 && pb.status == 3 && pb.out_len == 4 && !memcmp(pb.out, "out\n", 4) &&
          pb.err_len == 0);
    proto_reader_destroy(&r);
    REFUSED((msgmap_u64(&m, "node", 1), msgmap_u64(&m, "id", 1), msgmap_key(&m, "argv"),
             msgpack_pack_array(&m.pk, 0)),
            agent_wire_read_run, struct agent_run, "run: field 'argv': expected 1 to 4096 strings");
    REFUSED((msgmap_u64(&m, "node", 1), msgmap_u64(&m, "id", 1), msgmap_key(&m, "argv"),
             msgpack_pack_array(&m.pk, 1), msgpack_pack_str_with_body(&m.pk, "a\0b", 3)),
            agent_wire_read_run, struct agent_run, "run: field 'argv': argument 0 is not a string");
    REFUSED((msgmap_u64(&m, "id", 1), msgmap_i64(&m, "sig", 65)), agent_wire_read_signal,
            struct agent_signal, "signal: field 'sig': 65 is not 0 to 64");
    REFUSED((msgmap_u64(&m, "id", 1), msgmap_i64(&m, "sig", -1)), agent_wire_read_signal,
            struct agent_signal, "signal: field 'sig': -1 is not 0 to 64");
    REFUSED((msgmap_u64(&m, "id", 1), msgmap_i64(&m, "status", 256), msgmap_bin(&m, "out", "", 0),
             msgmap_bin(&m, "err", "", 0)),
            agent_wire_read_program, struct agent_program,
            "program: field 'status': 256 is not 0 to 255");
}

/* counters: the whole network's link index there and back; none refused. */
static void counters_round_trip(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    uint64_t link = 7;
    msgmap_init(&m);
    agent_wire_counters(&m, 12345);
    CHECK(through_reader(&m, "counters", &r, &msg));
    CHECK(agent_wire_read_counters(msg.params, &link, err, sizeof err) == 0 && link == 12345);
    proto_reader_destroy(&r);
    REFUSED(msgmap_str(&m, "x", "y"), agent_wire_read_counters, uint64_t,
            "counters: param 'link': missing");
}

static int read_kill(const msgpack_object *map, struct agent_node *out, char *err, size_t errlen);

static void change_refusals(void)
{
    REFUSED((msgmap_u64(&m, "link", 1), msgmap_str(&m, "op", "flap")), agent_wire_read_link,
            struct agent_link, "link: field 'op': 'flap' is none of set, up, down");
    REFUSED((msgmap_u64(&m, "link", 1), msgmap_str(&m, "op", "set")), agent_wire_read_link,
            struct agent_link, "link: field 'params' is missing (op 'set')");
    REFUSED((msgmap_u64(&m, "link", 1), msgmap_str(&m, "op", "up"), msgmap_i64(&m, "params", 1)),
            agent_wire_read_link, struct agent_link, "link: field 'params': op 'up' takes none");
    REFUSED((msgmap_u64(&m, "link", 1), msgmap_str(&m, "op", "set"), msgmap_i64(&m, "params", 1)),
            agent_wire_read_link, struct agent_link,
            "link: field 'params': expected map, got integer");
    REFUSED(msgmap_str(&m, "op", "up"), agent_wire_read_link, struct agent_link,
            "link: param 'link': missing");
    REFUSED(msgmap_i64(&m, "node", -2), read_kill, struct agent_node,
            "kill: param 'node': expected non-negative integer, got integer");
    REFUSED(msgmap_u64(&m, "nodes", 2), read_kill, struct agent_node,
            "kill: param 'node': missing");
}

static int read_kill(const msgpack_object *map, struct agent_node *out, char *err, size_t errlen)
{
    return agent_wire_read_node("kill", map, out, err, errlen);
}

/* sides: each 0, 1 or 2, an array of 1 to AGENT_SIDES_MAX. */
static void sides_refusals(void)
{
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    struct agent_sides s;
    char err[256];
    static const char *const want[] = {
        "partition: field 'sides': node 2: expected 0, 1 or 2",
        "partition: field 'sides': 0 entries, expected 1 to 1000000",
        "partition: field 'sides': expected array, got string",
    };
    for (int k = 0; k < 3; k++) {
        msgmap_init(&m);
        msgmap_key(&m, "sides");
        if (k == 0) {
            msgpack_pack_array(&m.pk, 3);
            msgpack_pack_uint8(&m.pk, 1);
            msgpack_pack_uint8(&m.pk, 2);
            msgpack_pack_uint8(&m.pk, 3);
        }
        if (k == 1) msgpack_pack_array(&m.pk, 0);
        if (k == 2) proto_pack_str(&m.pk, "12");
        CHECK(through_reader(&m, "partition", &r, &msg));
        CHECK(agent_wire_read_sides("partition", msg.params, true, &s, err, sizeof err) == -1);
        CHECK_STREQ(err, want[k]);
        CHECK(!s.side);
        proto_reader_destroy(&r);
    }
}

/* A stats row names its field at fault. */
static void stats_refusals(void)
{
    struct agent_stats_row row = {.link = 1, .dir = "ab", .bytes = -2};
    struct agent_stats st = {5, &row, 1}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == -1);
    CHECK_STREQ(err, "stats: row 0: field 'bytes': -2 is below -1");
    CHECK(!back.rows);
    proto_reader_destroy(&r);
    snprintf(row.dir, sizeof row.dir, "ac");
    row.bytes = 0;
    msgmap_init(&m);
    agent_wire_stats(&m, &st);
    CHECK(through_reader(&m, "stats", &r, &msg));
    CHECK(agent_wire_read_stats(msg.params, &back, err, sizeof err) == -1);
    CHECK_STREQ(err, "stats: row 0: field 'dir': 'ac' is neither ab nor ba");
    proto_reader_destroy(&r);
    REFUSED(msgmap_i64(&m, "t_ns", 1), agent_wire_read_stats, struct agent_stats,
            "stats: field 'rows': expected array, got nothing");
}

/* underlay: the address there, the round trip back; a round trip <= 0 refused. */
static void underlay_round_trip(void)
{
    struct agent_underlay u = {"10.250.0.2"}, ub;
    struct agent_underlay_reply ur = {2051000}, urb;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    CHECK(agent_method_find("underlay", 8) == AGENT_UNDERLAY &&
          agent_method_served(AGENT_UNDERLAY));
    msgmap_init(&m);
    agent_wire_underlay(&m, &u);
    CHECK(through_reader(&m, agent_method_name(AGENT_UNDERLAY), &r, &msg));
    CHECK(agent_wire_read_underlay(msg.params, &ub, err, sizeof err) == 0);
    CHECK_STREQ(ub.address, "10.250.0.2");
    proto_reader_destroy(&r);
    for (int i = 0; i < 2; i++) {
        msgmap_init(&m);
        agent_wire_underlay_reply(&m, &ur);
        CHECK(through_reader(&m, "x", &r, &msg));
        int rc = agent_wire_read_underlay_reply(msg.params, &urb, err, sizeof err);
        if (i == 0) CHECK(rc == 0 && urb.rtt_ns == 2051000);
        if (i == 1) CHECK(rc == -1);
        if (i == 1) CHECK_STREQ(err, "underlay reply: field 'rtt_ns': 0, expected > 0");
        proto_reader_destroy(&r);
        ur.rtt_ns = 0;
    }
}

/* reroute: the move and every route field there and back (through the
 * real framing), no move key when none, and the refusals naming the field. */
static void reroute_round_trip(void)
{
    struct agent_route routes[] = {
        {.node = 4,
         .link = 7,
         .dst = 0x0a000005,
         .gateway = 0x0a010002,
         .dst_len = 32,
         .dst_node = 5,
         .via = 6},
        {.node = 4, .link = 2, .dst = 0, .gateway = 0, .dst_len = 0, .dst_node = -1, .via = -2},
        {.node = 999999,
         .link = 3,
         .dst = 0xffffffff,
         .gateway = 0xfffffffe,
         .dst_len = 24,
         .dst_node = -1,
         .via = 0},
    };
    struct agent_reroute rr = {true, 11, 12, 13, routes, 3}, back;
    struct msgmap m;
    struct proto_reader r;
    struct proto_msg msg;
    char err[256];
    msgmap_init(&m);
    agent_wire_reroute(&m, &rr);
    CHECK(through_reader(&m, agent_method_name(AGENT_REROUTE), &r, &msg));
    CHECK(agent_method_find(msg.method, msg.method_len) == AGENT_REROUTE);
    CHECK(agent_method_served(AGENT_REROUTE));
    CHECK(agent_wire_read_reroute(msg.params, &back, err, sizeof err) == 0);
    CHECK(back.move && back.link == 11 && back.stays == 12 && back.to == 13 && back.n_routes == 3);
    for (size_t i = 0; i < 3 && back.n_routes == 3; i++) {
        const struct agent_route *a = &routes[i], *b = &back.routes[i];
        CHECK_MSG(a->node == b->node && a->link == b->link && a->dst == b->dst &&
                      a->gateway == b->gateway && a->dst_len == b->dst_len &&
                      a->dst_node == b->dst_node && a->via == b->via,
                  "route %zu", i);
    }
    agent_reroute_free(&back);
    CHECK(!back.routes && !back.n_routes);
    proto_reader_destroy(&r);
    rr.move = false; /* routes only: a machine that does not hold the link */
    rr.n_routes = 0;
    msgmap_init(&m);
    agent_wire_reroute(&m, &rr);
    CHECK(through_reader(&m, "reroute", &r, &msg));
    CHECK(msg.params->via.map.size == 1);
    CHECK(agent_wire_read_reroute(msg.params, &back, err, sizeof err) == 0);
    CHECK(!back.move && back.n_routes == 0);
    proto_reader_destroy(&r);
}

/* One route map whose field key is set to v (the others valid). */
static void route_with(struct msgmap *m, const char *key, int64_t v)
{
    static const char *const keys[] = {"node", "dst",      "dst_len", "gateway",
                                       "link", "dst_node", "via"};
    msgmap_key(m, "routes");
    msgpack_pack_array(&m->pk, 1);
    msgpack_pack_map(&m->pk, 7);
    for (size_t k = 0; k < 7; k++) {
        msgpack_pack_str_with_body(&m->pk, keys[k], strlen(keys[k]));
        msgpack_pack_int64(&m->pk, !strcmp(keys[k], key) ? v : 1);
    }
}

static void reroute_refusals(void)
{
    REFUSED(msgmap_u64(&m, "x", 1), agent_wire_read_reroute, struct agent_reroute,
            "reroute: field 'routes': expected array, got nothing");
    REFUSED(route_with(&m, "dst_len", 33), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: field 'dst_len': 33, expected 0 to 32");
    REFUSED(route_with(&m, "dst", 0x100000000LL), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: field 'dst': not an IPv4 address");
    REFUSED(route_with(&m, "gateway", 0x100000000LL), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: field 'gateway': not an IPv4 address");
    REFUSED(route_with(&m, "dst_node", -2), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: field 'dst_node': -2 is below -1");
    REFUSED(route_with(&m, "via", -3), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: field 'via': -3 is below -2");
    REFUSED(route_with(&m, "node", -1), agent_wire_read_reroute, struct agent_reroute,
            "reroute: route 0: param 'node': expected non-negative integer, got integer");
    REFUSED((msgmap_key(&m, "move"), msgpack_pack_map(&m.pk, 0), route_with(&m, "via", 0)),
            agent_wire_read_reroute, struct agent_reroute, "reroute: move: param 'link': missing");
}

int main(void)
{
    names();
    hello_round_trip();
    reply_round_trip();
    bad_fields();
    build_round_trip();
    build_error_round_trip();
    call_exit_round_trip();
    build_call_refusals();
    change_round_trips();
    stats_round_trip();
    stats_tcp_round_trip();
    stats_stalls_round_trip();
    counters_round_trip();
    trace_round_trip();
    program_round_trips();
    change_refusals();
    sides_refusals();
    stats_refusals();
    underlay_round_trip();
    reroute_round_trip();
    reroute_refusals();
    return check_report();
}
