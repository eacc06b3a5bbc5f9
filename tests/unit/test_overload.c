/* test_overload.c — the pure parts of dilation and the overload account:
 * the worker's budget and overrun rule (peer/worker.h), the link parameters
 * a backend installs under dilation (topo/network.h), and the overload
 * account's counting, worst node, stretch percentile, suggested dilation,
 * JSON and warning (controller/overload.h), fed with replies as peers send
 * them. */
#include "check.h"
#include "controller/overload.h"
#include "peer/worker.h"
#include "topo/network.h"
#include "topo/shape.h"

#include <math.h>
#include <msgpack.h>
#include <string.h>

static void test_budget(void)
{
    struct worker_timing cpu1 = {1, 1, true}, slow = {0.25, 4, true}, gpu = {1, 8, false};
    CHECK_NEAR(worker_budget_ms(&cpu1, 10, 10.2), 10, 1e-9);
    CHECK_NEAR(worker_budget_ms(&slow, 10, 12), 160, 1e-9); /* 4 * 10 / 0.25 */
    CHECK_NEAR(worker_budget_ms(&gpu, 1, 30), 240, 1e-9);   /* the device's 30 ms, stretched */
    /* Tolerance: 5% + 0.5 ms. */
    CHECK(!worker_overran(&cpu1, 10, 10.9));
    CHECK(worker_overran(&cpu1, 10, 11.1));
    CHECK(!worker_overran(&cpu1, 0.01, 0.4)); /* a tiny command's wake-up is noise */
    CHECK(worker_overran(&slow, 160, 200));
    CHECK(!worker_overran(&gpu, 1, 1000)); /* never counted on a GPU */
    /* Starvation: CPU time + run-queue delay alone past the budget. */
    CHECK(!worker_starved(&cpu1, 10, 10, 0.9)); /* the rest of a late end was a wait */
    CHECK(worker_starved(&cpu1, 10, 10, 1.1));
    CHECK(!worker_starved(&slow, 160, 10, 158)); /* a slow device absorbs the delay */
    CHECK(worker_starved(&slow, 160, 10, 159));
    CHECK(!worker_starved(&gpu, 1, 1, 1000));
}

static void test_link_dilate(void)
{
    struct topo_link_params p = {.rate_bps = 100000000,
                                 .delay_ns = 5000000,
                                 .jitter_ns = 1000000,
                                 .loss = 0.01,
                                 .queue = {.packets = 50},
                                 .reorder = true};
    struct topo_link_params d;
    topo_link_params_dilate(&p, 4, &d);
    CHECK(d.rate_bps == 25000000 && d.delay_ns == 20000000 && d.jitter_ns == 4000000);
    CHECK(d.loss == 0.01 && d.queue.packets == 50 && d.reorder);
    topo_link_params_dilate(&p, 1, &d);
    CHECK(d.rate_bps == p.rate_bps && d.delay_ns == p.delay_ns);
    /* The default queue is the emulated link's: 2 ms at 10 Gbit/s, not at 10 / 24. */
    struct topo_link_params fast = {.rate_bps = 10000000000ull, .delay_ns = 50000};
    topo_link_params_dilate(&fast, 24, &d);
    CHECK(d.queue.packets == 0 && d.queue.bytes == 2500000);
    CHECK(d.queue.bytes == topo_shape_default_queue_bytes(10000000000ull, 100000, 1514));
    p.rate_bps = 3;
    topo_link_params_dilate(&p, 1000, &d);
    CHECK(d.rate_bps == 1); /* never 0, which would mean unlimited */
    p.rate_bps = 0;
    topo_link_params_dilate(&p, 8, &d);
    CHECK(d.rate_bps == 0);
}

/* A compute reply as a peer packs it: {ms, cpu_ms, queue_ms, overrun,
 * run_delay_ms, starved}. */
static void note_delay(struct overload *o, int id, double ms, double cpu_ms, double delay_ms,
                       bool overrun, bool starved)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    msgpack_pack_str_with_body(&pk, "ms", 2);
    msgpack_pack_double(&pk, ms);
    msgpack_pack_str_with_body(&pk, "cpu_ms", 6);
    msgpack_pack_double(&pk, cpu_ms);
    msgpack_pack_str_with_body(&pk, "queue_ms", 8);
    msgpack_pack_double(&pk, 0);
    msgpack_pack_str_with_body(&pk, "overrun", 7);
    overrun ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    msgpack_pack_str_with_body(&pk, "run_delay_ms", 12);
    msgpack_pack_double(&pk, delay_ms);
    msgpack_pack_str_with_body(&pk, "starved", 7);
    starved ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, buf.data, buf.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    overload_note_reply(o, id, &u.data, true);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&buf);
}

