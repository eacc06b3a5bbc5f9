/* forward.h — the forwarding core of hiernet-linkd.
 *
 * Provides the process context (struct linkd: the libev loop, every link and
 * the one event queue that drives all release timers) and links: two TAP
 * file descriptors and one pipeline per direction,
 *
 *   read → loss (Bernoulli or Gilbert-Elliott) → drop-tail queue, which
 *        marks ECN-capable IPv4 packets CE above a threshold (DCTCP-style)
 *        → serialization at the link rate (bytes on the wire)
 *        → propagation delay + jitter (FIFO unless reorder) → write
 *
 * A link of a part whose other end is on another machine has a UDP socket
 * (underlay.h) in place of that end's TAP.
 *
 * A link owns its TAP fds, its watchers and its packet pool; struct linkd
 * owns its links. Times are CLOCK_MONOTONIC nanoseconds. */
#pragma once

#include "emu/linkd/pool.h"
#include "emu/linkd/timerq.h"

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

/* Bytes added to each frame the TAP hands us (Ethernet header included)
 * before the rate sees it. 0 counts frames as the kernel's HTB, TBF and netem
 * count skb->len, so a `bw` gives the same goodput on both backends (a
 * 1448-byte TCP segment costs 1514 bytes). A link can set `overhead` = 24 to
 * also count preamble, FCS and inter-frame gap as a physical Ethernet does. */
#define LINKD_DEFAULT_OVERHEAD 0
#define LINKD_DEFAULT_QUEUE 1000u
/* Offload "auto" turns TSO on only for links this fast (or unshaped): on
 * slower links a 64 KiB super-frame would leave as one burst and be dropped or
 * queued as one unit, distorting TCP. */
#define LINKD_TSO_MIN_RATE 1000000000ull

enum linkd_jitter_dist { LINKD_JITTER_UNIFORM, LINKD_JITTER_NORMAL };
enum linkd_offload { LINKD_OFFLOAD_AUTO, LINKD_OFFLOAD_ON, LINKD_OFFLOAD_OFF };

/* What one direction emulates. */
struct linkd_params {
    uint64_t rate_bps; /* 0 = unlimited */
    int64_t delay_ns;
    int64_t jitter_ns; /* uniform: ±jitter; normal: standard deviation */
    enum linkd_jitter_dist jitter_dist;
    bool reorder;         /* let jitter reorder packets */
    double loss;          /* Bernoulli loss probability, used when ge_p == 0 */
    double ge_p, ge_r;    /* Gilbert-Elliott: P(good→bad), P(bad→good); ge_p > 0 enables */
    double ge_h, ge_k;    /* delivery probability in the bad / good state */
    uint32_t queue;       /* packets waiting for the transmitter; 0 = unbounded */
    uint64_t queue_bytes; /* 0 = no byte bound */
    /* Step marking: an ECT packet that finds more than this queued (packets,
     * bytes) leaves marked CE; 0 = off. Non-ECT packets are not affected. */
    uint32_t ecn_threshold;
    uint64_t ecn_threshold_bytes;
    int32_t overhead; /* wire bytes added per frame */
};

struct linkd_counters {
    uint64_t packets, bytes;             /* arrived (segments, Ethernet bytes) */
    uint64_t delivered, delivered_bytes; /* written to the egress TAP */
    uint64_t drops_loss, drops_queue, drops_down, drops_nobuf, drops_write;
    uint64_t marked;     /* packets (segments) marked CE at the queue */
    uint64_t queue_peak; /* packets */
};

struct linkd;
struct linkd_link;

/* A Mahimahi delivery-opportunity schedule: frames leave only at t0 +
 * round x period_ns + at_ns[i], each opportunity carrying up to
 * LINKD_SCHEDULE_BYTES of IP packet (a packet larger than what is left
 * takes the next opportunities too, as Mahimahi's link queue does); an
 * opportunity that finds the queue empty is lost. */
#define LINKD_SCHEDULE_BYTES 1500u
struct linkd_schedule {
    int64_t *at_ns; /* owned; non-decreasing offsets within a round */
    size_t n;       /* 0: no schedule, the rate applies */
    int64_t period_ns, t0, round;
    size_t next;        /* the next opportunity of the round */
    uint32_t head_left; /* IP bytes of the head packet still to carry (0: none begun) */
};

