/* test_linkd_stalls.c — hiernet-linkd's stall account
 * (controller/linkd_stalls.h), exactly: the threshold from a network's
 * hosts (their rto_min x the dilation, the kernel's 200 ms, switches
 * ignored), which readings are stalls, the counts and the kept list, the
 * JSON and the note; and the overload report carrying them. */
#include "check.h"
#include "controller/linkd_stalls.h"
#include "controller/overload.h"
#include "topo/network.h"
#include "topo/tcp.h"

#include <ev.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_threshold(void)
{
    char err[256];
    struct topo_network *net = topo_network_new("s", TOPO_BACKEND_NONE, 1, err, sizeof err);
    CHECK_MSG(net != NULL, "%s", err);
    if (!net) return;
    CHECK(linkd_stall_threshold(net) == 0.2); /* no host: the kernel's */
    int a = topo_node_add(net, "a", TOPO_NODE_HOST, err, sizeof err);
    int sw = topo_node_add(net, "sw", TOPO_NODE_SWITCH, err, sizeof err);
    int b = topo_node_add(net, "b", TOPO_NODE_HOST, err, sizeof err);
    CHECK(a >= 0 && sw >= 0 && b >= 0);
    if (a < 0 || sw < 0 || b < 0) return topo_network_free(net);
    CHECK(linkd_stall_threshold(net) == 0.2);
    /* A switch has no TCP: its setting does not count. */
    CHECK(topo_tcp_set_rto_min(&net->nodes[sw].tcp, "5ms", err, sizeof err) == 0);
    CHECK(linkd_stall_threshold(net) == 0.2);
    CHECK(topo_tcp_set_rto_min(&net->nodes[b].tcp, "40ms", err, sizeof err) == 0);
    CHECK_NEAR(linkd_stall_threshold(net), 0.04, 1e-12);
    /* Dilated, the route metric is rto_min x D in real time; the kernel's
     * 200 ms stays 200 ms. */
    net->dilation = 8;
    CHECK_NEAR(linkd_stall_threshold(net), 0.2, 1e-12); /* min(0.32, 0.2) */
    CHECK(topo_tcp_set_rto_min(&net->nodes[a].tcp, "10ms", err, sizeof err) == 0);
    CHECK_NEAR(linkd_stall_threshold(net), 0.08, 1e-12); /* min(0.08, 0.32) */
    topo_network_free(net);
}

static void test_rule(void)
{
    CHECK(linkd_stall_is(0.2, 0.1, 0.2));    /* the threshold itself */
    CHECK(!linkd_stall_is(0.199, 0.1, 0.2)); /* below it */
    CHECK(linkd_stall_is(0.47, 0.5, 0.2));   /* a late reading: still most of it */
    /* A reading 1 s late whose 0.71 s may be many short waits of a linkd
     * that polls: not a stall; nor a punctual reading's 71 ms under a
     * threshold of 8 ms (rto_min 1ms at D = 8). */
    CHECK(!linkd_stall_is(0.71, 1.0, 0.2));
    CHECK(linkd_stall_is(0.8, 1.0, 0.2));
    CHECK(!linkd_stall_is(0.071, 0.1, 0.008));
    CHECK(linkd_stall_is(0.085, 0.1, 0.008));
    CHECK(!linkd_stall_is(1.0, 0.1, 0)); /* nothing watched */
}

