/* test_linkd_core.c — unit tests of hiernet-linkd's core, no root needed.
 *
 * The timer heap and the packet pool are tested directly. The pipeline is
 * tested end to end by forwarding between two SOCK_DGRAM socketpairs, which
 * hand out one frame per read() just like a TAP: frames written into "a" come
 * out of "b" with the configured delay, rate, loss, queue and order, and at
 * the opportunities of a Mahimahi schedule. */
#include "check.h"
#include "emu/linkd/ecn.h"
#include "emu/linkd/forward.h"
#include "emu/linkd/pool.h"
#include "emu/linkd/timerq.h"
#include "emu/linkd/underlay.h"
#include "proto/linkd_methods.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <linux/virtio_net.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

void linkd_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- timer heap ---- */

struct item {
    struct linkd_timerq_node node;
    int id;
};

static void test_timerq_order(void)
{
    enum { N = 1000 };
    static struct item items[N];
    struct linkd_timerq q;
    linkd_timerq_init(&q);
    srand(7);
    for (int i = 0; i < N; i++) {
        items[i].id = i;
        linkd_timerq_node_init(&items[i].node);
        /* Few distinct times, so ties are common. */
        CHECK(linkd_timerq_push(&q, &items[i].node, rand() % 50) == 0);
    }
    for (int i = 0; i < N; i += 3)
        linkd_timerq_remove(&q, &items[i].node);
    linkd_timerq_update(&q, &items[1].node, -5);
    int64_t last_at = INT64_MIN;
    int last_id = -1, popped = 0;
    bool ordered = true;
    struct linkd_timerq_node *n;
    while ((n = linkd_timerq_pop(&q))) {
        struct item *it = (struct item *)n;
        if (popped == 0) CHECK(it->id == 1);
        if (n->at < last_at || (n->at == last_at && it->id < last_id && it->id != 1))
            ordered = false;
        last_at = n->at;
        last_id = it->id;
        popped++;
        CHECK(!linkd_timerq_queued(n));
    }
    CHECK(ordered);
    CHECK(popped == N - (N + 2) / 3);
    linkd_timerq_destroy(&q);
}

static void test_pool_limit(void)
{
    struct linkd_pool pool;
    linkd_pool_init(&pool, 600 * 1024);
    struct linkd_packet *a = linkd_pool_get(&pool, true);
    CHECK(a && a->large);
    CHECK(linkd_pool_get(&pool, false) == NULL); /* the large chunk used the budget */
    linkd_pool_put(&pool, a);
    CHECK(linkd_pool_get(&pool, true) == a); /* reused, not reallocated */
    CHECK(pool.in_use == 1);
    linkd_pool_destroy(&pool);
}

/* ---- pipeline over socketpairs ---- */

struct rig {
    struct ev_loop *loop;
    struct linkd ld;
    int a_user, b_user; /* our ends; linkd has the others */
    struct linkd_link *link;
};

