/* udp_probe.c — hn-udp-probe: one-way delay and ordering of a UDP stream.
 *
 *   hn-udp-probe send DST PORT RATE_BPS PAYLOAD COUNT
 *   hn-udp-probe recv PORT COUNT [LINK_BPS DELAY_US [OVERHEAD]]
 *
 * The sender paces COUNT datagrams of PAYLOAD bytes at RATE_BPS (counting
 * Ethernet wire bytes), each carrying its sequence number and send time, and
 * says on stderr how many the host refused ("sent= send_failed="). The
 * receiver takes the kernel receive timestamp (SO_TIMESTAMPNS); sender and
 * receiver share the host's CLOCK_REALTIME even in different network
 * namespaces. It stops after COUNT datagrams or 1 s of silence and prints
 * "received= lost= reordered= loss_runs=" (loss_runs: runs of consecutive
 * lost sequence numbers). Given the link's rate and delay it replays
 * the send times through an ideal FIFO link (serialization of the wire
 * bytes, then the delay) and prints percentiles of the measured minus ideal
 * one-way delay in microseconds: "err_p50_us= err_p90_us= err_p99_us=
 * err_max_us= abs_p99_us=". The error includes both hosts' stack latency. */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct probe_hdr {
    uint64_t seq;
    int64_t sent_ns;
};

#define PROBE_WIRE_EXTRA (8 + 20 + 14) /* UDP + IPv4 + Ethernet headers */
/* Bytes a link counts beyond the frame: linkd's default per-frame overhead. */
#define PROBE_OVERHEAD 0

static int64_t probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t probe_wire_bytes(uint32_t payload, int overhead)
{
    uint32_t frame = payload + PROBE_WIRE_EXTRA;
    if (frame < 60) frame = 60;
    return frame + (uint32_t)overhead;
}

static int probe_send(const char *dst, int port, double rate, uint32_t payload, uint64_t count)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (s < 0 || inet_pton(AF_INET, dst, &sa.sin_addr) != 1 ||
        connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("hn-udp-probe send");
        return 1;
    }
    int sndbuf = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    char buf[65536] = {0};
    if (payload < sizeof(struct probe_hdr)) payload = sizeof(struct probe_hdr);
    double interval = probe_wire_bytes(payload, PROBE_OVERHEAD) * 8e9 / rate;
    int64_t start = probe_now() + 1000000;
    uint64_t failed = 0; /* refused by the host (ENOBUFS, EAGAIN): never reached a link */
    for (uint64_t i = 0; i < count; i++) {
        int64_t due = start + (int64_t)(interval * (double)i);
        int64_t now = probe_now();
        /* After a stall of the sender (a busy host), resume the pace instead
         * of catching up with one long burst that would overflow the queue. */
        if (now - due > 1000000) {
            start += now - due;
            due = now;
        }
        if (due > now) {
            struct timespec ts = {.tv_sec = (due - now) / 1000000000,
                                  .tv_nsec = (due - now) % 1000000000};
            nanosleep(&ts, NULL);
        }
        struct probe_hdr h = {.seq = i, .sent_ns = probe_now()};
        memcpy(buf, &h, sizeof h);
        if (send(s, buf, payload, 0) < 0) {
            if (errno != ENOBUFS && errno != EAGAIN) {
                perror("hn-udp-probe send");
                return 1;
            }
            failed++;
        }
    }
    close(s);
    fprintf(stderr, "hn-udp-probe send: sent=%llu send_failed=%llu\n",
            (unsigned long long)(count - failed), (unsigned long long)failed);
    return 0;
}

static int probe_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double probe_pct(const int64_t *sorted, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)sorted[i] / 1000.0;
}

