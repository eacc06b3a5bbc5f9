/* test_topo_tcp.c — a node's TCP settings under dilation (topo/tcp.c): the
 * rto_min metric and the TSO sizing's RTT log (topo_tcp_tso_rtt_log). */
#include "check.h"
#include "topo/tcp.h"

static void test_tso_rtt_log(void)
{
    /* No dilation, or none to speak of: the kernel's value stays. */
    CHECK(topo_tcp_tso_rtt_log(1) == 0);
    CHECK(topo_tcp_tso_rtt_log(0.5) == 0);
    CHECK(topo_tcp_tso_rtt_log(1.3) == 0); /* log2 0.38 rounds to 0 */
    /* 9 plus log2(D), rounded: exact at powers of two. */
    CHECK(topo_tcp_tso_rtt_log(2) == 10);
    CHECK(topo_tcp_tso_rtt_log(8) == 12);
    CHECK(topo_tcp_tso_rtt_log(43) == 14);  /* log2 43 = 5.43: a 0.2 ms RTT at D 43 earns 64 KB */
    CHECK(topo_tcp_tso_rtt_log(150) == 16); /* 7.23 */
    CHECK(topo_tcp_tso_rtt_log(1024) == 19);
}

static void test_tso_rtt_log_restores_bonus(void)
{
    /* Linux adds gso_max_size >> (min_rtt_us >> log): at D a flow's real
     * min RTT is D times its emulated one, and the scaled log must give it
     * the bonus the emulated RTT earns at D = 1 (exact for powers of two). */
    const unsigned rtts_us[] = {100, 200, 511, 512, 1000, 5000, 20000};
    for (unsigned d = 2; d <= 1024; d *= 2) {
        unsigned log = topo_tcp_tso_rtt_log(d);
        for (size_t i = 0; i < sizeof rtts_us / sizeof rtts_us[0]; i++)
            CHECK_MSG((rtts_us[i] * d >> log) == (rtts_us[i] >> TOPO_TCP_TSO_RTT_LOG_KERNEL),
                      "D %u, min RTT %u us", d, rtts_us[i]);
    }
}

static void test_rto_min_metric(void)
{
    struct topo_tcp t = {0};
    CHECK(topo_tcp_rto_min_metric_ms(&t, 8) == 0);
    t.rto_min_ns = 5000000;
    CHECK(topo_tcp_rto_min_metric_ms(&t, 1) == 5);
    CHECK(topo_tcp_rto_min_metric_ms(&t, 8) == 40);
}

int main(void)
{
    test_tso_rtt_log();
    test_tso_rtt_log_restores_bonus();
    test_rto_min_metric();
    return check_report();
}
