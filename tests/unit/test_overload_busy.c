/* test_overload_busy.c — the data plane's share judged over the links'
 * busy phases (controller/overload.h, overload_busy_share), exactly, and
 * the automatic dilation's test deciding on it: a training's links idle
 * while it computes, so the share over whole rounds barely rises at a D
 * that meets the bound, and the old judgement sent such a run back to
 * D = 1. */
#include "check.h"
#include "controller/overload.h"

#include <ev.h>
#include <math.h>
#include <string.h>

/* n sub-samples of 0.1 s at a capacity of 1 bit each, carrying share[i]. */
static void subs_of(struct overload_sub *s, const double *share, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (struct overload_sub){.bits = share[i], .capacity = 1, .wall_s = 0.1};
}

static void test_busy_share_rule(void)
{
    struct overload_sub s[240] = {{0}};
    double share[240], busy_s = -1;
    CHECK(overload_busy_share(s, 0, &busy_s) == -1 && busy_s == 0); /* no capacity */
    /* A round at D = 24 of a training: a control message's trickle, then
     * a 3 s phase at the full rate whose first and last sub-samples are
     * partly idle. Over the whole round that is 12% of the rate. */
    for (size_t i = 0; i < 240; i++)
        share[i] = 1e-5;
    share[100] = 0.4;
    for (size_t i = 101; i < 129; i++)
        share[i] = 1.0;
    share[129] = 0.3;
    subs_of(s, share, 240);
    CHECK_NEAR(overload_busy_share(s, 240, &busy_s), 1.0, 1e-12); /* the edges left out */
    CHECK_NEAR(busy_s, 2.8, 1e-9);
    /* A phase of two sub-samples is all edges: both count. */
    double two[] = {0, 0.5, 0.25, 0};
    subs_of(s, two, 4);
    CHECK_NEAR(overload_busy_share(s, 4, &busy_s), 0.375, 1e-12);
    CHECK_NEAR(busy_s, 0.2, 1e-12);
    /* Busy from a tenth of the round's busiest sub-sample: 0.005 is not,
     * 0.007 is (peak 0.06); two phases: {0.06, 0.007} whole, and
     * {0.02, 0.04, 0.06, 0.01} less its first edge (it runs into the
     * round's end, which is no edge of it). */
    double floor[] = {0.005, 0.06, 0.007, 0.005, 0.02, 0.04, 0.06, 0.01};
    subs_of(s, floor, 8);
    CHECK_NEAR(overload_busy_share(s, 8, &busy_s), (0.067 + 0.11) / 5, 1e-12);
    /* A round recorded at D = 1 (100 Gbit/s, load average 39; the
     * sub-samples' wall times as they came): a phase from the round's
     * start (its first sub-sample kept), whose end is the fifth (left out),
     * and a trickle under a tenth of the busiest (not busy). */
    const struct overload_sub recorded[] = {{3.155e8, 1.388e10, 0.139}, {3.109e7, 9.266e9, 0.093},
                                            {6.068e7, 1.16e10, 0.116},  {3.204e7, 7.938e9, 0.079},
                                            {5.122e7, 7.658e9, 0.077},  {9.933e7, 4.493e10, 0.449}};
    double bits = 0, capacity = 0;
    for (size_t i = 0; i < 4; i++)
        bits += recorded[i].bits, capacity += recorded[i].capacity;
    CHECK_NEAR(overload_busy_share(recorded, 6, &busy_s), bits / capacity, 1e-12);
    CHECK_NEAR(busy_s, 0.427, 1e-9);
    /* A phase that runs into the round's end keeps its last sub-sample,
     * and loses its first. */
    double tail[] = {0, 0, 0.2, 0.9, 0.8};
    subs_of(s, tail, 5);
    CHECK_NEAR(overload_busy_share(s, 5, &busy_s), 0.85, 1e-12);
    /* A sub-sample past the rate (a reply's late stamp) does not lift the
     * bar above a tenth of the rate: the others stay busy. */
    double jitter[] = {0.2, 0.25, 3.0, 0.2};
    subs_of(s, jitter, 4);
    CHECK_NEAR(overload_busy_share(s, 4, &busy_s), 3.65 / 4, 1e-12);
    /* Nothing carried: 0, not unknown. */
    double none[] = {0, 0, 0};
    subs_of(s, none, 3);
    CHECK(overload_busy_share(s, 3, &busy_s) == 0 && busy_s == 0);
    /* Capacities differ (the rate changed mid-round): bits over capacity. */
    s[0] = (struct overload_sub){.bits = 3, .capacity = 4, .wall_s = 0.1};
    s[1] = (struct overload_sub){.bits = 1, .capacity = 2, .wall_s = 0.2};
    CHECK_NEAR(overload_busy_share(s, 2, &busy_s), 4.0 / 6.0, 1e-12);
    CHECK_NEAR(busy_s, 0.3, 1e-12);
}

