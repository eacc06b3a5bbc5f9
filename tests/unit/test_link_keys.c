/* test_link_keys.c — the shared table of link parameters (proto/link_keys.h):
 * every text key parses into its field through topo_link_param_set, unknown
 * keys are told apart, wire values land in the struct fields in their
 * units, and LINK_KEY spells the tables' keys. */
#include "proto/link_keys.h"
#include "topo/network.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdint.h>

static void test_text_keys(void)
{
    struct topo_link_params p = {0};
    char err[256];
    CHECK(topo_link_param_set(&p, "bw", "100Mbit", err, sizeof err) == 0);
    CHECK(p.rate_bps == 100000000);
    CHECK(topo_link_param_set(&p, "delay", "10ms", err, sizeof err) == 0);
    CHECK(p.delay_ns == 10000000);
    CHECK(topo_link_param_set(&p, "jitter", "1ms", err, sizeof err) == 0);
    CHECK(p.jitter_ns == 1000000);
    CHECK(topo_link_param_set(&p, "loss", "1%", err, sizeof err) == 0);
    CHECK_NEAR(p.loss, 0.01, 1e-12);
    CHECK(topo_link_param_set(&p, "queue", "100", err, sizeof err) == 0);
    CHECK(p.queue.packets == 100);
    CHECK(topo_link_param_set(&p, "ecn_threshold", "64", err, sizeof err) == 0);
    CHECK(p.ecn_threshold.packets == 64 && p.ecn_threshold.bytes == 0);
    CHECK(topo_link_param_set(&p, "ecn_threshold", "96KB", err, sizeof err) == 0);
    CHECK(p.ecn_threshold.bytes == 96000 && p.ecn_threshold.packets == 0);
    /* A threshold is a depth: no bandwidth-delay multiple, and the error names it. */
    CHECK(topo_link_param_set(&p, "ecn_threshold", "bdp", err, sizeof err) == -1);
    CHECK_STREQ(err, "bad ecn_threshold \"bdp\": expected a packet count like \"64\" or a size "
                     "with unit B, KB, MB, KiB or MiB");
    CHECK(topo_link_param_set(&p, "reorder", "true", err, sizeof err) == -2);
    CHECK(topo_link_param_set(&p, "bogus", "1", err, sizeof err) == -2);
    CHECK(topo_link_param_set(&p, "delay", "ten", err, sizeof err) == -1);
    int keys = 0;
#define COUNT(key, field, parse, unit) keys++;
    TOPO_LINK_TEXT_KEYS(COUNT)
#undef COUNT
    CHECK(keys == 6);
}

/* What linkd stores for wire values; every shared key has a range. */
static void test_wire_units(void)
{
    CHECK(LINK_WIRE_IN_TIME(1.5) == 1500);
    CHECK(LINK_WIRE_IN_TIME(10000.0) == 10000000);
    CHECK(LINK_WIRE_IN_BPS(1e9) == 1000000000u);
    CHECK(LINK_WIRE_IN_FRACTION(0.25) == 0.25);
    int n = 0;
#define CHECK_RANGE(key, field, unit, min, max)                                                    \
    CHECK((min) == 0 && (max) > 0);                                                                \
    n++;
    LINK_WIRE_KEYS(CHECK_RANGE)
    LINK_WIRE_GILBERT_KEYS(CHECK_RANGE)
#undef CHECK_RANGE
    CHECK(n == 8);
    n = 0;
#define COUNT_WHOLE(key, field, unit, min, max)                                                    \
    CHECK((min) <= 0 && (max) > 0);                                                                \
    n++;
    LINK_WIRE_COUNT_KEYS(COUNT_WHOLE)
#undef COUNT_WHOLE
    CHECK(n == 5);
    CHECK(LINK_WIRE_IN_COUNT(1000.0) == 1000);
    CHECK(LINK_WIRE_IN_COUNT(-14.0) == -14);
}

/* LINK_KEY spells a table's key; it is a constant, for static tables too. */
static void test_key_names(void)
{
    static const char *const names[] = {LINK_KEY(queue), LINK_KEY(queue_bytes), LINK_KEY(overhead),
                                        LINK_KEY(reorder), LINK_KEY(jitter_dist)};
    CHECK_STREQ(names[0], "queue");
    CHECK_STREQ(names[1], "queue_bytes");
    CHECK_STREQ(names[2], "overhead");
    CHECK_STREQ(names[3], "reorder");
    CHECK_STREQ(names[4], "jitter_dist");
    CHECK_STREQ(LINK_KEY(bw), "bw");
}

int main(void)
{
    test_text_keys();
    test_wire_units();
    test_key_names();
    return check_report();
}
