/* test_parts_underlay.c — a spread build's underlay pairs
 * (controller/parts_underlay.h) when a machine is listed by name: its
 * address is unknown until its agent's hello, so its pair with this
 * machine cannot begin. That pair must not count as this machine's
 * unsettled round trips (parts_underlay_machine_begun_done: the agents
 * start once those are measured; counting it held the start until
 * HIERNET_BUILD_TIMEOUT), yet this machine's part still waits for it
 * (parts_underlay_machine_done), and it is measured from here once the
 * address is known. The echoes go to 127.0.0.1 in a network namespace of
 * the test's own (unshare: gone when it exits). */
#include "check.h"
#include "controller/parts_underlay.h"
#include "emu/nl.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

static char err[512];
static int pairs_seen;

static void on_pair(void *ctx, struct parts_underlay *u, size_t a, size_t b, const char *error)
{
    (void)ctx, (void)u, (void)a, (void)b;
    CHECK_MSG(!error, "%s", error ? error : "");
    pairs_seen++;
}

static void on_give_up(EV_P_ ev_timer *w, int revents)
{
    (void)w, (void)revents;
    ev_break(EV_A_ EVBREAK_ALL);
}

/* Runs the loop until `want` pairs were told, or 5 s. */
static void run_until(struct ev_loop *loop, int want)
{
    ev_timer give_up;
    ev_timer_init(&give_up, on_give_up, 5, 0);
    ev_timer_start(loop, &give_up);
    while (pairs_seen < want && ev_run(loop, EVRUN_ONCE))
        if (!ev_is_active(&give_up)) break;
    ev_timer_stop(loop, &give_up);
    CHECK_MSG(pairs_seen == want, "%d pairs measured, wanted %d", pairs_seen, want);
}

static void netns_setup(void)
{
    if (unshare(CLONE_NEWNET) < 0) {
        printf("SKIP: no network namespace of its own (unshare: %s)\n", strerror(errno));
        exit(77);
    }
    struct nl_sock *sock = emu_nl_open(err, sizeof err);
    int rc = sock ? emu_nl_loopback_setup(sock, 0, err, sizeof err) : -1;
    if (sock) emu_nl_close(sock);
    if (rc < 0) {
        printf("SKIP: loopback not up in the test's namespace: %s\n", err);
        exit(77);
    }
}

/* a (m1, this machine) -- b (m2, an IPv4 address) and a -- c (m3, a name). */
static struct topo_network *star(void)
{
    struct topo_network *net = topo_network_new("star", TOPO_BACKEND_KERNEL, 1, err, sizeof err);
    const char *names[3] = {"a", "b", "c"}, *hosts[3] = {"m1", "m2", "m3"};
    for (int i = 0; net && i < 3; i++) {
        int n = topo_node_add(net, names[i], TOPO_NODE_HOST, err, sizeof err);
        CHECK_MSG(n == i, "%s", err);
        snprintf(net->nodes[i].host, sizeof net->nodes[i].host, "%s", hosts[i]);
    }
    struct topo_link_params p = {.rate_bps = 100000000, .delay_ns = 5000000};
    for (int i = 1; net && i < 3; i++)
        CHECK_MSG(topo_link_add(net, 0, i, &p, err, sizeof err) >= 0, "%s", err);
    return net;
}

int main(void)
{
    netns_setup();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct topo_network *net = star();
    struct topo_machines machines = {0};
    struct topo_placement placement = {0};
    CHECK(topo_machines_add(&machines, "m1", "10.250.0.1", 1, err, sizeof err) == 0);
    CHECK(topo_machines_add(&machines, "m2", "10.250.0.2", 1, err, sizeof err) == 0);
    CHECK(topo_machines_add(&machines, "m3", "node-m3", 1, err, sizeof err) == 0);
    CHECK_MSG(topo_placement_compute(net, &machines, &placement, err, sizeof err) == 0, "%s", err);
    struct agent_client *agent[3] = {NULL, NULL, NULL};
    uint32_t underlay[3] = {0x7f000001, 0x7f000001, 0}; /* the echoes answered here */
    struct parts_underlay_setup setup = {loop, net, &placement, &machines, 0, agent, underlay};
    struct parts_underlay *u = parts_underlay_new(&setup, on_pair, NULL);
    CHECK(u != NULL);
    bool known[3] = {true, true, false}, hello[3] = {false, false, false};
    char names[128];

    /* m1 - m2 begun, m1 - m3 waits for m3's address: only the begun pair holds. */
    CHECK_MSG(parts_underlay_begin(u, &setup, known, hello, err, sizeof err) == 0, "%s", err);
    CHECK(!parts_underlay_machine_begun_done(u, 0) && !parts_underlay_machine_done(u, 0));
    run_until(loop, 1);
    CHECK(parts_underlay_rtt_ns(u, 0, 1) > 0);
    CHECK(parts_underlay_machine_begun_done(u, 0)); /* the agents may start */
    CHECK(!parts_underlay_machine_done(u, 0));      /* m1's part may not be made */
    CHECK(parts_underlay_unmeasured(u, 0, names, sizeof names) == 1);
    CHECK_STREQ(names, "m1 - m3");
    CHECK(parts_underlay_unmeasured(u, 1, names, sizeof names) == 0);
    CHECK_STREQ(names, "");

    /* m3's agent answered hello with its address: the pair is measured from here. */
    known[2] = hello[2] = true;
    underlay[2] = 0x7f000001;
    CHECK_MSG(parts_underlay_begin(u, &setup, known, hello, err, sizeof err) == 0, "%s", err);
    CHECK(!parts_underlay_machine_begun_done(u, 0));
    run_until(loop, 2);
    CHECK(parts_underlay_machine_begun_done(u, 0) && parts_underlay_machine_done(u, 0));
    CHECK(parts_underlay_machine_done(u, 2) && parts_underlay_rtt_ns(u, 0, 2) > 0);
    CHECK(parts_underlay_unmeasured(u, machines.n, names, sizeof names) == 0);

    parts_underlay_free(u);
    topo_placement_free(&placement);
    topo_machines_free(&machines);
    topo_network_free(net);
    ev_loop_destroy(loop);
    return check_report();
}