/* A starved overrun whose wall time is all CPU time and run-queue delay. */
static void note(struct overload *o, int id, double ms, double cpu_ms, bool overrun)
{
    note_delay(o, id, ms, cpu_ms, overrun ? ms - cpu_ms : 0, overrun, overrun);
}

static void test_account(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    int a = overload_add_node(o, "n", "a", 1, true), b = overload_add_node(o, "n", "b", 0.5, true);
    struct overload_report r;
    overload_report(o, 1, &r);
    CHECK(r.commands == 0 && r.overrun_share == 0 && !r.limited && r.suggested_dilation == 1);
    CHECK(r.worst_node[0] == '\0' && r.stretch_p95 == 1 && r.host_cores >= 1);
    /* a: 10 on time. b (speed 0.5): 8 on time, 2 overran 4x (ms 40 for 5 ms cpu / 0.5), all
     * of it run-queue delay: they needed dilation (5 + 35) * 0.5 / 5 = 4. */
    for (int i = 0; i < 10; i++)
        note(o, a, 10, 10, false);
    for (int i = 0; i < 8; i++)
        note(o, b, 10, 5, false);
    for (int i = 0; i < 2; i++)
        note(o, b, 40, 5, true);
    overload_report(o, 1, &r);
    CHECK(r.commands == 20 && r.overruns == 2 && r.starved == 2);
    CHECK_NEAR(r.overrun_share, 0.1, 1e-12);
    CHECK_STREQ(r.worst_node, "b");
    CHECK_NEAR(r.worst_node_overrun_share, 0.2, 1e-12);
    CHECK_NEAR(r.starved_share, 0.1, 1e-12);
    CHECK(r.limited && !r.waited);
    /* The two overruns' stretch 4 falls in bin floor(ln 4 / ln 1.05) = 28, whose
     * upper edge 1.05^29 = 4.1161 is the p95 (18 of 20 commands on time are
     * below 95%). */
    CHECK_MSG(fabs(r.stretch_p95 - pow(1.05, 29)) < 1e-12, "p95 %.17g", r.stretch_p95);
    /* The stretch asks for 1 * ~4.2 * 1.25 -> 6, but a and b at once need 1.5 cores: on
     * 1 core max(1, 1.5) * 1.25 -> 2, on more max(1, 1.5 / cores) * 1.25 -> 2. */
    CHECK_NEAR(r.cpu_demand, 1.5 / r.host_cores, 1e-12);
    CHECK_MSG(r.suggested_dilation == 2, "suggested %g", r.suggested_dilation);
    char line[512];
    CHECK(overload_warning(&r, line, sizeof line));
    CHECK_CONTAINS(line, "warning: this run was limited by the host's CPU: 10% of compute commands "
                         "were starved of CPU; use fewer nodes, lower speeds, or dilation = 2");
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    overload_write_json(f, &r);
    fclose(f);
    CHECK_CONTAINS(json, "\"commands\": 20, \"overruns\": 2, \"overrun_share\": 0.1");
    CHECK_CONTAINS(json, "\"starved\": 2, \"starved_share\": 0.1");
    CHECK_CONTAINS(json, "\"cpu_demand\": ");
    CHECK_CONTAINS(json, "\"worst_node\": \"b\"");
    CHECK_CONTAINS(json, "\"compute_share\": ");
    CHECK_CONTAINS(
        json,
        "\"limited\": true, \"latency\": false, \"waited\": false, \"dataplane\": {\"samples\": 0");
    free(json);
    /* Below 5%: not limited, the run's own dilation stands. */
    for (int i = 0; i < 30; i++)
        note(o, a, 10, 10, false);
    overload_report(o, 2, &r);
    CHECK(!r.limited && r.suggested_dilation == 2 && !overload_warning(&r, line, sizeof line));
    /* Replies without the worker's fields (ping, peers) count for nothing. */
    overload_note_reply(o, a, &(msgpack_object){.type = MSGPACK_OBJECT_NIL}, true);
    overload_note_reply(o, 99, &(msgpack_object){.type = MSGPACK_OBJECT_NIL}, true);
    overload_report(o, 2, &r);
    CHECK(r.commands == 50);
    /* 10 overruns of a's that waited (blocked 30 ms, 0.2 ms without a core): 20 of 60
     * overran, 2 starved. Not CPU-limited: a note, and the run's dilation stands. */
    for (int i = 0; i < 10; i++)
        note_delay(o, a, 40, 10, 0.2, true, false);
    overload_report(o, 2, &r);
    CHECK(r.commands == 60 && r.overruns == 12 && r.starved == 2);
    CHECK(!r.limited && r.waited && r.suggested_dilation == 2);
    CHECK(overload_warning(&r, line, sizeof line));
    CHECK_STREQ(line, "note: 20% of compute commands overran while waiting, not for a core (3% "
                      "starved of CPU): the host's CPU did not set this run's times, and "
                      "dilation would not shorten them");
    overload_free(o);
    ev_loop_destroy(loop);
}