struct linkd_dir {
    struct linkd_link *link;
    int in_fd, out_fd; /* borrowed from the link */
    ev_io in_io;       /* in_fd readable */
    struct linkd_params p;
    uint64_t rng; /* splitmix64 state */
    bool ge_bad;  /* Gilbert-Elliott state */
    /* Frames waiting for the transmitter, in arrival order: a plain FIFO
     * (common/fifo.h). The exact virtual-time schedule lives in the frames'
     * arrival stamps and tx_free_at, not in the queue's structure. */
    struct fifo queue;
    uint32_t q_packets;
    uint64_t q_bytes;
    int64_t tx_free_at;             /* when the transmitter finishes its current frame */
    struct linkd_timerq delay_line; /* serialized packets by release time */
    int64_t last_release;
    struct linkd_timerq_node event; /* this direction in struct linkd's event queue */
    struct linkd_packet *spare;     /* large buffer the next read lands in */
    struct linkd_counters c;
    struct linkd_schedule sched; /* delivery opportunities instead of the rate, when n > 0 */
};

/* A cut link (issue 20): its end `end` (0 a, 1 b) is not a TAP but a
 * UDP socket to the other machine's linkd (underlay.h), its datagrams
 * tagged with vni. Each direction is given its whole parameters at both
 * machines; the sender applies the queue, rate and loss, the receiver the
 * delay and jitter (forward.c, dir_keep_own_params, says why). */
#define LINKD_CUT_NONE (-1)
struct linkd_cut {
    int end; /* LINKD_CUT_NONE: both ends are TAPs */
    uint32_t vni;
};

struct linkd_link {
    int64_t id;
    bool up;
    enum linkd_offload offload;
    struct linkd_cut cut;
    int fd[2];               /* TAP a, TAP b (or the underlay socket at cut.end) */
    bool tso[2];             /* TSO currently enabled on fd[i] */
    struct linkd_dir dir[2]; /* 0: a→b, 1: b→a */
    struct linkd_pool pool;
    struct linkd *ld;
    struct linkd_link *next;
};

struct linkd {
    struct ev_loop *loop;
    struct linkd_timerq events; /* one node per busy direction */
    int timer_fd;
    ev_io timer_io;
    ev_prepare prepare; /* re-arms timer_fd once per loop iteration */
    ev_idle poll;       /* active while an event is closer than wake_lead: no blocking */
    int64_t armed_at;   /* what timer_fd is set to; INT64_MAX when disarmed */
    int64_t wake_lead;  /* observed timer wake-up latency (moving average), ns */
    ev_check check;     /* runs when the loop wakes: estimates how late it woke */
    int64_t blocked_at; /* when the loop last went to sleep (0: it did not) */
    int64_t wake_delay; /* this iteration's estimate of how long frames waited for us */
    struct linkd_link *links;
    size_t n_links;
    size_t pool_limit;      /* bytes of packet buffers per link */
    unsigned char *scratch; /* LINKD_LARGE_BUF bytes to drain frames we must drop */
};

int64_t linkd_now(void);
void linkd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void linkd_params_default(struct linkd_params *p);
/* Checks ranges; on error writes a message naming the parameter. */
int linkd_params_check(const struct linkd_params *p, char *err, size_t errlen);

int linkd_init(struct linkd *ld, struct ev_loop *loop, char *err, size_t errlen);
void linkd_destroy(struct linkd *ld);

struct linkd_link *linkd_link_find(struct linkd *ld, int64_t id);
/* Creates a link between TAP fds a and b and starts forwarding. Takes
 * ownership of both fds (closed on failure too). cut: NULL, or which end
 * is an underlay socket (struct linkd_cut). */
struct linkd_link *linkd_link_add(struct linkd *ld, int64_t id, int fd_a, int fd_b,
                                  const struct linkd_params *ab, const struct linkd_params *ba,
                                  enum linkd_offload offload, const struct linkd_cut *cut,
                                  uint64_t seed, char *err, size_t errlen);
/* New parameters for direction `d` (0 a→b, 1 b→a); packets already queued keep
 * their place, every packet serialized from now on sees the new values. */
int linkd_link_set(struct linkd_link *l, int d, const struct linkd_params *p, char *err,
                   size_t errlen);
/* Replaces direction d's schedule by at_ns[0..n) (ownership taken; n = 0:
 * none, the rate applies again), starting now. */
void linkd_link_schedule(struct linkd_link *l, int d, int64_t *at_ns, size_t n, int64_t period_ns);
/* Down drops what is queued or in flight and everything that arrives. */
void linkd_link_set_up(struct linkd_link *l, bool up);
/* Stops forwarding, removes the TAPs (persistent ones too) and frees the link. */
void linkd_link_del(struct linkd_link *l);
/* Brings the counters of both directions up to now (serializes what is due). */
void linkd_link_sync(struct linkd_link *l);
/* Packets in the queue and in flight of direction d. */
uint32_t linkd_dir_in_flight(const struct linkd_dir *d);
