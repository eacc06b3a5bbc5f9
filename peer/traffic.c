/* traffic.c — background traffic flows of a peer (see traffic.h): the
 * schedule, the sinks that count, the sources that pace on the loop. */
#include "peer/traffic.h"

#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/container.h"
#include "peer/dataplane.h"

/* A timer wake-up sends every packet due within this much real time: at
 * 100 Mbit/s a timer per 1400-byte packet would wake 9000 times a second. */
#define TRAFFIC_TICK_S 0.0005
/* A source that fell further behind its schedule than this (real time: the
 * host could not keep up, or the socket was full) skips the packets in
 * between, counted as skipped, instead of sending them in one burst. A
 * shorter lag is caught up: on two loaded cores (load 10) a peer often
 * waits 50-100 ms for a core, and a 50 ms bound skipped 3-11% of a
 * constant flow (tools/bench/dynamics traffic). */
#define TRAFFIC_MAX_LAG_S 0.2
/* TCP: bytes per write, and the backlog a paced source may build up. */
#define TRAFFIC_CHUNK (64 * 1024)
#define TRAFFIC_UDP_SEQ_BYTES 8
#define TRAFFIC_SINK_BUFFER (4 << 20)
/* Work per callback, so that control commands and the data plane never wait
 * long behind a flow: datagrams released, or TCP writes of TRAFFIC_CHUNK. */
#define TRAFFIC_BURST_PACKETS 1024
#define TRAFFIC_BURST_WRITES 64

struct traffic_flow {
    struct traffic *owner;
    struct traffic_flow *next;
    char id[TRAFFIC_ID_MAX + 1];
    struct traffic_counters c;
    double start_real_s;
    int fd;        /* the UDP socket, TCP connection or (sink) listener */
    int stream_fd; /* sink, TCP: the accepted connection */
    ev_io io, stream_io;
    ev_timer timer;
    /* source */
    struct traffic_schedule sched;
    uint32_t packet_bytes;
    uint64_t limit;   /* bytes to send, 0: no limit */
    uint64_t planned; /* bytes the schedule has released */
    uint64_t backlog; /* TCP: released but not yet written */
    bool greedy;      /* TCP without a rate */
    bool connected;
};

struct traffic {
    struct ev_loop *loop;
    double dilation;
    struct traffic_flow *flows;
};

/* ---- the schedule ---- */

static double exponential(struct rng *r, double mean)
{
    return -mean * log1p(-rng_uniform(r)); /* u in [0, 1): 1 - u in (0, 1] */
}

/* Onoff: an on period sends at the rate, an off period sends nothing; both
 * lengths exponential (means on_s, off_s), the source starting on. A packet
 * past the end of its on period moves to the start of the next one. */
static void onoff_skip_off(struct traffic_schedule *s)
{
    while (s->next_s >= s->period_end_s) {
        double off = exponential(&s->rng, s->off_s);
        double on = exponential(&s->rng, s->on_s);
        s->next_s = s->period_end_s + off;
        s->period_end_s = s->next_s + on;
    }
}

void traffic_schedule_init(struct traffic_schedule *s, enum traffic_pattern pattern,
                           double rate_bps, uint32_t packet_bytes, double on_s, double off_s,
                           uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->pattern = pattern;
    s->gap_s = packet_bytes * 8.0 / rate_bps;
    s->on_s = on_s;
    s->off_s = off_s;
    rng_seed(&s->rng, seed, TRAFFIC_RNG_STREAM);
    if (pattern == TRAFFIC_POISSON) s->next_s = exponential(&s->rng, s->gap_s);
    if (pattern == TRAFFIC_ONOFF) {
        s->period_end_s = exponential(&s->rng, on_s);
        onoff_skip_off(s);
    }
}

/* next_s is always a time a packet goes (never inside an off period), so
 * the source can wait for it. */
double traffic_schedule_next(struct traffic_schedule *s)
{
    double t = s->next_s;
    s->next_s += s->pattern == TRAFFIC_POISSON ? exponential(&s->rng, s->gap_s) : s->gap_s;
    if (s->pattern == TRAFFIC_ONOFF) onoff_skip_off(s);
    return t;
}

bool traffic_pattern_parse(const char *text, enum traffic_pattern *out)
{
    static const char *const names[] = {"constant", "poisson", "onoff"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) return *out = (enum traffic_pattern)i, true;
    return false;
}

bool traffic_proto_parse(const char *text, enum traffic_proto *out)
{
    if (strcmp(text, "udp") == 0) return *out = TRAFFIC_UDP, true;
    if (strcmp(text, "tcp") == 0) return *out = TRAFFIC_TCP, true;
    return false;
}