/* The CPU demand is the peak of nodes computing in networks that ran at
 * once: a network run after another one stopped does not add to it. */
static void test_demand(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    int a = overload_add_node(o, "n1", "a", 1, true), b = overload_add_node(o, "n1", "b", 2, true);
    struct overload_report r;
    note(o, a, 10, 10, false);
    note(o, b, 10, 10, false);
    overload_report(o, 1, &r);
    CHECK_NEAR(r.cpu_demand * r.host_cores, 3, 1e-12);
    overload_node_live(o, a, false);
    overload_node_live(o, b, false);
    int c = overload_add_node(o, "n2", "c", 1, true);
    note(o, c, 10, 10, false);
    overload_report(o, 1, &r);
    CHECK_NEAR(r.cpu_demand * r.host_cores, 3, 1e-12); /* the peak: n1's 3, not 1 + 3 */
    int d = overload_add_node(o, "n2", "d", 1, true),
        e = overload_add_node(o, "n2", "e", 1.5, true);
    note(o, d, 10, 10, false);
    note(o, e, 10, 10, false);
    overload_report(o, 1, &r);
    CHECK_NEAR(r.cpu_demand * r.host_cores, 3.5, 1e-12); /* c + d + e at once */
    overload_node_live(o, a, true);                      /* a (1) back beside them: 4.5 */
    overload_report(o, 1, &r);
    CHECK_NEAR(r.cpu_demand * r.host_cores, 4.5, 1e-12);
    overload_node_live(o, -1, true); /* unknown ids change nothing */
    overload_node_live(o, 99, false);
    overload_report(o, 1, &r);
    CHECK_NEAR(r.cpu_demand * r.host_cores, 4.5, 1e-12);
    overload_free(o);
    ev_loop_destroy(loop);
}

/* A node twice as fast as the host starves on its CPU time alone, without
 * any run-queue delay: every command needed dilation 2 (10 ms of CPU for a
 * 5 ms budget), whose bin floor(ln 2 / ln 1.05) = 14 has the upper edge
 * 1.05^15, not the 1 of a command that needed nothing. */
static void test_starved_without_delay(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    int fast = overload_add_node(o, "n", "fast", 2, true);
    for (int i = 0; i < 10; i++)
        note_delay(o, fast, 10, 10, 0, true, true);
    struct overload_report r;
    overload_report(o, 1, &r);
    CHECK(r.starved == 10 && r.limited);
    CHECK_MSG(fabs(r.stretch_p95 - pow(1.05, 15)) < 1e-12, "p95 %.17g", r.stretch_p95);
    overload_free(o);
    ev_loop_destroy(loop);
}

/* The verdict from fixed counts, the run's compute filling compute_share
 * of the cores. */
static struct overload_report judged_share(double dilation, double overrun_share,
                                           double starved_share, double cpu_demand, double need_p95,
                                           double compute_share)
{
    struct overload_report r = {.dilation = dilation,
                                .overrun_share = overrun_share,
                                .starved_share = starved_share,
                                .cpu_demand = cpu_demand,
                                .compute_share = compute_share};
    overload_judge(&r, need_p95);
    return r;
}

/* ... filling half the cores: starvation is the run's own. */
static struct overload_report judged(double dilation, double overrun_share, double starved_share,
                                     double cpu_demand, double need_p95)
{
    return judged_share(dilation, overrun_share, starved_share, cpu_demand, need_p95, 0.5);
}