/* The rounds recorded at D = 24 of the measured case (8 workers, ResNet-50
 * by the rtx2080ti profile, batch 32, 100 Gbit/s, BSP, backend user; load
 * average 25 rising to 66 from other programs; Cu 2.54x its bound): wall
 * seconds, the busiest direction's share of rate / D over the round and
 * over its busy phases, their seconds, the data plane's CPU seconds. */
static const struct overload_links recorded_d24[] = {
    {.wall_s = 24.00, .util_max = 0.0685, .util_busy = 0.4718, .busy_s = 3.16, .own_cpu_s = 2.61},
    {.wall_s = 24.63, .util_max = 0.0667, .util_busy = 0.6955, .busy_s = 1.86, .own_cpu_s = 2.42},
    {.wall_s = 23.38, .util_max = 0.0618, .util_busy = 0.6465, .busy_s = 1.75, .own_cpu_s = 1.27},
    {.wall_s = 23.99, .util_max = 0.0685, .util_busy = 0.5057, .busy_s = 2.31, .own_cpu_s = 1.45},
};

/* Those rounds as the account judges them. */
static void test_recorded_rounds(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    for (size_t i = 0; i < 4; i++)
        overload_note_links(o, &recorded_d24[i]);
    struct overload_report r;
    overload_report(o, 24, &r);
    const struct overload_dataplane *dp = &r.dataplane;
    /* Every round is active: 0.7 to 1.3 cores while busy (over whole
     * rounds only the first reached 0.1 of a core, and a tested rerun's
     * window of 3 never closed in 4 steps). */
    CHECK_MSG(dp->samples == 4, "%llu active", (unsigned long long)dp->samples);
    /* Busy-time quartile: 0.47 over 3.16 s, 0.51 over 2.31, 0.65 over
     * 1.75 and 0.70 over 1.86: three quarters of 9.08 s are reached in the
     * 0.64 bin (the first three alone, a rerun's window: the 0.69 bin).
     * Over whole rounds: the 0.06 bin. */
    CHECK_NEAR(dp->link_utilization, 0.645, 1e-9);
    CHECK_NEAR(dp->link_utilization_rounds, 0.065, 1e-9);
    double cores = (2.61 + 2.42 + 1.27 + 1.45) / (3.16 + 1.86 + 1.75 + 2.31);
    if (dp->host_cores > 0 && cores > dp->host_cores) cores = dp->host_cores;
    CHECK_NEAR(dp->own_cores, cores, 1e-9);
    overload_free(o);
    ev_loop_destroy(loop);
}

/* The tested rerun's decision on the window of the first three of those
 * rounds (69.5% while busy, 0.93 cores), against the first run's 3.5% at
 * D = 1 (recorded in the same hour; the host 100% busy). */
