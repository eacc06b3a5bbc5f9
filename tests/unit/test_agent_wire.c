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
    CHECK(!agent_method_served(AGENT_BUILD) && !agent_method_served(AGENT_CALL) &&
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

int main(void)
{
    names();
    hello_round_trip();
    reply_round_trip();
    bad_fields();
    return check_report();
}