/* Measured minus ideal arrival for every received datagram, in send order. */
static void probe_report_error(const int64_t *sent, const int64_t *recv, const uint32_t *size,
                               uint64_t count, double link_bps, double delay_us, int overhead)
{
    int64_t *err = malloc(count * sizeof *err), *abs_err = malloc(count * sizeof *err);
    size_t n = 0;
    int64_t free_at = 0;
    for (uint64_t i = 0; i < count; i++) {
        /* A datagram lost at the receiver has no known send time; skipping it
         * makes the ideal queue slightly shorter than the real one. */
        if (!sent[i]) continue;
        int64_t start = sent[i] > free_at ? sent[i] : free_at;
        free_at = start + (int64_t)(probe_wire_bytes(size[i], overhead) * 8e9 / link_bps);
        int64_t ideal = free_at + (int64_t)(delay_us * 1000.0);
        err[n] = recv[i] - ideal;
        abs_err[n] = llabs(err[n]);
        n++;
    }
    if (!n) return;
    qsort(err, n, sizeof *err, probe_cmp_i64);
    qsort(abs_err, n, sizeof *abs_err, probe_cmp_i64);
    printf(" err_p50_us=%.1f err_p90_us=%.1f err_p99_us=%.1f err_max_us=%.1f err_min_us=%.1f "
           "abs_p99_us=%.1f",
           probe_pct(err, n, 0.5), probe_pct(err, n, 0.9), probe_pct(err, n, 0.99),
           (double)err[n - 1] / 1000.0, (double)err[0] / 1000.0, probe_pct(abs_err, n, 0.99));
    free(err);
    free(abs_err);
}

/* Reads one datagram with its kernel timestamp; 0 on timeout. */
static ssize_t probe_recv_one(int s, char *buf, size_t cap, int64_t *ts_ns)
{
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (poll(&p, 1, 1000) <= 0) return 0;
    char cbuf[128];
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(s, &mh, 0);
    *ts_ns = probe_now();
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            *ts_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        }
    }
    return n;
}

/* Runs of consecutive lost datagrams (maximal, by sequence number): lost /
 * runs is the mean loss burst, 1 / r under the Gilbert-Elliott model. */
static uint64_t probe_loss_runs(const int64_t *sent, uint64_t count)
{
    uint64_t runs = 0;
    for (uint64_t i = 0; i < count; i++)
        if (!sent[i] && (i == 0 || sent[i - 1])) runs++;
    return runs;
}

static int probe_recv(int port, uint64_t count, double link_bps, double delay_us, int overhead)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1, rcvbuf = 16 << 20;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("hn-udp-probe recv");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    int64_t *sent = calloc(count, sizeof *sent), *recv = calloc(count, sizeof *recv);
    uint32_t *size = calloc(count, sizeof *size);
    uint64_t received = 0, reordered = 0, max_seq = 0;
    static char buf[65536];
    int64_t ts;
    ssize_t n;
    bool first = true;
    while (received < count && (n = probe_recv_one(s, buf, sizeof buf, &ts)) != 0) {
        struct probe_hdr h;
        if (n < (ssize_t)sizeof h) continue;
        memcpy(&h, buf, sizeof h);
        if (h.seq >= count || sent[h.seq]) continue;
        if (!first && h.seq < max_seq) reordered++;
        if (first || h.seq > max_seq) max_seq = h.seq;
        first = false;
        sent[h.seq] = h.sent_ns;
        recv[h.seq] = ts;
        size[h.seq] = (uint32_t)n;
        received++;
    }
    printf("received=%llu lost=%llu reordered=%llu loss_runs=%llu", (unsigned long long)received,
           (unsigned long long)(count - received), (unsigned long long)reordered,
           (unsigned long long)probe_loss_runs(sent, count));
    if (link_bps > 0) probe_report_error(sent, recv, size, count, link_bps, delay_us, overhead);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    prctl(PR_SET_TIMERSLACK, 1UL); /* pacing accuracy */
    if (argc == 7 && strcmp(argv[1], "send") == 0)
        return probe_send(argv[2], atoi(argv[3]), atof(argv[4]), (uint32_t)atoi(argv[5]),
                          strtoull(argv[6], NULL, 10));
    if (argc >= 4 && argc <= 7 && strcmp(argv[1], "recv") == 0)
        return probe_recv(atoi(argv[2]), strtoull(argv[3], NULL, 10), argc > 4 ? atof(argv[4]) : 0,
                          argc > 5 ? atof(argv[5]) : 0, argc > 6 ? atoi(argv[6]) : PROBE_OVERHEAD);
    fprintf(stderr, "usage: hn-udp-probe send DST PORT RATE_BPS PAYLOAD COUNT\n"
                    "       hn-udp-probe recv PORT COUNT [LINK_BPS DELAY_US [OVERHEAD]]\n");
    return 2;
}