static void test_judge(void)
{
    /* The incast run: 64 workers at speed 1 on 16 cores, 90% of the compute
     * commands late behind the network, 2% starved: waiting, not CPU-limited. */
    struct overload_report r = judged(1, 0.9, 0.02, 4, 1);
    CHECK(!r.limited && r.waited && r.suggested_dilation == 1 && r.stretch_p95 == 1);
    /* Starved, and the stretch asks for 750: the CPU demand bounds it at 4 * 1.25. */
    r = judged(1, 0.6, 0.5, 4, 600);
    CHECK(r.limited && !r.waited && r.stretch_p95 == 600 && r.suggested_dilation == 5);
    /* Demand below the run's dilation: 8 * 1.5 * 1.25 = 15 against 8 * 1.25 -> 10. */
    r = judged(8, 0.3, 0.3, 2, 12);
    CHECK(r.limited && r.stretch_p95 == 1.5 && r.suggested_dilation == 10);
    /* A small stretch under a large demand: 2 * 1.25 -> 3 against 10. */
    r = judged(1, 0.2, 0.2, 8, 2);
    CHECK(r.limited && r.suggested_dilation == 3);
    /* 5% exactly is not over the line, for either verdict. */
    r = judged(1, 0.05, 0.05, 8, 2);
    CHECK(!r.limited && !r.waited && r.suggested_dilation == 1);
    /* Needed dilations under the run's own: the stretch is 1. */
    r = judged(4, 0.1, 0.1, 1, 3);
    CHECK(r.limited && r.stretch_p95 == 1 && r.suggested_dilation == 5);
    /* The quickstart under other programs' load: 20% starved while its
     * compute filled 1% of the cores: latency, no dilation, no warning. */
    r = judged_share(1, 0.2, 0.2, 3, 26, 0.01);
    CHECK(!r.limited && r.latency && !r.waited && r.suggested_dilation == 1);
    /* Just at the line (10% of the cores) the starvation is the run's own;
     * an unknown share (-1) too. */
    CHECK(judged_share(1, 0.2, 0.2, 3, 26, 0.1).limited);
    CHECK(judged_share(1, 0.2, 0.2, 3, 26, -1).limited);
    char line[512];
    r = judged_share(1, 0.2, 0.2, 3, 26, 0.01);
    r.host_cpu_saturation = 1;
    CHECK(overload_warning(&r, line, sizeof line));
    CHECK(strcmp(line, "note: 20% of compute commands were late behind other threads while this "
                       "run's compute used 1.0% of the host's cores: others' load and scheduling "
                       "latency, which dilation would not cure (host 100% busy)") == 0);
}

/* The stretch percentile and suggested_dilation for fixed inputs, each
 * worked out by hand from the rule of docs/lua-api.md "Overload" (bins of
 * 1.05, the p95's bin's upper edge; x dilation x 1.25 rounded up, bounded by
 * the CPU demand: max(dilation, demand) x 1.25 rounded up): a change of the
 * bin width, the percentile, the margin or the rounding moves one of them. */
