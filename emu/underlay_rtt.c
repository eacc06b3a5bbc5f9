/* underlay_rtt.c — ICMP echo round trips to an underlay address (see
 * underlay_rtt.h). */
#include "emu/underlay_rtt.h"

#include "common/clock.h"
#include "common/container.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct echo_socket {
    int fd;
    bool raw;    /* a raw socket: replies carry the IP header, ids are ours to check */
    uint16_t id; /* raw: the echo id we send */
};

static int echo_socket_open(struct echo_socket *s)
{
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
    s->raw = false;
    if (s->fd < 0 && (errno == EACCES || errno == EPERM)) {
        s->fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
        s->raw = true;
    }
    s->id = (uint16_t)(getpid() ^ (mono_ns() >> 10));
    return s->fd < 0 ? -1 : 0;
}

/* The one's complement sum of RFC 792, over len bytes (even here). */
static uint16_t icmp_checksum(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return htons((uint16_t)~sum);
}

static int echo_send(const struct echo_socket *s, const struct sockaddr_in *to, uint16_t seq)
{
    uint8_t pkt[sizeof(struct icmphdr) + 8] = {0};
    struct icmphdr *h = (struct icmphdr *)pkt;
    h->type = ICMP_ECHO;
    h->un.echo.id = htons(s->id); /* a datagram socket overwrites it with its own */
    h->un.echo.sequence = htons(seq);
    h->checksum = icmp_checksum(pkt, sizeof pkt);
    return sendto(s->fd, pkt, sizeof pkt, 0, (const struct sockaddr *)to, sizeof *to) ==
                   (ssize_t)sizeof pkt
               ? 0
               : -1;
}

/* Whether the datagram in buf (n bytes) is the echo reply to seq from `from`. */
static bool echo_is_reply(const struct echo_socket *s, const uint8_t *buf, ssize_t n,
                          const struct sockaddr_in *from, const struct sockaddr_in *to,
                          uint16_t seq)
{
    size_t skip = 0;
    if (s->raw) {
        if (n < (ssize_t)sizeof(struct iphdr)) return false;
        skip = (size_t)((const struct iphdr *)buf)->ihl * 4;
    }
    if (n < (ssize_t)(skip + sizeof(struct icmphdr))) return false;
    const struct icmphdr *h = (const struct icmphdr *)(buf + skip);
    return from->sin_addr.s_addr == to->sin_addr.s_addr && h->type == ICMP_ECHOREPLY &&
           ntohs(h->un.echo.sequence) == seq && (!s->raw || ntohs(h->un.echo.id) == s->id);
}

struct underlay_rtt {
    struct ev_loop *loop;
    ev_io readable;
    ev_timer timeout; /* the echo in flight: its answer's deadline */
    struct echo_socket s;
    struct sockaddr_in to;
    char text[INET_ADDRSTRLEN];
    int samples, sent; /* echoes to send, sent so far (the last one's seq) */
    int64_t sent_ns;   /* when the echo in flight left */
    int64_t best;      /* the least round trip so far, -1: none */
    int unsent;        /* echoes whose send failed, */
    int send_errno;    /* the last one's errno */
    underlay_rtt_fn done;
    void *ctx;
};

void underlay_rtt_cancel(struct underlay_rtt *p)
{
    if (!p) return;
    ev_io_stop(p->loop, &p->readable);
    ev_timer_stop(p->loop, &p->timeout);
    close(p->s.fd);
    free(p);
}

/* All echoes answered or timed out: the least round trip, or the failure. */
static void probe_finish(struct underlay_rtt *p)
{
    char err[256] = "";
    int64_t best = p->best;
    underlay_rtt_fn done = p->done;
    void *ctx = p->ctx;
    if (best < 0 && p->unsent == p->samples)
        snprintf(err, sizeof err, "underlay %s: no ICMP echo could be sent: %s", p->text,
                 strerror(p->send_errno));
    else if (best < 0)
        snprintf(err, sizeof err,
                 "underlay %s: no answer to %d ICMP echoes within %g s each (is ICMP "
                 "echo let through between the machines?)",
                 p->text, p->samples, UNDERLAY_RTT_TIMEOUT_NS / 1e9);
    underlay_rtt_cancel(p); /* done may free what ctx points to: nothing of p after it */
    done(ctx, best < 0 ? 0 : best, best < 0 ? err : NULL);
}

/* The next echo, or the end; a send that fails counts as unanswered. */
static void probe_next(struct underlay_rtt *p)
{
    ev_timer_stop(p->loop, &p->timeout);
    while (p->sent < p->samples) {
        p->sent++;
        p->sent_ns = mono_ns();
        if (echo_send(&p->s, &p->to, (uint16_t)p->sent) < 0) {
            p->unsent++;
            p->send_errno = errno;
            continue;
        }
        ev_timer_set(&p->timeout, UNDERLAY_RTT_TIMEOUT_NS / 1e9, 0.);
        ev_timer_start(p->loop, &p->timeout);
        return;
    }
    probe_finish(p);
}

static void on_timeout(EV_P_ ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    probe_next(container_of(w, struct underlay_rtt, timeout));
}

/* Every datagram waiting is read (none is waited for); the one answering
 * the echo in flight moves on to the next. */
static void on_readable(EV_P_ ev_io *w, int revents)
{
    (void)loop, (void)revents;
    struct underlay_rtt *p = container_of(w, struct underlay_rtt, readable);
    uint8_t buf[512];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n =
            recvfrom(p->s.fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &len);
        if (n < 0) return; /* EAGAIN, or an ICMP error queued: the timer covers both */
        int64_t rtt = mono_ns() - p->sent_ns;
        if (!echo_is_reply(&p->s, buf, n, &from, &p->to, (uint16_t)p->sent)) continue;
        if (p->best < 0 || rtt < p->best) p->best = rtt;
        return probe_next(p);
    }
}

struct underlay_rtt *underlay_rtt_start(struct ev_loop *loop, uint32_t address, int samples,
                                        underlay_rtt_fn done, void *ctx, char *err, size_t errlen)
{
    struct underlay_rtt *p = calloc(1, sizeof *p);
    struct in_addr a = {.s_addr = htonl(address)};
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, text, sizeof text);
    if (!p) return snprintf(err, errlen, "underlay %s: out of memory", text), NULL;
    if (echo_socket_open(&p->s) < 0) {
        snprintf(err, errlen,
                 "underlay %s: no ICMP socket to measure its round trip: %s (needs "
                 "net.ipv4.ping_group_range or CAP_NET_RAW)",
                 text, strerror(errno));
        free(p);
        return NULL;
    }
    *p = (struct underlay_rtt){.loop = loop,
                               .s = p->s,
                               .samples = samples,
                               .best = -1,
                               .done = done,
                               .ctx = ctx,
                               .to = {.sin_family = AF_INET, .sin_addr = a}};
    memcpy(p->text, text, sizeof text);
    ev_io_init(&p->readable, on_readable, p->s.fd, EV_READ);
    ev_io_start(loop, &p->readable);
    ev_init(&p->timeout, on_timeout);
    /* The first echo leaves from the loop too: done never runs inside this call. */
    ev_timer_set(&p->timeout, 0., 0.);
    ev_timer_start(loop, &p->timeout);
    return p;
}
