/* test_underlay_rtt.c — the ICMP echo probe of emu/underlay_rtt.h on the
 * libev loop, in a network namespace of its own (unshare: gone when the
 * test exits): 127.0.0.1 answers within the timeout, through a raw ICMP
 * socket and then through a datagram one; 192.0.2.2 (TEST-NET,
 * routed to a veth whose peer has no address) never answers, and a 10 ms
 * timer keeps firing while the probe waits on it; 203.0.113.1 (no route)
 * fails at once naming the send's error; a probe cancelled before
 * it ran never calls back. */
#include "check.h"
#include "common/clock.h"
#include "emu/nl.h"
#include "emu/underlay_rtt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>

struct result {
    int calls;
    int64_t rtt_ns;
    char error[256];
    int ticks_then; /* the 10 ms timer's ticks when the probe called back */
    double at_s;    /* when it called back */
};

static int ticks;

static void on_probe(void *ctx, int64_t rtt_ns, const char *error)
{
    struct result *r = ctx;
    r->calls++;
    r->rtt_ns = rtt_ns;
    snprintf(r->error, sizeof r->error, "%s", error ? error : "");
    r->ticks_then = ticks;
    r->at_s = mono_s();
}

static void on_tick(EV_P_ ev_timer *w, int revents)
{
    (void)loop, (void)w, (void)revents;
    ticks++;
}

/* lo up, and veth ul-a (192.0.2.1/24, up) to ul-b (up, no address): an
 * echo to 192.0.2.2 leaves and nothing answers it. */
static void netns_setup(void)
{
    char err[256];
    if (unshare(CLONE_NEWNET) < 0) {
        printf("SKIP: no network namespace of its own (unshare: %s)\n", strerror(errno));
        exit(77);
    }
    struct nl_sock *sock = emu_nl_open(err, sizeof err);
    struct emu_nl_veth_end a = {.ns_fd = -1, .name = "ul-a"}, b = {.ns_fd = -1, .name = "ul-b"};
    int ia = -1, ib = -1;
    int rc = sock ? emu_nl_loopback_setup(sock, 0, err, sizeof err) : -1;
    if (rc == 0) rc = emu_nl_veth_add(sock, &a, &b, 0, 1, err, sizeof err);
    if (rc == 0) rc = (ia = emu_nl_link_index(sock, "ul-a", err, sizeof err)) < 0 ? -1 : 0;
    if (rc == 0) rc = (ib = emu_nl_link_index(sock, "ul-b", err, sizeof err)) < 0 ? -1 : 0;
    if (rc == 0) rc = emu_nl_interface_up(sock, ib, "ul-b", 0, 0, err, sizeof err);
    if (rc == 0) rc = emu_nl_addr_add(sock, ia, 0xc0000201, 24, "ul-a", err, sizeof err);
    if (sock) emu_nl_close(sock);
    if (rc < 0) {
        fprintf(stderr, "test_underlay_rtt: namespace setup: %s\n", err);
        exit(1);
    }
}

/* Starts a probe, or skips the test when ICMP sockets are not allowed. */
static struct underlay_rtt *start(struct ev_loop *loop, uint32_t address, int samples,
                                  struct result *r)
{
    char err[256];
    struct underlay_rtt *p =
        underlay_rtt_start(loop, address, samples, on_probe, r, err, sizeof err);
    if (!p) {
        CHECK_CONTAINS(err, "no ICMP socket");
        printf("SKIP: %s\n", err);
        exit(77);
    }
    CHECK(r->calls == 0); /* the answer comes from the loop, never from the call */
    return p;
}

static void test_loopback_answers(struct ev_loop *loop)
{
    struct result r = {0};
    start(loop, 0x7f000001, UNDERLAY_RTT_SAMPLES, &r);
    ev_run(loop, 0);
    CHECK(r.calls == 1);
    CHECK_STREQ(r.error, "");
    CHECK_MSG(r.rtt_ns > 0 && r.rtt_ns < UNDERLAY_RTT_TIMEOUT_NS, "rtt %lld ns",
              (long long)r.rtt_ns);
}

/* Two unanswered echoes: 0.6 s on the loop, during which the 10 ms timer
 * ticks on (the loop is not held). */
static void test_silence_keeps_loop(struct ev_loop *loop)
{
    struct result r = {0};
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.01, 0.01);
    ev_timer_start(loop, &tick);
    ticks = 0;
    double t0 = mono_s();
    start(loop, 0xc0000202, 2, &r);
    while (r.calls == 0)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
    CHECK(r.calls == 1);
    CHECK_CONTAINS(r.error, "underlay 192.0.2.2: no answer to 2 ICMP echoes");
    CHECK_MSG(r.at_s - t0 >= 2 * UNDERLAY_RTT_TIMEOUT_NS / 1e9 - 0.01, "ended after %.3f s",
              r.at_s - t0);
    CHECK_MSG(r.at_s - t0 < 3.0, "ended after %.3f s", r.at_s - t0);
    /* ~60 expected; 20 leaves room for a loaded host, a held loop gives 0 or 1. */
    CHECK_MSG(r.ticks_then >= 20, "%d ticks of 10 ms while the probe waited", r.ticks_then);
}

/* 203.0.113.1 (TEST-NET-3) has no route here: every send fails at once,
 * and the error says so rather than "no answer". */
static void test_no_route(struct ev_loop *loop)
{
    struct result r = {0};
    double t0 = mono_s();
    start(loop, 0xcb007101, 2, &r);
    while (r.calls == 0)
        ev_run(loop, EVRUN_ONCE);
    CHECK(r.calls == 1);
    CHECK_CONTAINS(r.error, "underlay 203.0.113.1: no ICMP echo could be sent: ");
    CHECK_CONTAINS(r.error, strerror(ENETUNREACH));
    CHECK_MSG(r.at_s - t0 < UNDERLAY_RTT_TIMEOUT_NS / 1e9, "ended after %.3f s", r.at_s - t0);
}

static void on_stop(EV_P_ ev_timer *w, int revents)
{
    (void)w, (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void test_cancel(struct ev_loop *loop)
{
    struct result r = {0};
    underlay_rtt_cancel(start(loop, 0x7f000001, UNDERLAY_RTT_SAMPLES, &r));
    underlay_rtt_cancel(NULL);
    ev_timer stop;
    ev_timer_init(&stop, on_stop, 0.1, 0.);
    ev_timer_start(loop, &stop);
    ev_run(loop, 0);
    CHECK(r.calls == 0);
}

/* A new namespace's ping_group_range is "1 0" (none): the probe above used
 * a raw socket. Every group allowed, it takes the datagram ICMP socket,
 * whose echo id is the kernel's. */
static void test_loopback_dgram(struct ev_loop *loop)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ping_group_range", "w");
    bool set = f && fputs("0 2147483647\n", f) >= 0;
    if (f && fclose(f) != 0) set = false;
    if (!set) {
        printf("note: ping_group_range not writable: the datagram socket is not tested\n");
        return;
    }
    test_loopback_answers(loop);
}

int main(void)
{
    netns_setup();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    CHECK(loop != NULL);
    if (!loop) return check_report();
    test_loopback_answers(loop);
    test_loopback_dgram(loop);
    test_silence_keeps_loop(loop);
    test_no_route(loop);
    test_cancel(loop);
    ev_loop_destroy(loop);
    return check_report();
}