static void test_suggested_exact(void)
{
    static const struct {
        double dilation;
        int on_time, overran;
        double stretch; /* of each overrun: ms / cpu_ms, the dilation it needed */
        double need_p95, by_stretch;
    } cases[] = {
        /* 10 of 100 at 2.5: bin 18 (ln 2.5 / ln 1.05 = 18.78), p95 1.05^19 = 2.5270;
         * 2.5270 * 1.25 = 3.159 -> 4 */
        {1, 90, 10, 2.5, 2.5269501953756404, 4},
        /* 30 of 100 at 10: bin 47 (47.19), 1.05^48 = 10.401, 10.401 * 1.25 = 13.0 -> 14 */
        {3, 70, 30, 10, 10.401269646942131, 14},
        /* 6 of 100 overran by 3%: needed 1.05, under the run's 5: 5 * 1.25 = 6.25 -> 7 */
        {5, 94, 6, 1.03, 1.05, 7},
        /* 5 of 100 exactly: not above 5%, not limited: the run's dilation */
        {2, 95, 5, 8, 0, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
        struct overload *o = overload_new(loop);
        int n = overload_add_node(o, "n", "x", 1, true);
        for (int i = 0; i < cases[c].on_time; i++)
            note(o, n, 10, 10, false);
        for (int i = 0; i < cases[c].overran; i++)
            note(o, n, 10 * cases[c].stretch, 10, true);
        struct overload_report r;
        double d = cases[c].dilation;
        overload_report(o, d, &r);
        double want = d;
        if (cases[c].need_p95 > 0) {
            double stretch = cases[c].need_p95 > d ? cases[c].need_p95 / d : 1;
            CHECK_MSG(fabs(r.stretch_p95 - stretch) < 1e-9, "case %zu: p95 %.17g, want %.17g", c,
                      r.stretch_p95, stretch);
            /* bounded by the CPU demand: max(dilation, demand) x 1.25, rounded up */
            double by_demand = ceil((r.cpu_demand > d ? r.cpu_demand : d) * 1.25);
            want = cases[c].by_stretch < by_demand ? cases[c].by_stretch : by_demand;
        }
        CHECK_MSG(r.suggested_dilation == want, "case %zu: suggested %g, want %g", c,
                  r.suggested_dilation, want);
        overload_free(o);
        ev_loop_destroy(loop);
    }
}

/* overload_choose: the automatic dilation from a probe window, exactly. */
static struct overload_auto choose_share(uint64_t commands, uint64_t starved, double need_p95,
                                         double demand, double compute_share)
{
    struct overload_report w = {.dilation = 1,
                                .host_cores = 2,
                                .commands = commands,
                                .starved = starved,
                                .starved_share = (double)starved / (double)commands,
                                .cpu_demand = demand,
                                .compute_share = compute_share,
                                .host_cpu_saturation = 0.5};
    struct overload_auto c;
    /* Whatever the caller's struct held, the choice is the compute window's
     * alone: no data-plane figures (they once leaked into run.json). */
    memset(&c, 0xa5, sizeof c);
    overload_choose(&w, need_p95, 1.25, &c);
    CHECK(!c.dataplane && c.dp.samples == 0 && c.dp.active_s == 0);
    return c;
}

/* ... its compute filling half the cores. */
static struct overload_auto choose(uint64_t commands, uint64_t starved, double need_p95,
                                   double demand)
{
    return choose_share(commands, starved, need_p95, demand, 0.5);
}

static void test_auto_choice(void)
{
    struct overload_auto c = choose(40, 0, 1, 0.5);
    CHECK(c.dilation == 1 && c.window_s == 1.25);
    CHECK(strcmp(c.reason, "40 compute commands in 1.2 s: 0.0% starved of CPU, their compute "
                           "50.0% of the cores (host 50% busy, CPU demand 0.50 per core): the "
                           "host keeps up") == 0);
    CHECK(choose(40, 1, 1, 3).dilation == 1);      /* one starved command is noise (2.5%) */
    CHECK(choose(100, 2, 1, 3).dilation == 1);     /* 2% is not above 2% */
    CHECK(choose(100, 3, 1, 3).dilation == 2);     /* p95 not starved: the margin's least */
    CHECK(choose(100, 10, 3, 4).dilation == 4);    /* ceil(3 x 1.25) under ceil(4 x 1.25) */
    CHECK(choose(100, 10, 10, 2).dilation == 3);   /* the demand bounds it: ceil(2 x 1.25) */
    CHECK(choose(100, 50, 10, 0.5).dilation == 2); /* demand under a core: at least 2 */
    /* Starved while the compute filled 2% of the cores: others' load. */
    c = choose_share(100, 60, 30, 3, 0.02);
    CHECK(c.dilation == 1 && strstr(c.reason, "others' load and scheduling latency"));
    c = choose(100, 10, 3, 4);
    CHECK(strstr(c.reason, "10.0% starved of CPU") && strstr(c.reason, "p95 needed 3.00x") &&
          strstr(c.reason, "dilation 4"));
}

/* The data plane's verdict and choice (overload_judge_dataplane,
 * overload_choose_dataplane), exactly. */
static struct overload_dataplane dataplane(double util, double busy, double own)
{
    return (struct overload_dataplane){.samples = 3,
                                       .active_s = 3,
                                       .link_utilization = util,
                                       .link_utilization_rounds = util,
                                       .host_busy = busy,
                                       .own_cores = own,
                                       .host_cores = 2};
}

static void test_dataplane_judge(void)
{
    struct overload_dataplane dp = dataplane(0.4, 0.95, 1.0);
    overload_judge_dataplane(&dp, 1);
    CHECK(dp.limited && dp.suggested_dilation == 4); /* ceil(1 x 1.5 / 0.4) */
    dp = dataplane(0.04, 1, 1.1);
    overload_judge_dataplane(&dp, 1);
    CHECK(dp.limited && dp.suggested_dilation == 38); /* ceil(1.5 / 0.04) */
    dp = dataplane(0.8, 0.9, 0.6);
    overload_judge_dataplane(&dp, 4);
    CHECK(dp.limited && dp.suggested_dilation == 8); /* ceil(4 x 1.5 / 0.8): the run's D scales */
    dp = dataplane(0, 1, 1);
    overload_judge_dataplane(&dp, 1);
    CHECK(dp.limited && dp.suggested_dilation == 150); /* nothing carried: as if 1% */
    dp = dataplane(0.075, 0.845, 1.5); /* the run's data plane took 3/4 of the cores */
    overload_judge_dataplane(&dp, 1);
    CHECK(dp.limited && dp.suggested_dilation == 20);
    dp = dataplane(0.5, 0.3, 0.9); /* a host of many cores, one linkd at its core's limit */
    dp.linkd_busy = 0.95;
    overload_judge_dataplane(&dp, 1);
    CHECK(dp.limited && dp.suggested_dilation == 3);
    dp = dataplane(0.0001, 1, 1);
    overload_judge_dataplane(&dp, 100);
    CHECK(dp.suggested_dilation == 1000); /* at most HN_DILATION_MAX */
    /* What keeps the run's dilation: links at their rate, a host with room,
     * a data plane that costs little, no rated link, no active sample. */
    const struct overload_dataplane kept[] = {
        dataplane(0.9, 1, 2),    dataplane(0.5, 0.84, 0.99),
        dataplane(0.5, 1, 0.59), dataplane(-1, 1, 2),
        dataplane(0.5, -1, 0.9), {.link_utilization = 0.5, .host_busy = 1, .own_cores = 2},
    };
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
        dp = kept[i];
        overload_judge_dataplane(&dp, 2);
        CHECK_MSG(!dp.limited && dp.suggested_dilation == 2, "case %zu", i);
    }
}