static void rig_open(struct rig *r, const struct linkd_params *p)
{
    int sa[2], sb[2];
    char err[256];
    r->loop = ev_loop_new(EVBACKEND_EPOLL);
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sa) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sb) == 0);
    int buf = 8 << 20;
    setsockopt(sa[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    CHECK(linkd_init(&r->ld, r->loop, err, sizeof err) == 0);
    r->a_user = sa[0];
    r->b_user = sb[0];
    r->link =
        linkd_link_add(&r->ld, 1, sa[1], sb[1], p, p, LINKD_OFFLOAD_OFF, NULL, 42, err, sizeof err);
    CHECK_MSG(r->link != NULL, "%s", err);
}

static void rig_close(struct rig *r)
{
    linkd_destroy(&r->ld);
    ev_loop_destroy(r->loop);
    close(r->a_user);
    close(r->b_user);
}

/* Frame `seq` of `len` Ethernet bytes behind a zeroed virtio-net header. */
static void rig_send(struct rig *r, uint32_t seq, size_t len)
{
    unsigned char f[2048] = {0};
    size_t hdr = sizeof(struct virtio_net_hdr);
    memcpy(f + hdr + 14, &seq, sizeof seq);
    CHECK(write(r->a_user, f, hdr + len) == (ssize_t)(hdr + len));
}

/* Runs the loop until `want` frames came out of b or timeout_ns passed;
 * records arrival times and sequence numbers. */
static int rig_collect(struct rig *r, int want, int64_t timeout_ns, int64_t *at, uint32_t *seq)
{
    int got = 0;
    int64_t end = linkd_now() + timeout_ns;
    while (got < want && linkd_now() < end) {
        ev_run(r->loop, EVRUN_NOWAIT);
        unsigned char f[2048];
        while (got < want && read(r->b_user, f, sizeof f) > 0) {
            at[got] = linkd_now();
            memcpy(&seq[got], f + sizeof(struct virtio_net_hdr) + 14, sizeof seq[got]);
            got++;
        }
    }
    return got;
}

static void test_delay(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.delay_ns = 20000000;
    struct rig r;
    rig_open(&r, &p);
    int64_t sent = linkd_now(), at[1];
    uint32_t seq[1];
    rig_send(&r, 0, 100);
    CHECK(rig_collect(&r, 1, 1000000000, at, seq) == 1);
    CHECK_NEAR((at[0] - sent) / 1e6, 20.0, 1.0);
    rig_close(&r);
}

static void test_rate_and_queue(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.rate_bps = 8000000; /* 1 byte per µs */
    p.queue = 5;
    struct rig r;
    rig_open(&r, &p);
    /* 20 back-to-back frames of 976 + 24 = 1000 wire bytes: one goes on the
     * wire, five wait, fourteen are dropped. */
    int64_t sent = linkd_now(), at[20];
    uint32_t seq[20];
    for (uint32_t i = 0; i < 20; i++)
        rig_send(&r, i, 976);
    int got = rig_collect(&r, 20, 200000000, at, seq);
    CHECK(got == 6);
    CHECK(r.link->dir[0].c.drops_queue == 14);
    CHECK(r.link->dir[0].c.queue_peak == 5);
    /* Six serializations of 1 ms: the first ends 1 ms after the send (plus
     * the time the sends themselves took, which a sanitizer build
     * stretches), the other five follow it back to back. */
    CHECK_NEAR((at[got - 1] - at[0]) / 1e6, 5.0, 0.5);
    CHECK((at[0] - sent) / 1e6 >= 0.9);
    rig_close(&r);
}

static void test_loss(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.loss = 0.25;
    p.queue = 0;
    struct rig r;
    rig_open(&r, &p);
    enum { N = 4000 };
    static int64_t at[N];
    static uint32_t seq[N];
    int got = 0;
    for (uint32_t i = 0; i < N; i += 100) {
        for (uint32_t j = 0; j < 100; j++)
            rig_send(&r, i + j, 100);
        got += rig_collect(&r, N, 20000000, at, seq);
    }
    CHECK_NEAR(r.link->dir[0].c.drops_loss, N * 0.25, N * 0.03);
    CHECK(got + (int)r.link->dir[0].c.drops_loss == N);
    rig_close(&r);
}

static void test_jitter_keeps_order(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.delay_ns = 5000000;
    p.jitter_ns = 4000000;
    struct rig r;
    rig_open(&r, &p);
    enum { N = 200 };
    int64_t at[N];
    uint32_t seq[N];
    for (uint32_t i = 0; i < N; i++)
        rig_send(&r, i, 100);
    CHECK(rig_collect(&r, N, 1000000000, at, seq) == N);
    bool in_order = true;
    for (int i = 1; i < N; i++)
        in_order &= seq[i] > seq[i - 1];
    CHECK(in_order);
    rig_close(&r);
}

static void test_down_up(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.delay_ns = 10000000;
    struct rig r;
    rig_open(&r, &p);
    int64_t at[4];
    uint32_t seq[4];
    rig_send(&r, 0, 100);
    ev_run(r.loop, EVRUN_NOWAIT); /* in flight */
    linkd_link_set_up(r.link, false);
    rig_send(&r, 1, 100);
    CHECK(rig_collect(&r, 1, 30000000, at, seq) == 0);
    CHECK(r.link->dir[0].c.drops_down == 2);
    linkd_link_set_up(r.link, true);
    rig_send(&r, 2, 100);
    CHECK(rig_collect(&r, 1, 100000000, at, seq) == 1 && seq[0] == 2);
    rig_close(&r);
}

/* ---- cut links: two halves joined over UDP on loopback ---- */

#define LOOP1 0x7f000001u /* 127.0.0.1: "machine" 1's underlay address */
#define LOOP2 0x7f000002u

/* One machine's half of a cut link: a "TAP" (a socketpair: *user is
 * ours) at end a, the underlay socket to the other machine at end b, both
 * directions configured with p (the underlay's must be ignored). */
static struct linkd_link *cut_half(struct linkd *ld, int64_t id, uint32_t local, uint32_t remote,
                                   uint16_t port, uint32_t vni, const struct linkd_params *p,
                                   int *user)
{
    int sp[2];
    char err[256];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sp) == 0);
    *user = sp[0];
    struct linkd_underlay_config cfg = {local, remote, port, vni};
    int u = linkd_underlay_open(&cfg, err, sizeof err);
    CHECK_MSG(u >= 0, "%s", err);
    struct linkd_cut cut = {1, vni};
    struct linkd_link *l =
        linkd_link_add(ld, id, sp[1], u, p, p, LINKD_OFFLOAD_AUTO, &cut, 7, err, sizeof err);
    CHECK_MSG(l != NULL, "%s", err);
    return l;
}