static void test_account(void)
{
    struct linkd_stalls s = {0};
    char line[512];
    CHECK(!linkd_stalls_note_line(&s, line, sizeof line)); /* none: no note */
    linkd_stalls_watch(&s, 0.2);
    linkd_stalls_watch(&s, 0.5); /* a second network's: the smaller stays */
    linkd_stalls_watch(&s, 0);   /* nothing: ignored */
    CHECK(s.threshold_wall_s == 0.2);
    linkd_stalls_watch(&s, 0.04);
    CHECK(s.threshold_wall_s == 0.04);
    for (int i = 0; i < LINKD_STALLS_KEPT + 8; i++)
        linkd_stalls_note(&s,
                          &(struct linkd_stall){.at_s = 10.0 + i, .wall_s = i == 3 ? 0.881 : 0.25});
    CHECK(s.count == LINKD_STALLS_KEPT + 8 && s.n_kept == LINKD_STALLS_KEPT);
    CHECK(s.longest_wall_s == 0.881);
    CHECK_NEAR(s.total_wall_s, 0.881 + 0.25 * (LINKD_STALLS_KEPT + 7), 1e-9);
    CHECK(s.kept[0].at_s == 10.0 && s.kept[LINKD_STALLS_KEPT - 1].at_s == 10.0 + 31);
    CHECK(linkd_stalls_note_line(&s, line, sizeof line));
    CHECK_STREQ(line, "note: hiernet-linkd waited for a core 40 times for at least the minimum RTO "
                      "(40 ms; longest 881 ms, the first at 10.00 s): no frame moved on its links "
                      "meanwhile, so flows' timeouts then were the emulation's, not the network's; "
                      "HIERNET_LINKD_PRIORITY=10 runs it at SCHED_FIFO (docs/guide.md)");

    /* Figures exact in binary, as JSON writes every digit. */
    struct linkd_stalls one = {.threshold_wall_s = 0.25};
    /* the run's clock unknown; another machine's */
    linkd_stalls_note(&one, &(struct linkd_stall){.at_s = NAN, .wall_s = 0.375, .machine = "m2"});
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    CHECK(f != NULL);
    if (!f) return;
    linkd_stalls_write_json(f, &one);
    fclose(f);
    CHECK_STREQ(json, "{\"threshold_wall_s\": 0.25, \"count\": 1, \"longest_wall_s\": 0.375, "
                      "\"total_wall_s\": 0.375, \"stalls\": [{\"at_s\": null, \"wall_s\": 0.375, "
                      "\"machine\": \"m2\"}]}");
    free(json);
    CHECK(linkd_stalls_note_line(&one, line, sizeof line));
    CHECK(strstr(line, "1 time for at least") && strstr(line, "(250 ms; longest 375 ms)"));
}

static struct {
    int n;
    struct linkd_stall last;
} seen;

static void on_stall(void *ctx, const struct linkd_stall *st)
{
    (void)ctx;
    seen.n++;
    seen.last = *st;
}

/* The overload account keeps them, and its report and JSON carry them. */
static void test_report(void)
{
    struct overload *o = overload_new(EV_DEFAULT);
    CHECK(o != NULL);
    if (!o) return;
    struct overload_report r;
    overload_report(o, 1, &r);
    CHECK(r.linkd_stalls.count == 0 && r.linkd_stalls.threshold_wall_s == 0);
    overload_watch_stalls(o, 0.25);
    struct linkd_stall st = {.at_s = 3.5, .wall_s = 0.625, .mono_s = 100};
    seen.n = 0;
    overload_on_stall(o, on_stall, &seen); /* an agent's hook sees each one */
    overload_note_stall(o, &st);
    overload_note_stall(NULL, &st); /* no account: nothing */
    CHECK(seen.n == 1 && seen.last.mono_s == 100 && seen.last.wall_s == 0.625);
    overload_report(o, 1, &r);
    CHECK(r.linkd_stalls.count == 1 && r.linkd_stalls.kept[0].at_s == 3.5);
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    CHECK(f != NULL);
    if (f) {
        overload_write_json(f, &r);
        fclose(f);
        CHECK(json &&
              strstr(json, ", \"linkd_stalls\": {\"threshold_wall_s\": 0.25, \"count\": 1, "
                           "\"longest_wall_s\": 0.625, \"total_wall_s\": 0.625, \"stalls\": "
                           "[{\"at_s\": 3.5, \"wall_s\": 0.625, \"machine\": null}]}}"));
        free(json);
    }
    overload_free(o);
}

int main(void)
{
    test_threshold();
    test_rule();
    test_account();
    test_report();
    return check_report();
}
