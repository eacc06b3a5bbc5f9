/* underlay_rtt.c — ICMP echo round trips to an underlay address (see
 * underlay_rtt.h). */
#include "emu/underlay_rtt.h"

#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
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
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
    s->raw = false;
    if (s->fd < 0 && (errno == EACCES || errno == EPERM)) {
        s->fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
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

/* Waits for seq's reply until deadline_ns: its arrival time, or -1. */
static int64_t echo_wait(const struct echo_socket *s, const struct sockaddr_in *to, uint16_t seq,
                         int64_t deadline_ns)
{
    uint8_t buf[512];
    for (int64_t now = mono_ns(); now < deadline_ns; now = mono_ns()) {
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        int ms = (int)((deadline_ns - now + 999999) / 1000000);
        if (poll(&pfd, 1, ms) <= 0) continue;
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(s->fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &len);
        int64_t at = mono_ns();
        if (n > 0 && echo_is_reply(s, buf, n, &from, to, seq)) return at;
    }
    return -1;
}

int underlay_rtt_measure(uint32_t address, int samples, int64_t *rtt_ns, char *err, size_t errlen)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(address)};
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &to.sin_addr, text, sizeof text);
    struct echo_socket s;
    if (echo_socket_open(&s) < 0)
        return snprintf(err, errlen,
                        "underlay %s: no ICMP socket to measure its round trip: %s (needs "
                        "net.ipv4.ping_group_range or CAP_NET_RAW)",
                        text, strerror(errno)),
               -1;
    int64_t best = -1;
    for (int i = 0; i < samples; i++) {
        uint16_t seq = (uint16_t)(i + 1);
        int64_t sent = mono_ns();
        if (echo_send(&s, &to, seq) < 0) continue;
        int64_t back = echo_wait(&s, &to, seq, sent + UNDERLAY_RTT_TIMEOUT_NS);
        if (back >= 0 && (best < 0 || back - sent < best)) best = back - sent;
    }
    close(s.fd);
    if (best < 0)
        return snprintf(err, errlen,
                        "underlay %s: no answer to %d ICMP echoes within %g s each (is ICMP "
                        "echo let through between the machines?)",
                        text, samples, UNDERLAY_RTT_TIMEOUT_NS / 1e9),
               -1;
    *rtt_ns = best;
    return 0;
}
