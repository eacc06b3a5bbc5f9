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

#include <math.h>
#include <msgpack.h>

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
    p.rate_bps = 3;
    topo_link_params_dilate(&p, 1000, &d);
    CHECK(d.rate_bps == 1); /* never 0, which would mean unlimited */
    p.rate_bps = 0;
    topo_link_params_dilate(&p, 8, &d);
    CHECK(d.rate_bps == 0);
}

/* A compute reply as a peer packs it: {ms, cpu_ms, queue_ms, overrun}. */
static void note(struct overload *o, int id, double ms, double cpu_ms, bool overrun)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    msgpack_pack_str_with_body(&pk, "ms", 2);
    msgpack_pack_double(&pk, ms);
    msgpack_pack_str_with_body(&pk, "cpu_ms", 6);
    msgpack_pack_double(&pk, cpu_ms);
    msgpack_pack_str_with_body(&pk, "queue_ms", 8);
    msgpack_pack_double(&pk, 0);
    msgpack_pack_str_with_body(&pk, "overrun", 7);
    overrun ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, buf.data, buf.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    overload_note_reply(o, id, &u.data, true);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&buf);
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
    /* a: 10 on time. b (speed 0.5): 8 on time, 2 overran 4x (ms 40 for 5 ms cpu / 0.5). */
    for (int i = 0; i < 10; i++)
        note(o, a, 10, 10, false);
    for (int i = 0; i < 8; i++)
        note(o, b, 10, 5, false);
    for (int i = 0; i < 2; i++)
        note(o, b, 40, 5, true);
    overload_report(o, 2, &r);
    CHECK(r.commands == 20 && r.overruns == 2);
    CHECK_NEAR(r.overrun_share, 0.1, 1e-12);
    CHECK_STREQ(r.worst_node, "b");
    CHECK_NEAR(r.worst_node_overrun_share, 0.2, 1e-12);
    CHECK(r.limited);
    /* The two overruns' stretch 4 falls in bin floor(ln 4 / ln 1.05) = 28, whose
     * upper edge 1.05^29 = 4.1161 is the p95 (18 of 20 commands on time are
     * below 95%); suggested = ceil(2 * 4.1161 * 1.25) = ceil(10.29) = 11. */
    CHECK_MSG(fabs(r.stretch_p95 - pow(1.05, 29)) < 1e-12, "p95 %.17g", r.stretch_p95);
    CHECK_MSG(r.suggested_dilation == 11, "suggested %g", r.suggested_dilation);
    char line[512];
    CHECK(overload_warning(&r, line, sizeof line));
    CHECK_CONTAINS(line, "this run was limited by the host's CPU: 10% of compute commands overran; "
                         "use fewer nodes, lower speeds, or dilation = 1");
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    overload_write_json(f, &r);
    fclose(f);
    CHECK_CONTAINS(json, "\"commands\": 20, \"overruns\": 2, \"overrun_share\": 0.1");
    CHECK_CONTAINS(json, "\"worst_node\": \"b\"");
    CHECK_CONTAINS(json, "\"limited\": true}");
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
    overload_free(o);
    ev_loop_destroy(loop);
}

/* suggested_dilation for fixed inputs, each worked out by hand from the rule
 * of docs/lua-api.md "Overload" (bins of 1.05, the p95's bin's upper edge,
 * x dilation x 1.25, rounded up): a change of the bin width, the percentile,
 * the margin or the rounding moves at least one of them. */
static void test_suggested_exact(void)
{
    static const struct {
        double dilation;
        int on_time, overran;
        double stretch; /* of each overrun: ms / (cpu_ms / speed) */
        double p95, suggested;
    } cases[] = {
        /* 10 of 100 at 2.5: bin 18 (ln 2.5 / ln 1.05 = 18.78), p95 1.05^19 = 2.5270,
         * 1 * 2.5270 * 1.25 = 3.159 -> 4 */
        {1, 90, 10, 2.5, 2.5269501953756404, 4},
        /* 30 of 100 at 10: bin 47 (47.19), 1.05^48 = 10.401, 3 * 10.401 * 1.25 = 39.0 -> 40 */
        {3, 70, 30, 10, 10.401269646942131, 40},
        /* 6 of 100 overran by 3%: bin 0, p95 1, 5 * 1 * 1.25 = 6.25 -> 7 */
        {5, 94, 6, 1.03, 1, 7},
        /* 5 of 100 exactly: not above 5%, not limited: the run's dilation */
        {2, 95, 5, 8, 1, 2},
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
        overload_report(o, cases[c].dilation, &r);
        if (cases[c].suggested != cases[c].dilation) {
            CHECK_MSG(fabs(r.stretch_p95 - cases[c].p95) < 1e-9, "case %zu: p95 %.17g, want %.17g",
                      c, r.stretch_p95, cases[c].p95);
        }
        CHECK_MSG(r.suggested_dilation == cases[c].suggested, "case %zu: suggested %g, want %g", c,
                  r.suggested_dilation, cases[c].suggested);
        overload_free(o);
        ev_loop_destroy(loop);
    }
}

int main(void)
{
    test_budget();
    test_link_dilate();
    test_account();
    test_suggested_exact();
    return check_report();
}