static void test_dataplane_choice(void)
{
    struct overload_dataplane w = dataplane(0.5, 0.99, 1.2);
    struct overload_auto c;
    overload_choose_dataplane(&w, 1, &c);
    CHECK(c.dataplane && c.dilation == 3 && c.window_s == 3 && c.dp.limited);
    CHECK(strcmp(c.reason,
                 "data plane, 3 samples in 3.0 s: the busiest link carried 50% of its "
                 "rate while busy (50% over whole samples), host 99% busy, the run's data "
                 "plane 1.20 cores (busiest linkd 0%, a linkd waited 0% of the time for a core, "
                 "queues up to 0 frames): the "
                 "host cannot forward it; dilation 3 "
                 "gives it room") == 0);
    w = dataplane(0.97, 1, 0.4);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(c.dilation == 1 && strstr(c.reason, ": the links keep their rate"));
    CHECK(!c.test);
    /* Links a little short of their rate that the CPU shares would keep stay
     * at D = 1; far short (under OVERLOAD_DP_TEST_BELOW) they are tested at
     * ceil(1.5 / 0.2) instead (test_dataplane_test). */
    w = dataplane(0.3, 0.5, 0.4);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(!c.test && c.dilation == 1 && strstr(c.reason, "the host's CPU has room"));
    w = dataplane(0.2, 0.7, 0.4);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(c.test && c.dilation == 8 && strstr(c.reason, "the host's CPU has room"));
    /* ... but not on a host with room to spare (OVERLOAD_DP_TEST_HOST_BUSY),
     * nor when the run's data plane was a small load (a compute-bound run
     * whose links idle: OVERLOAD_DP_TEST_OWN_CORES). */
    w = dataplane(0.05, 0.5, 0.4);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(!c.test && c.dilation == 1);
    w = dataplane(0.05, 0.95, 0.2);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(!c.test && c.dilation == 1);
    w = dataplane(0.3, 1, 0.05);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(!c.test && c.dilation == 1 && strstr(c.reason, "the host is busy with other programs"));
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    overload_write_dataplane_json(f, &c.dp);
    fclose(f);
    CHECK_MSG(strcmp(buf,
                     "{\"samples\": 3, \"active_s\": 3, \"link_utilization\": 0.29999999999999999, "
                     "\"link_utilization_rounds\": 0.29999999999999999, \"host_busy\": 1, "
                     "\"own_cores\": 0.050000000000000003, \"linkd_busy\": 0, "
                     "\"linkd_wait\": 0, \"queue_peak\": 0, "
                     "\"limited\": false, \"starved\": false, "
                     "\"suggested_dilation\": 1}") == 0,
              "%s", buf);
}

/* A rerun's window, judged at its dilation: the share of rate / D it
 * carried there sets the next D (OVERLOAD_AUTO_RERUNS bounds how often). */
