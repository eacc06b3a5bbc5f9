/* test_agent_wire.c — the agent's messages (proto/agent_wire.c): the name
 * table, round trips of every served message through the real framing
 * (proto/protocol.c's reader), and decoders that name the field at fault. */
#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "check.h"

/* Packs m as a request's params and decodes the message back through a
 * reader; the reader stays open so *msg's objects remain valid. */
static bool through_reader(struct msgmap *m, const char *method, struct proto_reader *r,
                           struct proto_msg *msg)
{
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
    CHECK(!agent_method_served(AGENT_LINK) && !agent_method_served(AGENT_STATS) &&
          !agent_method_served(AGENT_UNKNOWN));
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
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
    CHECK(through_reader(&m, "x", &r, &msg));
    CHECK(agent_wire_read_pong(msg.params, &pb, err, sizeof err) == 0);
    CHECK(pb.t1_ns == 11 && pb.t2_ns == 22);
    proto_reader_destroy(&r);
    msgmap_init(&m);
    agent_wire_ping(&m, &q);
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
    CHECK(through_reader(&m, "hello", &r, &msg));
    CHECK(agent_wire_read_hello(msg.params, &h, err, sizeof err) == -1);
    CHECK_STREQ(err, "hello: param 'version': expected string, got integer");
    proto_reader_destroy(&r);

    msgmap_init(&m);
    msgmap_str(&m, "version", "v");
    msgmap_str(&m, "run", "r");
    msgmap_str(&m, "machine", "m");
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
    CHECK(through_reader(&m, "build", &r, &msg));
    CHECK(agent_method_find(msg.method, msg.method_len) == AGENT_BUILD);
    CHECK(agent_wire_read_build(msg.params, &bb, err, sizeof err) == 0);
    CHECK(bb.part_len == 5 && !memcmp(bb.part, part, 5));
    proto_reader_destroy(&r);

    struct agent_build_reply rep = {"quick-1-m1", 3}, rb;
    msgmap_init(&m);
    agent_wire_build_reply(&m, &rep);
    proto_reader_init(&r, 0);
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
    proto_reader_init(&r, 0);
    CHECK(through_reader(&m, "call", &r, &msg));
    CHECK(agent_wire_read_call(msg.params, &cb, err, sizeof err) == 0);
    CHECK(cb.node == c.node && cb.len == sizeof data && !memcmp(cb.data, data, sizeof data));
    proto_reader_destroy(&r);

    struct agent_exit x = {4, 9 /* killed by SIGKILL */}, xb;
    msgmap_init(&m);
    agent_wire_exit(&m, &x);
    proto_reader_init(&r, 0);
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
        proto_reader_init(&r, 0);                                                                  \
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
    proto_reader_init(&r, 0);
    CHECK(through_reader(&m, agent_method_name(AGENT_UNDERLAY), &r, &msg));
    CHECK(agent_wire_read_underlay(msg.params, &ub, err, sizeof err) == 0);
    CHECK_STREQ(ub.address, "10.250.0.2");
    proto_reader_destroy(&r);
    for (int i = 0; i < 2; i++) {
        msgmap_init(&m);
        agent_wire_underlay_reply(&m, &ur);
        proto_reader_init(&r, 0);
        CHECK(through_reader(&m, "x", &r, &msg));
        int rc = agent_wire_read_underlay_reply(msg.params, &urb, err, sizeof err);
        if (i == 0) CHECK(rc == 0 && urb.rtt_ns == 2051000);
        if (i == 1) CHECK(rc == -1);
        if (i == 1) CHECK_STREQ(err, "underlay reply: field 'rtt_ns': 0, expected > 0");
        proto_reader_destroy(&r);
        ur.rtt_ns = 0;
    }
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
    underlay_round_trip();
    return check_report();
}
