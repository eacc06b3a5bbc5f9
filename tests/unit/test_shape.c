/* test_shape.c — qdisc parameter computation (topo/shape.c): rates, bucket
 * depths in bytes and kernel ticks, quantum, default queues from the
 * bandwidth-delay product, netem limits and the refusals. */
#include "check.h"
#include "topo/shape.h"

static char err[256];

static struct topo_shape_plan plan_of(struct topo_shape_request request, int have_netem)
{
    struct topo_shape_plan plan;
    err[0] = '\0';
    CHECK_MSG(topo_shape_plan(&request, have_netem, &plan, err, sizeof err) == 0, "%s", err);
    return plan;
}

static void test_htb_100mbit(void)
{
    struct topo_shape_plan p = plan_of((struct topo_shape_request){.rate_bps = 100000000}, 0);
    CHECK(p.has_rate && p.root == TOPO_SHAPE_ROOT_HTB);
    CHECK(p.frame_bytes == 1514);
    CHECK(p.rate.bytes_per_second == 12500000);
    CHECK(p.rate.burst_bytes == 12500);  /* 1 ms at the rate */
    CHECK(p.rate.buffer_ticks == 15625); /* 1 ms in 64 ns ticks */
    CHECK(p.rate.quantum == TOPO_SHAPE_QUANTUM_MAX);
    CHECK(p.leaf == TOPO_SHAPE_LEAF_BFIFO);
    CHECK(p.queue_bytes == 100 * 1514); /* no delay: the 100-frame floor */
    CHECK(p.queue_packets == 100);
}

static void test_htb_rates(void)
{
    struct topo_shape_plan gbit = plan_of((struct topo_shape_request){.rate_bps = 1000000000}, 0);
    struct topo_shape_plan slow = plan_of((struct topo_shape_request){.rate_bps = 10000}, 0);
    struct topo_shape_plan fast =
        plan_of((struct topo_shape_request){.rate_bps = 100000000000ULL}, 0);

    CHECK(gbit.rate.bytes_per_second == 125000000);
    CHECK(gbit.rate.burst_bytes == 125000);
    CHECK(gbit.rate.buffer_ticks == 15625);
    /* Slow: two frames of depth, which take 2.4224 s at 1250 B/s. */
    CHECK(slow.rate.bytes_per_second == 1250);
    CHECK(slow.rate.burst_bytes == 3028);
    CHECK(slow.rate.buffer_ticks == 37850000);
    CHECK(slow.rate.quantum == 1514);
    /* 100 Gbit/s: above 2^32 bytes/s, no cap anywhere. */
    CHECK(fast.rate.bytes_per_second == 12500000000ULL);
    CHECK(fast.rate.burst_bytes == 12500000);
    CHECK(fast.rate.buffer_ticks == 15625);
    CHECK(topo_shape_ticks(UINT64_MAX) == UINT32_MAX);
    CHECK(topo_shape_ticks(640) == 10);
}

static void test_netem(void)
{
    struct topo_shape_request r = {.rate_bps = 100000000, .delay_ns = 10000000, .loss = 0.005};
    struct topo_shape_plan p = plan_of(r, 1);

    CHECK(p.leaf == TOPO_SHAPE_LEAF_NETEM);
    CHECK(p.netem.latency_ns == 10000000);
    CHECK(p.netem.loss == 21474836); /* 0.5% of 2^32 - 1 */
    /* BDP of the 20 ms round trip at 12.5 MB/s = 250000 B = 166 frames. */
    CHECK(p.queue_bytes == 250000);
    CHECK(p.queue_packets == 166);
    /* Plus twice the 82.6 frames that are in the 10 ms delay line. */
    CHECK(p.netem.limit == 166 + 166);

    r.loss = 1.0;
    CHECK(plan_of(r, 1).netem.loss == UINT32_MAX);
}

static void test_netem_without_rate(void)
{
    struct topo_shape_plan p = plan_of((struct topo_shape_request){.delay_ns = 5000000}, 1);
    CHECK(!p.has_rate);
    CHECK(p.leaf == TOPO_SHAPE_LEAF_NETEM);
    /* Sized as if the link ran at 10 Gbit/s. */
    CHECK(p.queue_bytes == 12500000);
    CHECK(p.queue_packets == 8257);
    CHECK(p.netem.limit == 8257 + 8257);
}