static void test_dataplane_rerun_choice(void)
{
    /* 32 workers at 100 Gbit/s: D = 34 from the first probe, whose links
     * then carried 75% of rate / 34 on a saturated host. */
    struct overload_dataplane w = dataplane(0.75, 0.9, 1.1);
    struct overload_auto c;
    overload_choose_dataplane(&w, 34, &c);
    CHECK_MSG(c.dataplane && c.dp.limited && c.dilation == 68, "%g", c.dilation);
    CHECK_MSG(strcmp(c.reason,
                     "data plane at dilation 34, 3 samples in 3.0 s: the busiest link carried 75% "
                     "of its rate / D while busy (75% over whole samples), host 90% busy, the "
                     "run's data plane 1.10 cores (busiest "
                     "linkd 0%, a linkd waited 0% of the time for a core, queues up to 0 frames): "
                     "the host cannot forward "
                     "it; dilation 68 gives it room") == 0,
              "%s", c.reason);
    /* Links at their rate / D keep the rerun's D, and so does a host with
     * room: the choice never goes below the run's own dilation. */
    w = dataplane(0.95, 1, 1.5);
    overload_choose_dataplane(&w, 34, &c);
    CHECK(!c.dp.limited && c.dilation == 34 && strstr(c.reason, ": the links keep their rate"));
    w = dataplane(0.5, 0.6, 0.7);
    overload_choose_dataplane(&w, 34, &c);
    CHECK(!c.dp.limited && c.dilation == 34 && strstr(c.reason, "the host's CPU has room"));
    /* A dilation under 1 is judged at 1 (the first run's wording). */
    w = dataplane(0.5, 0.99, 1.2);
    overload_choose_dataplane(&w, 0.5, &c);
    CHECK(c.dilation == 3 && strncmp(c.reason, "data plane, 3 samples", 21) == 0);
}

/* The hypothesis test (OVERLOAD_DP_RISE): the two 8-worker ResNet-50 runs
 * at 100 Gbit/s that the CPU shares kept at D = 1 (Cu 13.2x and 20.3x its
 * bound) now rerun at the limited verdict's dilation, and that rerun's
 * share of rate / D decides. */
static void test_dataplane_test(void)
{
    /* (a) 6% carried, host 66% busy, 0.65 cores, busiest linkd 52%. */
    struct overload_dataplane w = dataplane(0.06, 0.66, 0.65);
    w.linkd_busy = 0.52;
    struct overload_auto c;
    overload_choose_dataplane(&w, 1, &c);
    CHECK_MSG(c.test && !c.dp.limited && c.dilation == 25 && c.base_dilation == 1 &&
                  c.base_utilization == 0.06,
              "test %d dilation %g", c.test, c.dilation);
    CHECK_MSG(strcmp(c.reason,
                     "data plane, 3 samples in 3.0 s: the busiest link carried 6% of its rate "
                     "while busy (6% over whole samples), host 66% busy, the run's data plane 0.65 "
                     "cores (busiest linkd 52%, a linkd waited 0% of the time for a core, queues "
                     "up to 0 frames): the CPU "
                     "shares would keep D (the host's CPU has room, so the links' shortfall is "
                     "the emulation's own (windows, queues, loss)); dilation 25 tests whether "
                     "the host was the limit") == 0,
              "%s", c.reason);
    /* (b) 2% carried, host 100% busy, the run's data plane 0.36 cores. */
    w = dataplane(0.02, 1, 0.36);
    overload_choose_dataplane(&w, 1, &c);
    CHECK(c.test && c.dilation == 75 && strstr(c.reason, "busy with other programs"));
    /* Only the first run tests: a rerun's window keeps its D as before. */
    overload_choose_dataplane(&w, 25, &c);
    CHECK(!c.test && c.dilation == 25);
    /* Rose at the tested D: the host was the limit, D stays. */
    w = dataplane(0.8, 0.5, 0.5);
    overload_choose_tested(&w, 25, 1, 0.06, &c);
    CHECK_MSG(!c.test && c.dilation == 25 && c.base_dilation == 1, "%g", c.dilation);
    CHECK_MSG(strstr(c.reason, "data plane at dilation 25, 3 samples") &&
                  strstr(c.reason, ": up from 6% at dilation 1, so the host was the limit; "
                                   "dilation 25"),
              "%s", c.reason);
    /* Rose but still short on a saturated host: the limited verdict's step. */
    w = dataplane(0.5, 0.95, 1.0);
    overload_choose_tested(&w, 25, 1, 0.06, &c);
    CHECK_MSG(c.dilation == 75 && strstr(c.reason, "still short: dilation 75"), "%g %s", c.dilation,
              c.reason);
    /* No material rise: the emulation's own shortfall, back to D = 1. */
    w = dataplane(0.08, 0.9, 1.0);
    overload_choose_tested(&w, 25, 1, 0.06, &c);
    CHECK_MSG(c.dilation == 1 && strstr(c.reason, ": no material rise from 6% at dilation 1, so "
                                                  "the shortfall is the emulation's own: "
                                                  "dilation 1"),
              "%g %s", c.dilation, c.reason);
    w.samples = 0; /* no active sample at the tested D: no rise shown */
    w.link_utilization = -1;
    overload_choose_tested(&w, 25, 1, 0.06, &c);
    CHECK(c.dilation == 1);
}