/* Runs the loop until a frame comes out of fd or timeout_ns passes: its
 * length (0: none), *at its arrival. */
static ssize_t cut_collect(struct ev_loop *loop, int fd, int64_t timeout_ns, unsigned char *f,
                           int64_t *at)
{
    int64_t end = linkd_now() + timeout_ns;
    while (linkd_now() < end) {
        ev_run(loop, EVRUN_NOWAIT);
        ssize_t n = read(fd, f, 2048);
        if (n > 0) return *at = linkd_now(), n;
    }
    return 0;
}

/* Frame of 100 Ethernet bytes from one half's TAP to the other's: one
 * delay (the sending half's), not two; the frame arrives whole, behind a
 * zeroed virtio-net header. */
static void cut_cross(struct ev_loop *loop, int from, int to, uint32_t seq)
{
    unsigned char f[2048] = {0}, g[2048];
    size_t hdr = sizeof(struct virtio_net_hdr), len = hdr + 100;
    for (size_t i = hdr; i < len; i++)
        f[i] = (unsigned char)(i * 7 + seq);
    f[0] = VIRTIO_NET_HDR_F_DATA_VALID; /* ours to drop: the underlay carries none */
    int64_t sent = linkd_now(), at = 0;
    CHECK(write(from, f, len) == (ssize_t)len);
    CHECK(cut_collect(loop, to, 1000000000, g, &at) == (ssize_t)len);
    f[0] = 0;
    CHECK(memcmp(f, g, len) == 0);
    /* 20 ms, never 40: the upper bound leaves a loaded host its lateness
     * (up to 7 ms seen at load 9 on two cores) and still tells one delay
     * from two. */
    double ms = (at - sent) / 1e6;
    CHECK_MSG(ms >= 19.0 && ms < 30.0, "one delay of 20 ms took %.3f ms", ms);
}

/* A datagram from `fd` (bound to LOOP1:port, connected to LOOP2:port)
 * tagged with vni, sent late_us late: when it comes out of `to` (0: not
 * within 50 ms), in ms after sending. */
static double cut_forged(struct ev_loop *loop, int fd, int to, uint32_t vni, uint32_t late_us)
{
    unsigned char dg[LINKD_UNDERLAY_TAG + 100] = {0x08,
                                                  (unsigned char)(late_us >> 16),
                                                  (unsigned char)(late_us >> 8),
                                                  (unsigned char)late_us,
                                                  (unsigned char)(vni >> 16),
                                                  (unsigned char)(vni >> 8),
                                                  (unsigned char)vni,
                                                  0};
    unsigned char g[2048];
    int64_t sent = linkd_now(), at;
    CHECK(send(fd, dg, sizeof dg, 0) == (ssize_t)sizeof dg);
    return cut_collect(loop, to, 50000000, g, &at) ? (at - sent) / 1e6 : 0;
}

static int udp_between(uint32_t local, uint32_t remote, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(local)};
    struct sockaddr_in peer = me;
    peer.sin_addr.s_addr = htonl(remote);
    CHECK(bind(fd, (struct sockaddr *)&me, sizeof me) == 0);
    if (remote) CHECK(connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0);
    return fd;
}

