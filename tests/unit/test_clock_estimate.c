/* test_clock_estimate.c — the agent clock estimator (controller/clock_estimate.c)
 * on synthetic pings whose true offset and path delays are known. */
#include "controller/clock_estimate.h"
#include "check.h"

#define MS 1000000LL

/* A ping sent at controller time t0 over a path of out_ns to the agent
 * (whose clock is the controller's + offset_ns), held hold_ns there, back
 * in back_ns. */
static bool ping(struct clock_estimate *c, int64_t t0, int64_t offset_ns, int64_t out_ns,
                 int64_t hold_ns, int64_t back_ns)
{
    int64_t t1 = t0 + out_ns + offset_ns, t2 = t1 + hold_ns, t3 = t2 - offset_ns + back_ns;
    return clock_estimate_add(c, t0, t1, t2, t3);
}

static void symmetric_is_exact(void)
{
    struct clock_estimate c;
    struct clock_offset o;
    clock_estimate_init(&c);
    CHECK(!clock_estimate_get(&c, &o));
    CHECK(ping(&c, 1000 * MS, 250 * MS, 2 * MS, 1 * MS, 2 * MS));
    CHECK(clock_estimate_get(&c, &o));
    CHECK(o.offset_ms == 250.0);
    CHECK(o.rtt_ms == 4.0);
    CHECK(o.error_ms == 2.0);
}

/* 3 ms out, 1 ms back: the estimate is off by (3 - 1) / 2 = 1 ms, within
 * the error bound of half the 4 ms delay. */
static void asymmetric_within_error(void)
{
    struct clock_estimate c;
    struct clock_offset o;
    clock_estimate_init(&c);
    CHECK(ping(&c, 0, -40 * MS, 3 * MS, 5 * MS, 1 * MS));
    CHECK(clock_estimate_get(&c, &o));
    CHECK(o.offset_ms == -39.0);
    CHECK(o.rtt_ms == 4.0);
    CHECK(o.error_ms == 2.0);
    CHECK(o.offset_ms - o.error_ms <= -40.0 && -40.0 <= o.offset_ms + o.error_ms);
}

/* The least-delay sample of the last eight wins, whatever its place; a
 * ninth sample pushes the first out. */
static void least_delay_of_last_eight(void)
{
    struct clock_estimate c;
    struct clock_offset o;
    clock_estimate_init(&c);
    /* first: 0.2 ms round trip, symmetric (exact); then seven slow and skewed */
    CHECK(ping(&c, 0, 7 * MS, MS / 10, 0, MS / 10));
    for (int i = 1; i < 8; i++)
        CHECK(ping(&c, i * 1000 * MS, 7 * MS, (i + 1) * MS, MS, 1 * MS));
    CHECK(clock_estimate_get(&c, &o));
    CHECK(c.n == 8);
    CHECK(o.offset_ms == 7.0);
    CHECK_NEAR(o.rtt_ms, 0.2, 1e-12);
    CHECK_NEAR(o.error_ms, 0.1, 1e-12);
    /* The ninth replaces the fast first: the best is now i = 1 (2 ms out, 1
     * back: offset 7 + 0.5, delay 3). */
    CHECK(ping(&c, 9000 * MS, 7 * MS, 9 * MS, MS, 1 * MS));
    CHECK(clock_estimate_get(&c, &o));
    CHECK(c.n == 8 && c.total == 9);
    CHECK(o.offset_ms == 7.5);
    CHECK(o.rtt_ms == 3.0);
    CHECK(o.error_ms == 1.5);
}

static void odd_sums_and_impossible(void)
{
    struct clock_estimate c;
    struct clock_offset o;
    clock_estimate_init(&c);
    /* t1 - t0 = 3, t2 - t3 = -2: offset 0.5 ns; delay 6 - 1 = 5 ns */
    CHECK(clock_estimate_add(&c, 10, 13, 14, 16));
    CHECK(clock_estimate_get(&c, &o));
    CHECK_NEAR(o.offset_ms, 0.5e-6, 1e-20);
    CHECK_NEAR(o.rtt_ms, 5e-6, 1e-20);
    CHECK(!clock_estimate_add(&c, 10, 13, 12, 20)); /* agent answered before it read */
    CHECK(!clock_estimate_add(&c, 10, 0, 20, 15));  /* held longer than the round trip */
    CHECK(!clock_estimate_add(&c, 10, 11, 12, 9));  /* back before sent */
    /* times whose differences overflow int64 (an agent's t1 and t2 are
     * read off the wire): t2 - t1 wrapped to -1 made this a 11 ns delay */
    CHECK(!clock_estimate_add(&c, 0, INT64_MIN, INT64_MAX, 10));
    CHECK(!clock_estimate_add(&c, -10, INT64_MAX - 5, INT64_MAX, 10)); /* t1 - t0 overflows */
    CHECK(!clock_estimate_add(&c, INT64_MIN, 0, 1, INT64_MAX));        /* t3 - t0 overflows */
    CHECK(c.total == 1);
}

int main(void)
{
    symmetric_is_exact();
    asymmetric_within_error();
    least_delay_of_last_eight();
    odd_sums_and_impossible();
    return check_report();
}
