/* test_traffic.c — the background traffic schedule (peer/traffic.h): each
 * pattern's send times against a reference drawn here from kernels/rng.c
 * with the same seed and stream, the same seed twice gives the same
 * schedule and another seed another, the mean rates, and onoff's duty
 * cycle; and the pattern and proto names. */
#include <math.h>
#include <stdint.h>

#include "kernels/rng.h"
#include "peer/traffic.h"
#include "tests/unit/check.h"

#define RATE 10e6
#define PACKET 1400
#define GAP (PACKET * 8.0 / RATE)

static double draw_exp(struct rng *r, double mean)
{
    return -mean * log1p(-rng_uniform(r));
}

static void check_constant(void)
{
    struct traffic_schedule s;
    traffic_schedule_init(&s, TRAFFIC_CONSTANT, RATE, PACKET, 0, 0, 7);
    double worst = 0;
    for (int i = 0; i < 100000; i++) /* a running sum: i * GAP up to rounding */
        worst = fmax(worst, fabs(traffic_schedule_next(&s) - i * GAP));
    CHECK_MSG(worst < 1e-9, "constant: a time %g s off i * gap", worst);
}

/* Poisson: t_0 = E_0, t_i = t_{i-1} + E_i, E exponential with mean GAP. */
static void check_poisson(void)
{
    struct traffic_schedule s;
    struct rng r;
    traffic_schedule_init(&s, TRAFFIC_POISSON, RATE, PACKET, 0, 0, 42);
    rng_seed(&r, 42, TRAFFIC_RNG_STREAM);
    double ref = draw_exp(&r, GAP), last = 0;
    int same = 0, n = 200000;
    for (int i = 0; i < n; i++) {
        last = traffic_schedule_next(&s);
        same += last == ref;
        ref += draw_exp(&r, GAP);
    }
    CHECK_MSG(same == n, "%d of %d poisson times equal the reference", same, n);
    /* The mean rate: n packets in `last` s; 2% is 9 standard errors at n. */
    double rate = n * PACKET * 8.0 / last;
    CHECK_MSG(fabs(rate / RATE - 1) < 0.02, "poisson rate %.0f bit/s for %.0f", rate, RATE);
}

/* Onoff: starts on; on periods E(on), off periods E(off); at the rate while on. */
static void check_onoff(void)
{
    const double on = 0.2, off = 0.3;
    struct traffic_schedule s;
    struct rng r;
    traffic_schedule_init(&s, TRAFFIC_ONOFF, RATE, PACKET, on, off, 5);
    rng_seed(&r, 5, TRAFFIC_RNG_STREAM);
    double next = 0, end = draw_exp(&r, on), last = 0;
    int same = 0, n = 400000;
    for (int i = 0; i < n; i++) {
        while (next >= end) {
            double o = draw_exp(&r, off), p = draw_exp(&r, on);
            next = end + o;
            end = next + p;
        }
        last = traffic_schedule_next(&s);
        same += fabs(last - next) < 1e-9;
        next += GAP;
    }
    CHECK_MSG(same == n, "%d of %d onoff times equal the reference", same, n);
    /* Duty cycle on / (on + off): about 2000 periods, 5%. */
    double rate = n * PACKET * 8.0 / last;
    CHECK_MSG(fabs(rate / (RATE * on / (on + off)) - 1) < 0.05, "onoff mean rate %.0f", rate);
}

/* The same seed, the same schedule; another seed, another. */
static void check_seeds(enum traffic_pattern p)
{
    struct traffic_schedule a, b, c;
    traffic_schedule_init(&a, p, RATE, PACKET, 0.1, 0.1, 9);
    traffic_schedule_init(&b, p, RATE, PACKET, 0.1, 0.1, 9);
    traffic_schedule_init(&c, p, RATE, PACKET, 0.1, 0.1, 10);
    int same = 0, other = 0;
    for (int i = 0; i < 5000; i++) {
        double ta = traffic_schedule_next(&a);
        same += ta == traffic_schedule_next(&b);
        other += ta == traffic_schedule_next(&c);
    }
    CHECK(same == 5000);
    CHECK_MSG(other < 50, "seeds 9 and 10 share %d of 5000 times", other);
}

static void check_names(void)
{
    enum traffic_pattern p;
    enum traffic_proto q;
    CHECK(traffic_pattern_parse("constant", &p) && p == TRAFFIC_CONSTANT);
    CHECK(traffic_pattern_parse("poisson", &p) && p == TRAFFIC_POISSON);
    CHECK(traffic_pattern_parse("onoff", &p) && p == TRAFFIC_ONOFF);
    CHECK(!traffic_pattern_parse("bursty", &p));
    CHECK(traffic_proto_parse("udp", &q) && q == TRAFFIC_UDP);
    CHECK(traffic_proto_parse("tcp", &q) && q == TRAFFIC_TCP);
    CHECK(!traffic_proto_parse("sctp", &q));
}

int main(void)
{
    check_constant();
    check_poisson();
    check_onoff();
    check_seeds(TRAFFIC_POISSON);
    check_seeds(TRAFFIC_ONOFF);
    check_names();
    return check_report();
}