static void test_cut_link(void)
{
    struct ev_loop *loop = ev_loop_new(EVBACKEND_EPOLL);
    struct linkd ld;
    char err[256];
    CHECK(linkd_init(&ld, loop, err, sizeof err) == 0);
    struct linkd_params p;
    linkd_params_default(&p);
    p.delay_ns = 20000000;
    uint16_t port = (uint16_t)LINKD_UNDERLAY_PORT((uint32_t)getpid());
    int u1, u2;
    struct linkd_link *h1 = cut_half(&ld, 1, LOOP1, LOOP2, port, 77, &p, &u1);
    struct linkd_link *h2 = cut_half(&ld, 2, LOOP2, LOOP1, port, 77, &p, &u2);
    /* The delay is the receiver's: the sender's direction has none. */
    CHECK(h1->dir[0].p.delay_ns == 0 && h1->dir[1].p.delay_ns == 20000000);
    cut_cross(loop, u1, u2, 1);
    cut_cross(loop, u2, u1, 2);
    CHECK(h1->dir[0].c.delivered == 1 && h2->dir[1].c.delivered == 1);
    /* link_set: the receiver keeps the delay, not the rate */
    struct linkd_params q = p;
    q.rate_bps = 1000000;
    q.delay_ns = 30000000;
    CHECK(linkd_link_set(h2, 1, &q, err, sizeof err) == 0);
    CHECK(h2->dir[1].p.delay_ns == 30000000 && h2->dir[1].p.rate_bps == 0);
    CHECK(linkd_link_set(h2, 1, &p, err, sizeof err) == 0);

    /* A datagram from another address, though tagged right, never
     * reaches the connected socket. */
    int stranger = udp_between(0x7f000003u, 0, port);
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(LOOP2)};
    unsigned char dg[LINKD_UNDERLAY_TAG + 100] = {0x08, 0, 0, 0, 0, 0, 77, 0}, g[2048];
    CHECK(sendto(stranger, dg, sizeof dg, 0, (struct sockaddr *)&to, sizeof to) ==
          (ssize_t)sizeof dg);
    int64_t at;
    CHECK(cut_collect(loop, u2, 50000000, g, &at) == 0);
    CHECK(h2->dir[1].c.packets == 1); /* the one frame of cut_cross only */
    close(stranger);

    /* From the right address: a frame the sender sent 15 ms late waits 15
     * ms less (5 ms, not 20: the bound leaves a loaded host its
     * lateness); one of another VNI is dropped. */
    linkd_link_del(h1);
    close(u1);
    int fake = udp_between(LOOP1, LOOP2, port);
    double ms = cut_forged(loop, fake, u2, 77, 15000);
    CHECK_MSG(ms >= 4.0 && ms < 12.0, "20 ms less 15 ms of the sender's lateness took %.3f ms", ms);
    CHECK(cut_forged(loop, fake, u2, 78, 0) == 0);
    CHECK(h2->dir[1].c.packets == 2 && h2->dir[1].c.delivered == 2); /* not counted: VNI 78 */

    /* The port is taken while the half lives. */
    struct linkd_underlay_config again = {LOOP2, LOOP1, port, 79};
    CHECK(linkd_underlay_open(&again, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "another link's");
    close(fake);
    linkd_destroy(&ld);
    ev_loop_destroy(loop);
    close(u2);
}

/* ---- ECN marking ---- */