/* ---- flows ---- */

struct traffic *traffic_create(struct ev_loop *loop, double dilation)
{
    struct traffic *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->loop = loop;
    t->dilation = dilation >= 1 ? dilation : 1;
    return t;
}

static struct traffic_flow *flow_find(struct traffic *t, const char *id)
{
    for (struct traffic_flow *f = t->flows; f; f = f->next)
        if (strcmp(f->id, id) == 0) return f;
    return NULL;
}

static void close_fd(struct ev_loop *loop, ev_io *w, int *fd)
{
    if (*fd < 0) return;
    ev_io_stop(loop, w);
    close(*fd);
    *fd = -1;
}

static void flow_free(struct traffic_flow *f)
{
    struct ev_loop *loop = f->owner->loop;
    ev_timer_stop(loop, &f->timer);
    close_fd(loop, &f->stream_io, &f->stream_fd);
    close_fd(loop, &f->io, &f->fd);
    free(f);
}

void traffic_destroy(struct traffic *t)
{
    if (!t) return;
    while (t->flows) {
        struct traffic_flow *f = t->flows;
        t->flows = f->next;
        flow_free(f);
    }
    free(t);
}

static struct traffic_flow *flow_new(struct traffic *t, const char *id, enum traffic_proto proto,
                                     char *err, size_t errlen)
{
    if (!id[0] || strlen(id) > TRAFFIC_ID_MAX)
        return snprintf(err, errlen, "flow id '%.80s' is empty or too long", id), NULL;
    if (flow_find(t, id)) return snprintf(err, errlen, "flow '%s' exists already", id), NULL;
    struct traffic_flow *f = calloc(1, sizeof *f);
    if (!f) return snprintf(err, errlen, "out of memory"), NULL;
    f->owner = t;
    snprintf(f->id, sizeof f->id, "%s", id);
    f->c.proto = proto;
    f->fd = f->stream_fd = -1;
    f->start_real_s = mono_s();
    ev_init(&f->timer, NULL);
    return f;
}

static void flow_link(struct traffic *t, struct traffic_flow *f)
{
    f->next = t->flows;
    t->flows = f;
}

static void flow_counters(const struct traffic_flow *f, struct traffic_counters *c)
{
    *c = f->c;
    c->elapsed_s = (mono_s() - f->start_real_s) / f->owner->dilation;
}

bool traffic_counters(struct traffic *t, const char *id, struct traffic_counters *c)
{
    struct traffic_flow *f = t ? flow_find(t, id) : NULL;
    if (f) flow_counters(f, c);
    return f != NULL;
}

bool traffic_stop(struct traffic *t, const char *id, struct traffic_counters *c)
{
    for (struct traffic_flow **p = t ? &t->flows : NULL; p && *p; p = &(*p)->next) {
        if (strcmp((*p)->id, id) != 0) continue;
        struct traffic_flow *f = *p;
        flow_counters(f, c);
        *p = f->next;
        flow_free(f);
        return true;
    }
    return false;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* A non-blocking socket of the address's family, bound to addr (any free
 * port). -1 and err. */