static void test_dp_rose(void)
{
    CHECK(!overload_dp_rose(0.06, 0.12)); /* doubled, but not by 0.1 */
    CHECK(overload_dp_rose(0.06, 0.17));
    CHECK(!overload_dp_rose(0.3, 0.59)); /* by 0.1, but not doubled */
    CHECK(overload_dp_rose(0.3, 0.61));
    CHECK(overload_dp_rose(0.5, 0.9)); /* its rate kept: risen whatever the base */
    CHECK(!overload_dp_rose(0.5, 0.89));
    CHECK(!overload_dp_rose(0.1, -1));
}

struct probe_calls {
    int calls;
    struct overload_auto last;
};

static void on_probe(void *ctx, const struct overload_auto *choice)
{
    struct probe_calls *p = ctx;
    p->calls++;
    p->last = *choice;
}

/* A rerun's probe: the data plane's window alone, judged at the run's D;
 * compute replies open no window. */
static void test_rerun_probe(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    struct probe_calls calls = {0};
    overload_probe_arm_dataplane(o, on_probe, &calls, 34);
    int id = overload_add_node(o, "n", "w1", 1, true);
    for (int i = 0; i < 2 * OVERLOAD_PROBE_COMMANDS; i++)
        note(o, id, 40, 5, true); /* all starved: a compute window would dilate */
    struct overload_auto open;
    CHECK(calls.calls == 0 && !overload_probe_open(o, &open));
    /* 55.5% of rate / D carried while the run's data plane took more cores
     * than any host has: saturated by the run itself, whatever /proc/stat says. */
    struct overload_links s = {.wall_s = 1, .util_max = 0.555, .own_cpu_s = 4096};
    for (int i = 0; i < OVERLOAD_DP_PROBE_SAMPLES + 2; i++)
        overload_note_links(o, &s);
    /* ceil(34 x 1.5 / 0.555), the share's bin's middle. */
    CHECK_MSG(calls.calls == 1 && calls.last.dataplane && calls.last.dilation == 92,
              "%d calls, dilation %g", calls.calls, calls.last.dilation);
    overload_free(o);
    ev_loop_destroy(loop);
}

/* A tested rerun's probe: the window at D = 25 against the first's share. */
static void test_tested_probe(void)
{
    const double base[] = {0.06, 0.5};
    const double want[] = {68, 1}; /* ceil(25 x 1.5 / 0.555): risen; no rise: back to 1 */
    for (int k = 0; k < 2; k++) {
        struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
        struct overload *o = overload_new(loop);
        struct probe_calls calls = {0};
        overload_probe_arm_tested(o, on_probe, &calls, 25, 1, base[k]);
        struct overload_links s = {.wall_s = 1, .util_max = 0.555, .own_cpu_s = 4096};
        for (int i = 0; i < OVERLOAD_DP_PROBE_SAMPLES + 2; i++)
            overload_note_links(o, &s);
        CHECK_MSG(calls.calls == 1 && calls.last.dilation == want[k] && !calls.last.test,
                  "base %g: %d calls, dilation %g", base[k], calls.calls, calls.last.dilation);
        overload_free(o);
        ev_loop_destroy(loop);
    }
}

/* A share far past the last bin (a link of a few bit/s that carried a
 * burst) lands in the last bin: the bin is clamped before the cast to int. */
static void test_dataplane_huge_share(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct overload *o = overload_new(loop);
    struct overload_links s = {.wall_s = 1, .util_max = 1e300};
    overload_note_links(o, &s);
    struct overload_report r;
    overload_report(o, 1, &r);
    CHECK_MSG(r.dataplane.samples == 1 && fabs(r.dataplane.link_utilization - 1.995) < 1e-9,
              "%llu samples, utilization %g", (unsigned long long)r.dataplane.samples,
              r.dataplane.link_utilization);
    overload_free(o);
    ev_loop_destroy(loop);
}

int main(void)
{
    test_budget();
    test_link_dilate();
    test_account();
    test_demand();
    test_starved_without_delay();
    test_judge();
    test_suggested_exact();
    test_auto_choice();
    test_dataplane_judge();
    test_dataplane_choice();
    test_dataplane_rerun_choice();
    test_dataplane_test();
    test_dp_rose();
    test_tested_probe();
    test_rerun_probe();
    test_dataplane_huge_share();
    return check_report();
}