/* The RFC 1071 checksum of an IPv4 header: 0 when the header is intact. */
static uint16_t ipv4_header_sum(const unsigned char *ip, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* An Ethernet frame of `len` bytes holding an IPv4 header with TOS `tos`
 * and a valid header checksum; `seq` where rig_send puts it. */
static void ipv4_frame(unsigned char *f, size_t len, uint8_t tos, uint32_t seq)
{
    memset(f, 0, len);
    f[12] = 0x08; /* EtherType IPv4 */
    unsigned char *ip = f + 14;
    ip[0] = 0x45; /* version 4, 20-byte header */
    ip[1] = tos;
    ip[2] = (unsigned char)((len - 14) >> 8);
    ip[3] = (unsigned char)(len - 14);
    ip[8] = 64;
    ip[9] = 6; /* TCP */
    memcpy(ip + 12, (const unsigned char[]){10, 0, 0, 1, 10, 0, 0, 2}, 8);
    uint16_t sum = ipv4_header_sum(ip, 20);
    ip[10] = (unsigned char)(sum >> 8);
    ip[11] = (unsigned char)sum;
    memcpy(ip + 20, &seq, sizeof seq);
}

static void test_ecn_mark_frame(void)
{
    unsigned char f[64];
    static const uint8_t tos[] = {0x00, 0x01, 0x02, 0x03, 0xb8, 0xba, 0xff};
    static const enum linkd_ecn_result want[] = {
        LINKD_ECN_NOT_ECT, LINKD_ECN_MARKED, LINKD_ECN_MARKED,    LINKD_ECN_ALREADY_CE,
        LINKD_ECN_NOT_ECT, LINKD_ECN_MARKED, LINKD_ECN_ALREADY_CE};
    for (size_t i = 0; i < sizeof tos; i++) {
        ipv4_frame(f, sizeof f, tos[i], 0);
        CHECK(linkd_ecn_mark_ce(f, sizeof f) == want[i]);
        /* The DSCP bits stay; the ECN bits are CE exactly when it was ECN-capable. */
        CHECK(f[15] == (want[i] == LINKD_ECN_NOT_ECT ? tos[i] : (uint8_t)(tos[i] | 3)));
        CHECK_MSG(ipv4_header_sum(f + 14, 20) == 0, "tos 0x%02x: checksum broken", tos[i]);
    }
    f[12] = 0x08, f[13] = 0x06; /* ARP: never touched */
    f[15] = 0x02;
    CHECK(linkd_ecn_mark_ce(f, sizeof f) == LINKD_ECN_NOT_ECT && f[15] == 0x02);
    CHECK(linkd_ecn_mark_ce(f, 20) == LINKD_ECN_NOT_ECT); /* shorter than an IP header */
}

/* Sends n IPv4 frames of tos into the rig, back to back. */
static void rig_send_ipv4(struct rig *r, int n, uint8_t tos)
{
    unsigned char f[2048] = {0};
    size_t hdr = sizeof(struct virtio_net_hdr);
    for (int i = 0; i < n; i++) {
        ipv4_frame(f + hdr, 1000, tos, (uint32_t)i);
        CHECK(write(r->a_user, f, hdr + 1000) == (ssize_t)(hdr + 1000));
    }
}

/* A queue of 10 with a threshold of 4: 12 back-to-back frames put one on the
 * wire, ten in the queue, one over the limit. ECT frames that find more than
 * 4 queued (the 7th to the 11th) leave marked CE; the same frames Not-ECT
 * go unmarked, and the queue limit drops the same one either way. */
static void test_ecn_threshold(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    p.rate_bps = 8000000; /* 1 byte per µs: the frames queue */
    p.queue = 10;
    p.ecn_threshold = 4;
    for (int ect = 1; ect >= 0; ect--) {
        struct rig r;
        rig_open(&r, &p);
        rig_send_ipv4(&r, 12, ect ? 0x02 : 0x00);
        int64_t at[12];
        uint32_t seq[12];
        CHECK(rig_collect(&r, 12, 200000000, at, seq) == 11);
        CHECK(r.link->dir[0].c.drops_queue == 1);
        CHECK_MSG(r.link->dir[0].c.marked == (ect ? 5u : 0u), "ect %d: %llu marked", ect,
                  (unsigned long long)r.link->dir[0].c.marked);
        rig_close(&r);
    }
}

/* A Mahimahi schedule: opportunities at 10, 10, 20 and 40 ms of a 50 ms
 * round, 1500 bytes of IP packet each. Three full frames take the first
 * three; two of 800 IP bytes meet the fourth, which carries the first and
 * 700 bytes of the second, whose last 100 bytes leave with the next
 * round's first opportunity at 60 ms. */
static void test_schedule(void)
{
    struct linkd_params p;
    linkd_params_default(&p);
    struct rig r;
    rig_open(&r, &p);
    int64_t *ms = malloc(4 * sizeof *ms);
    const int64_t offsets[] = {10, 10, 20, 40}, want[] = {10, 10, 20, 40, 60};
    for (int i = 0; i < 4; i++)
        ms[i] = offsets[i] * 1000000;
    int64_t t0 = linkd_now();
    linkd_link_schedule(r.link, 0, ms, 4, 50000000);
    for (uint32_t i = 0; i < 5; i++)
        rig_send(&r, i, i < 3 ? 1514 : 814);
    int64_t at[5];
    uint32_t seq[5];
    CHECK(rig_collect(&r, 5, 500000000, at, seq) == 5);
    for (int i = 0; i < 5; i++) {
        CHECK(seq[i] == (uint32_t)i);
        CHECK_NEAR((at[i] - t0) / 1e6, (double)want[i], 2.0);
    }
    /* A rate again once the schedule is gone: an unshaped link cuts through. */
    linkd_link_schedule(r.link, 0, NULL, 0, 1);
    CHECK(r.link->dir[0].sched.n == 0 && r.link->dir[0].sched.at_ns == NULL);
    int64_t sent = linkd_now();
    rig_send(&r, 9, 100);
    CHECK(rig_collect(&r, 1, 100000000, at, seq) == 1 && seq[0] == 9);
    CHECK((at[0] - sent) / 1e6 < 5.0);
    rig_close(&r);
}

int main(void)
{
    test_timerq_order();
    test_pool_limit();
    test_delay();
    test_rate_and_queue();
    test_loss();
    test_jitter_keeps_order();
    test_down_up();
    test_cut_link();
    test_ecn_mark_frame();
    test_ecn_threshold();
    test_schedule();
    return check_report();
}