static void test_queues(void)
{
    struct topo_shape_request r = {.rate_bps = 20000000, .queue = {.packets = 100}};
    struct topo_shape_plan p = plan_of(r, 0);
    CHECK(p.queue_bytes == 151400 && p.queue_packets == 100);

    r.queue = (struct topo_units_queue){.bytes = 64000};
    p = plan_of(r, 0);
    CHECK(p.queue_bytes == 64000 && p.queue_packets == 43);

    r = (struct topo_shape_request){.rate_bps = 1000000000, .rtt_ns = 50000000};
    p = plan_of(r, 0); /* explicit path RTT: 1 Gbit/s x 50 ms = 6.25 MB */
    CHECK(p.queue_bytes == 6250000);

    r = (struct topo_shape_request){.rate_bps = 1000000000, .mtu = 9000};
    p = plan_of(r, 0);
    CHECK(p.frame_bytes == 9014 && p.queue_bytes == 901400);
    CHECK(topo_shape_default_queue_bytes(8000000, 1000000000, 1514) == 1000000);
    /* Bandwidth-delay multiples: 2 x 10 Gbit/s x 100 us = 250 kB; 0.5 x 1 Gbit/s x 2 ms
     * = 125 kB; no delay: 2 frames. */
    CHECK(topo_shape_bdp_bytes(2, 10000000000ULL, 100000, 1514) == 250000);
    CHECK(topo_shape_bdp_bytes(0.5, 1000000000, 2000000, 1514) == 125000);
    CHECK(topo_shape_bdp_bytes(1, 10000000000ULL, 0, 1514) == 3028);

    /* Multi-Gbit without delay: 2 ms at the rate beats 100 frames. */
    p = plan_of((struct topo_shape_request){.rate_bps = 8000000000ULL}, 0);
    CHECK_MSG(p.queue_bytes == 2000000 && p.queue_packets == 1322, "%u %u", p.queue_bytes,
              p.queue_packets);
}

static void test_tbf_and_none(void)
{
    struct topo_shape_plan p =
        plan_of((struct topo_shape_request){.rate_bps = 50000000, .root = TOPO_SHAPE_ROOT_TBF}, 0);
    CHECK(p.has_rate && p.root == TOPO_SHAPE_ROOT_TBF && p.leaf == TOPO_SHAPE_LEAF_BFIFO);
    CHECK(p.rate.burst_bytes == 6250);

    p = plan_of((struct topo_shape_request){0}, 0);
    CHECK(!p.has_rate && p.leaf == TOPO_SHAPE_LEAF_NONE);
}

static void check_refused(struct topo_shape_request r, int have_netem, const char *message)
{
    struct topo_shape_plan p;
    err[0] = '\0';
    CHECK(topo_shape_plan(&r, have_netem, &p, err, sizeof err) == -1);
    CHECK_STREQ(err, message);
}

static void test_refusals(void)
{
    check_refused((struct topo_shape_request){.rate_bps = 1000000, .delay_ns = 1000000}, 0,
                  "delay, jitter and loss need the kernel's sch_netem, which this kernel lacks: "
                  "use backend \"user\" (hiernet-linkd)");
    check_refused((struct topo_shape_request){.loss = 0.01}, 0,
                  "delay, jitter and loss need the kernel's sch_netem, which this kernel lacks: "
                  "use backend \"user\" (hiernet-linkd)");
    check_refused((struct topo_shape_request){.delay_ns = 1000000, .jitter_ns = 2000000}, 1,
                  "bad jitter 2ms: larger than the delay 1ms");
    check_refused((struct topo_shape_request){.rate_bps = 1000000, .mtu = 20}, 1,
                  "bad mtu 20: must be between 68 and 65535");
    check_refused((struct topo_shape_request){.loss = 1.5}, 1,
                  "bad loss 1.5: must be a fraction between 0 and 1");
    check_refused(
        (struct topo_shape_request){.rate_bps = 1000000, .queue = {.packets = 1000000000}}, 1,
        "bad queue: 1514000000000 bytes is more than a qdisc can hold (4 GiB)");
    check_refused(
        (struct topo_shape_request){.rate_bps = 1000000, .queue = {.packets = 1, .bytes = 1}}, 1,
        "bad queue: give packets or bytes, not both");
}

static void test_goodput(void)
{
    CHECK_NEAR(topo_shape_tcp_goodput_bps(100000000, 1500), 100e6 * 1448 / 1514, 1e-3);
    CHECK_NEAR(topo_shape_tcp_goodput_bps(1000000000, 0), 1e9 * 1448 / 1514, 1e-3);
    CHECK(topo_shape_needs_netem(&(struct topo_shape_request){.jitter_ns = 1}));
    CHECK(!topo_shape_needs_netem(&(struct topo_shape_request){.rate_bps = 1}));
}

int main(void)
{
    test_htb_100mbit();
    test_htb_rates();
    test_netem();
    test_netem_without_rate();
    test_queues();
    test_tbf_and_none();
    test_refusals();
    test_goodput();
    return check_report();
}