static int socket_bound(const char *addr, int type, struct sockaddr_storage *ss, socklen_t *len,
                        char *err, size_t errlen)
{
    /* the parser wants a port: any, then cleared */
    if (dataplane_parse_addr(addr, 1, ss, len, err, errlen) < 0) return -1;
    set_port(ss, 0);
    int fd = socket(ss->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return snprintf(err, errlen, "socket: %s", strerror(errno)), -1;
    if (bind(fd, (struct sockaddr *)ss, *len) != 0) {
        snprintf(err, errlen, "bind %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- sinks ---- */

static uint64_t seq_decode(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < TRAFFIC_UDP_SEQ_BYTES; i++)
        v = v << 8 | b[i];
    return v;
}

static void on_udp_sink(EV_P_ ev_io *w, int revents)
{
    struct traffic_flow *f = container_of(w, struct traffic_flow, io);
    unsigned char head[TRAFFIC_UDP_SEQ_BYTES];
    for (int i = 0; i < 256; i++) { /* then let the loop serve the others */
        /* MSG_TRUNC: the datagram's real length, with only its head copied out. */
        ssize_t n = recv(f->fd, head, sizeof head, MSG_TRUNC);
        if (n < 0) return;
        f->c.bytes += (uint64_t)n;
        f->c.packets++;
        if (n >= TRAFFIC_UDP_SEQ_BYTES) {
            uint64_t seq = seq_decode(head);
            if (seq + 1 > f->c.expected) f->c.expected = seq + 1;
        }
    }
}

static void on_tcp_stream(EV_P_ ev_io *w, int revents)
{
    struct traffic_flow *f = container_of(w, struct traffic_flow, stream_io);
    static char scratch[TRAFFIC_CHUNK]; /* discarded: only the count matters */
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(f->stream_fd, scratch, sizeof scratch, 0);
        if (n > 0) {
            f->c.bytes += (uint64_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        f->c.done = n == 0; /* the source closed: everything it wrote is here */
        close_fd(loop, &f->stream_io, &f->stream_fd);
        return;
    }
}

static void on_tcp_accept(EV_P_ ev_io *w, int revents)
{
    struct traffic_flow *f = container_of(w, struct traffic_flow, io);
    int fd = accept4(f->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (f->stream_fd >= 0) { /* one stream per flow */
        close(fd);
        return;
    }
    f->stream_fd = fd;
    ev_io_init(&f->stream_io, on_tcp_stream, fd, EV_READ);
    ev_io_start(loop, &f->stream_io);
}

int traffic_sink(struct traffic *t, const char *id, enum traffic_proto proto, const char *addr,
                 int *port, char *err, size_t errlen)
{
    struct traffic_flow *f = flow_new(t, id, proto, err, errlen);
    if (!f) return -1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    f->fd =
        socket_bound(addr, proto == TRAFFIC_UDP ? SOCK_DGRAM : SOCK_STREAM, &ss, &len, err, errlen);
    if (f->fd < 0 || (proto == TRAFFIC_TCP && listen(f->fd, 4) != 0) ||
        getsockname(f->fd, (struct sockaddr *)&ss, &len) != 0) {
        if (f->fd >= 0) snprintf(err, errlen, "sink on %s: %s", addr, strerror(errno));
        flow_free(f);
        return -1;
    }
    /* A busy host may leave the sink's peer off a core for tens of ms:
     * what arrives meanwhile waits here (the kernel caps it at rmem_max). */
    int rcvbuf = TRAFFIC_SINK_BUFFER;
    if (proto == TRAFFIC_UDP) setsockopt(f->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    ev_io_init(&f->io, proto == TRAFFIC_UDP ? on_udp_sink : on_tcp_accept, f->fd, EV_READ);
    ev_io_start(t->loop, &f->io);
    flow_link(t, f);
    return 0;
}

/* ---- sources ---- */

static void source_arm(struct traffic_flow *f);

/* The source ends (its bytes sent, or an error): TCP closes its stream so
 * the sink sees the end. */
static void source_end(struct traffic_flow *f, const char *error)
{
    struct ev_loop *loop = f->owner->loop;
    ev_timer_stop(loop, &f->timer);
    if (error && !f->c.error[0]) snprintf(f->c.error, sizeof f->c.error, "%s", error);
    f->c.done = error == NULL;
    close_fd(loop, &f->io, &f->fd);
}

/* One datagram; false when the socket would not take it now. */
static bool udp_send_one(struct traffic_flow *f)
{
    static unsigned char packet[TRAFFIC_PACKET_MAX]; /* zeros after the sequence number */
    uint64_t seq = f->c.packets;
    for (int i = TRAFFIC_UDP_SEQ_BYTES - 1; i >= 0; i--, seq >>= 8)
        packet[i] = (unsigned char)seq;
    ssize_t n = send(f->fd, packet, f->packet_bytes, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR)
            return false;
        if (errno == ECONNREFUSED) return true; /* the sink is gone for now: the packet is lost */
        char why[120];
        snprintf(why, sizeof why, "send: %s", strerror(errno));
        source_end(f, why);
        return false;
    }
    f->c.bytes += (uint64_t)n;
    f->c.packets++;
    return true;
}

/* TCP: writes the backlog (all it can, greedy) until the socket is full. */
static void tcp_write(struct traffic_flow *f)
{
    static char zeros[TRAFFIC_CHUNK];
    for (int writes = 0;
         writes < TRAFFIC_BURST_WRITES && f->fd >= 0 && (f->greedy || f->backlog > 0); writes++) {
        size_t want = f->greedy || f->backlog > sizeof zeros ? sizeof zeros : (size_t)f->backlog;
        if (f->limit && want > f->limit - f->c.bytes) want = (size_t)(f->limit - f->c.bytes);
        ssize_t n = send(f->fd, zeros, want, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            char why[120];
            snprintf(why, sizeof why, "send: %s", strerror(errno));
            source_end(f, why);
            return;
        }
        f->c.bytes += (uint64_t)n;
        f->backlog -= f->greedy ? 0 : (uint64_t)n;
        if (f->limit && f->c.bytes >= f->limit) {
            source_end(f, NULL);
            return;
        }
    }
    if (f->fd < 0) return;
    if (f->greedy || f->backlog > 0)
        ev_io_start(f->owner->loop, &f->io);
    else
        ev_io_stop(f->owner->loop, &f->io);
}

/* The schedule's next send, in real seconds of the monotonic clock. */
static double due_real_s(const struct traffic_flow *f)
{
    return f->start_real_s + f->sched.next_s * f->owner->dilation;
}

/* Releases every packet due by now (UDP: sends it; TCP: adds it to the
 * backlog), skipping what fell too far behind. */
static void source_release(struct traffic_flow *f, double now)
{
    for (int n = 0;
         n < TRAFFIC_BURST_PACKETS && f->fd >= 0 && due_real_s(f) <= now + TRAFFIC_TICK_S; n++) {
        if (f->limit && f->planned >= f->limit) {
            if (f->c.proto == TRAFFIC_UDP) source_end(f, NULL);
            return;
        }
        if (now - due_real_s(f) > TRAFFIC_MAX_LAG_S) {
            f->c.skipped++;
        } else if (f->c.proto == TRAFFIC_UDP) {
            if (!udp_send_one(f)) return; /* full: the next tick tries again */
        } else {
            f->backlog += f->packet_bytes;
        }
        f->planned += f->packet_bytes;
        traffic_schedule_next(&f->sched);
    }
}

static void on_source_timer(EV_P_ ev_timer *w, int revents)
{
    struct traffic_flow *f = container_of(w, struct traffic_flow, timer);
    source_release(f, mono_s());
    if (f->fd >= 0 && f->c.proto == TRAFFIC_TCP) tcp_write(f);
    source_arm(f);
}

static void source_arm(struct traffic_flow *f)
{
    if (f->fd < 0 || f->greedy || !f->connected) return;
    double wait = due_real_s(f) - mono_s();
    ev_timer_set(&f->timer, wait > TRAFFIC_TICK_S ? wait : TRAFFIC_TICK_S, 0);
    ev_timer_start(f->owner->loop, &f->timer);
}

static void on_source_io(EV_P_ ev_io *w, int revents)
{
    struct traffic_flow *f = container_of(w, struct traffic_flow, io);
    if (!f->connected) {
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error) {
            char why[120];
            snprintf(why, sizeof why, "connect: %s", strerror(error));
            source_end(f, why);
            return;
        }
        f->connected = true;
        f->start_real_s = mono_s(); /* the schedule starts with the stream */
        source_arm(f);
    }
    tcp_write(f);
}

static int source_open(struct traffic_flow *f, const struct traffic_source_config *cfg, char *err,
                       size_t errlen)
{
    struct sockaddr_storage to, local;
    socklen_t to_len = sizeof to, local_len = sizeof local;
    if (dataplane_parse_addr(cfg->to, 0, &to, &to_len, err, errlen) < 0) return -1;
    int type = cfg->proto == TRAFFIC_UDP ? SOCK_DGRAM : SOCK_STREAM;
    if (cfg->local_addr)
        f->fd = socket_bound(cfg->local_addr, type, &local, &local_len, err, errlen);
    else
        f->fd = socket(to.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (f->fd < 0) return err[0] ? -1 : (snprintf(err, errlen, "socket: %s", strerror(errno)), -1);
    if (connect(f->fd, (struct sockaddr *)&to, to_len) != 0 && errno != EINPROGRESS)
        return snprintf(err, errlen, "connect %s: %s", cfg->to, strerror(errno)), -1;
    return 0;
}

int traffic_source(struct traffic *t, const struct traffic_source_config *cfg, char *err,
                   size_t errlen)
{
    err[0] = '\0';
    struct traffic_flow *f = flow_new(t, cfg->id, cfg->proto, err, errlen);
    if (!f) return -1;
    f->c.source = true;
    f->packet_bytes = cfg->packet_bytes;
    f->limit = cfg->bytes;
    f->greedy = cfg->rate_bps <= 0;
    if (!f->greedy)
        traffic_schedule_init(&f->sched, cfg->pattern, cfg->rate_bps, cfg->packet_bytes, cfg->on_s,
                              cfg->off_s, cfg->seed);
    if (source_open(f, cfg, err, errlen) < 0) {
        flow_free(f);
        return -1;
    }
    ev_init(&f->timer, on_source_timer);
    ev_io_init(&f->io, on_source_io, f->fd, EV_WRITE);
    flow_link(t, f);
    if (cfg->proto == TRAFFIC_UDP) { /* connected at once; the timer paces */
        f->connected = true;
        source_arm(f);
    } else {
        ev_io_start(t->loop, &f->io); /* writable: connected */
    }
    return 0;
}
