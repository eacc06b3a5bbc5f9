/* test_part_build.c — part_build's refusals before anything is built
 * (controller/part_build.c): each fails at once, in one line, with the
 * error code that says whose fault it is (NET_ERR_SCENARIO: the part;
 * NET_ERR_ENVIRONMENT: the machine, here a registry root that is not a
 * directory), and built is never called. No root needed: nothing reaches
 * netrun_build. */
#include "check.h"
#include "controller/part_build.h"
#include "topo/part_wire.h"

static int built_calls;

static void on_built(void *ctx, struct part_run *run, const struct net_error *error)
{
    (void)ctx, (void)run, (void)error;
    built_calls++;
}

/* An empty part of network 'net' for machine m1, encoded into buf. */
static void encode_empty_part(msgpack_sbuffer *buf)
{
    struct topo_part part = {0};
    char err[256];
    CHECK_MSG(topo_part_init(&part, "net", TOPO_BACKEND_KERNEL, err, sizeof err) == 0, "%s", err);
    snprintf(part.run_id, sizeof part.run_id, "run1");
    snprintf(part.machine, sizeof part.machine, "m1");
    part.net->underlay_local = 0x0afa0001; /* 10.250.0.1 */
    msgpack_packer pk;
    msgpack_sbuffer_init(buf);
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    CHECK(topo_part_encode(&part, &pk));
    topo_part_free(&part);
}

/* part_build on machine `machine` fails with code and a message holding want. */
static void expect_refused(const void *bytes, size_t len, const char *machine,
                           enum net_error_code code, const char *want)
{
    struct part_build_opts opts = {.machine = machine, .built = on_built};
    struct part_run *run = NULL;
    struct net_error error;
    CHECK(part_build(EV_DEFAULT, bytes, len, &opts, &run, &error) < 0);
    CHECK_MSG(error.code == code, "code %d, expected %d (%s)", (int)error.code, (int)code,
              error.message);
    CHECK_CONTAINS(error.message, want);
    CHECK(!strchr(error.message, '\n'));
    CHECK(run == NULL);
}

int main(void)
{
    msgpack_sbuffer buf;
    encode_empty_part(&buf);
    expect_refused(buf.data, buf.size, "m2", NET_ERR_SCENARIO,
                   "part of network 'net' for machine 'm1' reached machine 'm2'");
    expect_refused("\xc1", 1, "m1", NET_ERR_SCENARIO,
                   "part wire: part: not one MessagePack object");
    /* A registry root that is no directory: the machine's fault. */
    CHECK(setenv("HIERNET_RUN_DIR", "/dev/null", 1) == 0);
    expect_refused(buf.data, buf.size, "m1", NET_ERR_ENVIRONMENT, "/dev/null");
    CHECK(built_calls == 0);
    msgpack_sbuffer_destroy(&buf);
    return check_report();
}