static void test_tested_decides_on_phases(void)
{
    struct overload_dataplane w = {
        .samples = 3, .active_s = 72, .host_busy = 1, .host_cores = 2, .linkd_busy = 0.09};
    struct overload_auto c;
    /* The old judgement: 6.5% over whole rounds and 0.11 cores: no
     * material rise, back to D = 1 (where Cu was 31x its bound). */
    w.link_utilization = w.link_utilization_rounds = 0.065;
    w.own_cores = 0.109;
    overload_choose_tested(&w, 24, 1, 0.035, &c);
    CHECK_MSG(c.dilation == 1 && strstr(c.reason, "no material rise"), "%g %s", c.dilation,
              c.reason);
    /* Over the busy phases: 69.5% on 0.93 cores: risen, so the host was the
     * limit, and still short on a saturated host: raised to
     * ceil(24 x 1.5 / 0.695). */
    w.link_utilization = 0.695;
    w.own_cores = 0.93;
    overload_choose_tested(&w, 24, 1, 0.035, &c);
    CHECK_MSG(c.dilation == 52 && strstr(c.reason, "the host was the limit; still short: "
                                                   "dilation 52"),
              "%g %s", c.dilation, c.reason);
    CHECK_MSG(strstr(c.reason, "of its rate / D while busy (6% over whole samples)") ||
                  strstr(c.reason, "of its rate / D while busy (7% over whole samples)"),
              "%s", c.reason);
    /* A D that met its bound (the brief's run: Cu 1.040x at D = 24, 8% of
     * rate / D per round): its phases at the rate keep it. */
    w.link_utilization = 0.955;
    w.link_utilization_rounds = 0.085;
    overload_choose_tested(&w, 24, 1, 0.06, &c);
    CHECK_MSG(c.dilation == 24 && strstr(c.reason, "so the host was the limit; dilation 24"),
              "%g %s", c.dilation, c.reason);
    /* ... which the old judgement sent back to D = 1. */
    w.link_utilization = 0.085;
    overload_choose_tested(&w, 24, 1, 0.06, &c);
    CHECK_MSG(c.dilation == 1, "%g %s", c.dilation, c.reason);
    /* No rise over the phases either (7%): the emulation's own, D = 1. */
    w.link_utilization = 0.075;
    overload_choose_tested(&w, 24, 1, 0.06, &c);
    CHECK_MSG(c.dilation == 1, "%g %s", c.dilation, c.reason);
}

/* The window's share is the upper quartile over busy time: a round whose
 * phase was 0.2 s weighs a tenth of one whose phase was 2 s. The rounds'
 * own share (0.3 each) stays beside it, and the data plane's cores are
 * counted over the busy time as well. */
static void test_window_weighs_busy_time(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    struct overload_links lng = {
        .wall_s = 1, .util_max = 0.3, .util_busy = 0.905, .busy_s = 2, .own_cpu_s = 1};
    struct overload_links shrt = {
        .wall_s = 1, .util_max = 0.3, .util_busy = 0.205, .busy_s = 0.2, .own_cpu_s = 1};
    /* By rounds, 4 of 5 at 0.205 would set the quartile; by busy time the
     * long phase is 2 s of 2.8. */
    for (int i = 0; i < 4; i++)
        overload_note_links(o, &shrt);
    overload_note_links(o, &lng);
    struct overload_report r;
    overload_report(o, 1, &r);
    CHECK_MSG(r.dataplane.samples == 5 && fabs(r.dataplane.link_utilization - 0.905) < 1e-9 &&
                  fabs(r.dataplane.link_utilization_rounds - 0.305) < 1e-9,
              "%llu samples, %g busy, %g rounds", (unsigned long long)r.dataplane.samples,
              r.dataplane.link_utilization, r.dataplane.link_utilization_rounds);
    /* The data plane's CPU over the busy time too: 5 CPU seconds in 2.8 s
     * of phases (no more than the host's cores). */
    double cores = 5 / 2.8;
    if (r.dataplane.host_cores > 0 && cores > r.dataplane.host_cores)
        cores = r.dataplane.host_cores;
    CHECK_NEAR(r.dataplane.own_cores, cores, 1e-9);
    overload_free(o);
    ev_loop_destroy(loop);
}

int main(void)
{
    test_busy_share_rule();
    test_recorded_rounds();
    test_tested_decides_on_phases();
    test_window_weighs_busy_time();
    return check_report();
}
