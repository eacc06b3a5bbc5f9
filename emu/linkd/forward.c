/* forward.c — the forwarding core of hiernet-linkd (see forward.h).
 *
 * Scheduling model. Each direction has a FIFO queue in front of a
 * transmitter and a delay line behind it. The transmitter is advanced lazily
 * in virtual time: whenever a direction is touched at time `now`, every
 * queued frame whose serialization would have started by `now` is given its
 * exact start (max(arrival, previous end)) and end, and moves to the delay
 * line with release = end + delay + jitter. What is left in the queue is then
 * exactly what an ideal FIFO would hold at `now`, so drop-tail decisions and
 * queue peaks are exact, while wake-ups are needed only for releases (and
 * for the transmitter no later than `delay` after it frees up, because a
 * frame serialized then is not due before). struct linkd keeps every busy
 * direction in one heap keyed by its next event and one timerfd armed for the
 * earliest; a timerfd is used instead of an ev_timer because libev's epoll
 * backend rounds timeouts to whole milliseconds. */
#include "emu/linkd/forward.h"
#include "common/clock.h"
#include "common/container.h"
#include "emu/linkd/ecn.h"
#include "emu/linkd/tap.h"
#include "emu/linkd/underlay.h"

#include <errno.h>
#include <linux/virtio_net.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif

#define VNET_HDR_LEN ((uint32_t)sizeof(struct virtio_net_hdr))
#define ETH_HEADER_BYTES 14u
#define ETH_MIN_FRAME 60u /* without FCS; shorter frames are padded on the wire */
#define ETH_HEADER 14u
/* Frames read per wake-up of one direction: enough to amortize the loop,
 * few enough that one busy link cannot starve the others. */
#define LINKD_READ_BATCH 64
#define LINKD_DEFAULT_POOL_LIMIT (256u << 20)

int64_t linkd_now(void)
{
    return mono_ns();
}

/* ---- parameters ---- */

void linkd_params_default(struct linkd_params *p)
{
    memset(p, 0, sizeof *p);
    p->jitter_dist = LINKD_JITTER_UNIFORM;
    p->ge_h = 0.0;
    p->ge_k = 1.0;
    p->queue = LINKD_DEFAULT_QUEUE;
    p->overhead = LINKD_DEFAULT_OVERHEAD;
}

static bool is_probability(double x)
{
    return x >= 0.0 && x <= 1.0; /* false for NaN too */
}

int linkd_params_check(const struct linkd_params *p, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (p->delay_ns < 0)
        bad = "delay must not be negative";
    else if (p->jitter_ns < 0)
        bad = "jitter must not be negative";
    else if (!is_probability(p->loss))
        bad = "loss must be within 0..1";
    else if (!is_probability(p->ge_p) || !is_probability(p->ge_r))
        bad = "ge_p and ge_r must be within 0..1";
    else if (!is_probability(p->ge_h) || !is_probability(p->ge_k))
        bad = "ge_h and ge_k must be within 0..1";
    else if (p->overhead < -(int32_t)ETH_HEADER || p->overhead > 1024)
        bad = "overhead must be within -14..1024 bytes";
    if (!bad) return 0;
    snprintf(err, errlen, "%s", bad);
    return -1;
}

/* ---- randomness: splitmix64, seeded per direction for reproducible runs ---- */

static uint64_t dir_random(struct linkd_dir *d)
{
    uint64_t z = (d->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double dir_uniform(struct linkd_dir *d)
{
    return (double)(dir_random(d) >> 11) * 0x1.0p-53;
}

static bool dir_lose(struct linkd_dir *d)
{
    const struct linkd_params *p = &d->p;
    if (p->ge_p > 0.0) {
        double u = dir_uniform(d);
        if (d->ge_bad) {
            if (u < p->ge_r) d->ge_bad = false;
        } else if (u < p->ge_p) {
            d->ge_bad = true;
        }
        return dir_uniform(d) >= (d->ge_bad ? p->ge_h : p->ge_k);
    }
    return p->loss > 0.0 && dir_uniform(d) < p->loss;
}

static int64_t dir_jitter(struct linkd_dir *d)
{
    double j = (double)d->p.jitter_ns;
    if (j <= 0.0) return 0;
    if (d->p.jitter_dist == LINKD_JITTER_UNIFORM)
        return (int64_t)((2.0 * dir_uniform(d) - 1.0) * j);
    /* Box-Muller; 1 - u keeps the logarithm finite. */
    double r = sqrt(-2.0 * log(1.0 - dir_uniform(d)));
    return (int64_t)(r * cos(2.0 * M_PI * dir_uniform(d)) * j);
}

/* ---- what a frame costs on the wire ---- */

/* Length of the headers every GSO segment repeats. csum_start locates the
 * transport header more reliably than hdr_len, which tun fills with the
 * length of the linear part of the skb. */
static uint32_t frame_header_len(const unsigned char *frame, uint32_t flen,
                                 const struct virtio_net_hdr *h)
{
    uint8_t type = h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;
    if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
        uint32_t l4 = h->csum_start, hl = 0;
        if (type == VIRTIO_NET_HDR_GSO_UDP || type == VIRTIO_NET_HDR_GSO_UDP_L4)
            hl = l4 + 8;
        else if (l4 + 13 <= flen)
            hl = l4 + (uint32_t)(frame[l4 + 12] >> 4) * 4;
        if (hl > ETH_HEADER && hl < flen) return hl;
    }
    if (h->hdr_len > ETH_HEADER && h->hdr_len < flen) return h->hdr_len;
    return ETH_HEADER + 20 + 20 < flen ? ETH_HEADER + 20 + 20 : flen;
}

/* Fills segs, frame_bytes and wire_bytes from the virtio-net header. */
static void packet_measure(struct linkd_packet *pkt, int32_t overhead)
{
    const struct virtio_net_hdr *h = (const struct virtio_net_hdr *)pkt->data;
    const unsigned char *frame = pkt->data + VNET_HDR_LEN;
    uint32_t flen = pkt->len - VNET_HDR_LEN;
    uint32_t segs = 1, frame_bytes = flen;
    uint8_t type = h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;
    if (type != VIRTIO_NET_HDR_GSO_NONE && h->gso_size > 0) {
        uint32_t hl = frame_header_len(frame, flen, h);
        uint32_t payload = flen - hl;
        segs = (payload + h->gso_size - 1) / h->gso_size;
        if (segs == 0) segs = 1;
        frame_bytes = flen + (segs - 1) * hl;
    }
    int64_t wire = (int64_t)(frame_bytes < ETH_MIN_FRAME ? ETH_MIN_FRAME : frame_bytes) +
                   (int64_t)segs * overhead;
    pkt->segs = segs;
    pkt->frame_bytes = frame_bytes;
    pkt->wire_bytes = wire > 0 ? (uint32_t)wire : 1;
}

static int64_t dir_serialize_ns(const struct linkd_dir *d, uint32_t wire_bytes)
{
    if (!d->p.rate_bps) return 0;
    return (int64_t)((unsigned __int128)wire_bytes * 8000000000u / d->p.rate_bps);
}

/* ---- queue ---- */

static bool dir_queue_full(const struct linkd_dir *d, const struct linkd_packet *pkt)
{
    /* An empty queue takes any frame, so a GSO frame of more segments than
     * the limit cannot wedge the link. */
    if (fifo_empty(&d->queue)) return false;
    if (d->p.queue && d->q_packets + pkt->segs > d->p.queue) return true;
    return d->p.queue_bytes && d->q_bytes + pkt->frame_bytes > d->p.queue_bytes;
}

/* DCTCP's step marking (Alizadeh et al. 2010): a packet that finds more
 * than the threshold queued is marked, not dropped, so an ECN sender backs
 * off after one round trip instead of waiting out a retransmission timeout. */
static bool dir_over_ecn_threshold(const struct linkd_dir *d)
{
    if (d->p.ecn_threshold && d->q_packets > d->p.ecn_threshold) return true;
    return d->p.ecn_threshold_bytes && d->q_bytes > d->p.ecn_threshold_bytes;
}

/* Marks pkt CE if it is ECN-capable and the queue is over the threshold;
 * a Not-ECT packet joins the queue unmarked and meets drop-tail as before. */
static void dir_mark_congestion(struct linkd_dir *d, struct linkd_packet *pkt)
{
    if (!dir_over_ecn_threshold(d)) return;
    if (linkd_ecn_mark_ce(pkt->data + VNET_HDR_LEN, pkt->len - VNET_HDR_LEN) == LINKD_ECN_MARKED)
        d->c.marked += pkt->segs;
}

/* The oldest queued frame, left queued; NULL when the queue is empty. */
static struct linkd_packet *dir_head(const struct linkd_dir *d)
{
    struct fifo_link *first = fifo_first(&d->queue);
    return first ? container_of(first, struct linkd_packet, link) : NULL;
}

static void dir_enqueue(struct linkd_dir *d, struct linkd_packet *pkt)
{
    fifo_push(&d->queue, &pkt->link);
    d->q_packets += pkt->segs;
    d->q_bytes += pkt->frame_bytes;
    if (d->q_packets > d->c.queue_peak) d->c.queue_peak = d->q_packets;
}

static struct linkd_packet *dir_dequeue(struct linkd_dir *d)
{
    struct linkd_packet *pkt = container_of(fifo_pop(&d->queue), struct linkd_packet, link);
    d->q_packets -= pkt->segs;
    d->q_bytes -= pkt->frame_bytes;
    return pkt;
}

/* ---- the ends of a direction: TAPs, or a cut link's underlay socket ---- */

static int dir_index(const struct linkd_dir *d)
{
    return d == &d->link->dir[0] ? 0 : 1;
}

/* Direction d reads its frames from the underlay. */
static bool dir_from_underlay(const struct linkd_dir *d)
{
    return d->link->cut.end == dir_index(d);
}

static bool dir_to_underlay(const struct linkd_dir *d)
{
    return d->link->cut.end == 1 - dir_index(d);
}

/* A cut link's direction is emulated by both machines' linkds: the
 * sender's the queue, rate and loss (where a wire's transmitter is), the
 * receiver's the delay and jitter, so that the receiver can date a frame
 * back by the wake-ups it waited on both machines (underlay.h) before the
 * delay starts. p: what one direction of the link is given; the part of
 * it that this end of d applies is kept. */
static void dir_keep_own_params(const struct linkd_dir *d, struct linkd_params *p)
{
    if (dir_to_underlay(d)) {
        p->delay_ns = p->jitter_ns = 0;
    } else if (dir_from_underlay(d)) {
        struct linkd_params own;
        linkd_params_default(&own);
        own.delay_ns = p->delay_ns;
        own.jitter_ns = p->jitter_ns;
        own.jitter_dist = p->jitter_dist;
        own.reorder = p->reorder;
        own.queue = 0; /* the sender's queue bounded it */
        *p = own;
    }
}

/* One frame (virtio-net header first) into buf; 0: nothing to forward.
 * *late_ns: how long it waited on the other machine's linkd. */
static ssize_t dir_read(struct linkd_dir *d, unsigned char *buf, int64_t *late_ns)
{
    *late_ns = 0;
    if (!dir_from_underlay(d)) return read(d->in_fd, buf, LINKD_LARGE_BUF);
    uint32_t late_us = 0;
    ssize_t n = linkd_underlay_recv(d->in_fd, d->link->cut.vni, buf, LINKD_LARGE_BUF, VNET_HDR_LEN,
                                    &late_us);
    *late_ns = (int64_t)late_us * 1000;
    return n;
}

/* How late a frame due at `due` leaves now, in µs, for the receiver. */
static uint32_t late_us_since(int64_t due)
{
    int64_t late = linkd_now() - due;
    return late <= 0                               ? 0
           : late / 1000 > LINKD_UNDERLAY_LATE_MAX ? LINKD_UNDERLAY_LATE_MAX
                                                   : (uint32_t)(late / 1000);
}

/* ---- transmitter, delay line, egress ---- */

/* due: when the frame should leave (its release, or its arrival when it
 * cuts through). */
static void dir_write(struct linkd_dir *d, struct linkd_packet *pkt, int64_t due)
{
    ssize_t n, want = (ssize_t)pkt->len;
    if (dir_to_underlay(d)) {
        want -= VNET_HDR_LEN;
        n = linkd_underlay_send(d->out_fd, d->link->cut.vni, late_us_since(due), pkt->data,
                                pkt->len, VNET_HDR_LEN);
    } else {
        n = write(d->out_fd, pkt->data, pkt->len);
    }
    if (n == want) {
        d->c.delivered += pkt->segs;
        d->c.delivered_bytes += pkt->frame_bytes;
        return;
    }
    /* Typically EIO while the egress interface is down, or ECONNREFUSED
     * while the other machine's linkd is not up yet; say so once. */
    if (!d->c.drops_write)
        linkd_log("link %lld: write to %s failed: %s", (long long)d->link->id,
                  dir_to_underlay(d) ? "the underlay" : "TAP",
                  n < 0 ? strerror(errno) : "short write");
    d->c.drops_write += pkt->segs;
}

/* A serialized frame enters the delay line. */
static void dir_launch(struct linkd_dir *d, struct linkd_packet *pkt, int64_t sent)
{
    int64_t release = sent + d->p.delay_ns + dir_jitter(d);
    if (release < sent) release = sent;
    if (!d->p.reorder && release < d->last_release) release = d->last_release;
    if (release > d->last_release) d->last_release = release;
    if (linkd_timerq_push(&d->delay_line, &pkt->node, release) < 0) {
        d->c.drops_nobuf += pkt->segs;
        linkd_pool_put(&d->link->pool, pkt);
    }
}

/* Serializes every queued frame whose transmission starts by `now`. */
static void dir_transmit_scheduled(struct linkd_dir *d, int64_t now);
static void dir_transmit(struct linkd_dir *d, int64_t now)
{
    if (d->sched.n) return dir_transmit_scheduled(d, now);
    while (!fifo_empty(&d->queue) && d->tx_free_at <= now) {
        struct linkd_packet *pkt = dir_dequeue(d);
        int64_t start = pkt->arrival > d->tx_free_at ? pkt->arrival : d->tx_free_at;
        d->tx_free_at = start + dir_serialize_ns(d, pkt->wire_bytes);
        dir_launch(d, pkt, d->tx_free_at);
    }
}

static int64_t schedule_next_at(const struct linkd_schedule *s)
{
    return s->t0 + s->round * s->period_ns + s->at_ns[s->next];
}

/* The IP packet's bytes (Ethernet headers off), what Mahimahi counts. */
static uint32_t packet_ip_bytes(const struct linkd_packet *pkt)
{
    int64_t ip = (int64_t)pkt->frame_bytes - (int64_t)pkt->segs * ETH_HEADER_BYTES;
    return ip > 0 ? (uint32_t)ip : 1;
}

/* One opportunity at `at`: up to LINKD_SCHEDULE_BYTES of the packets that
 * had arrived by then. */
static void dir_use_opportunity(struct linkd_dir *d, int64_t at)
{
    struct linkd_schedule *s = &d->sched;
    uint32_t budget = LINKD_SCHEDULE_BYTES;
    struct linkd_packet *head;
    while (budget && (head = dir_head(d)) && head->arrival <= at) {
        if (!s->head_left) s->head_left = packet_ip_bytes(head);
        uint32_t take = budget < s->head_left ? budget : s->head_left;
        s->head_left -= take;
        budget -= take;
        if (!s->head_left) dir_launch(d, dir_dequeue(d), at);
    }
}

/* Every opportunity due by `now`, in order. */
static void dir_transmit_scheduled(struct linkd_dir *d, int64_t now)
{
    struct linkd_schedule *s = &d->sched;
    int64_t at;
    while ((at = schedule_next_at(s)) <= now) {
        if (++s->next == s->n) {
            s->next = 0;
            s->round++;
        }
        dir_use_opportunity(d, at);
    }
}

static void dir_deliver(struct linkd_dir *d, int64_t now)
{
    struct linkd_timerq_node *n;
    while ((n = linkd_timerq_peek(&d->delay_line)) && n->at <= now) {
        linkd_timerq_pop(&d->delay_line);
        struct linkd_packet *pkt = container_of(n, struct linkd_packet, node);
        dir_write(d, pkt, n->at);
        linkd_pool_put(&d->link->pool, pkt);
    }
}

static int64_t dir_next_event(const struct linkd_dir *d)
{
    const struct linkd_timerq_node *n = linkd_timerq_peek(&d->delay_line);
    int64_t next = n ? n->at : INT64_MAX;
    bool queued = !fifo_empty(&d->queue);
    if (queued && d->sched.n) {
        int64_t t = schedule_next_at(&d->sched);
        if (t < next) next = t;
    } else if (queued) {
        /* Without jitter nothing serialized after tx_free_at is due before
         * tx_free_at + delay, so the transmitter may wait until then. */
        int64_t t = d->tx_free_at + (d->p.jitter_ns ? 0 : d->p.delay_ns);
        if (t < next) next = t;
    }
    return next;
}

static void dir_schedule(struct linkd_dir *d)
{
    struct linkd_timerq *events = &d->link->ld->events;
    int64_t next = dir_next_event(d);
    if (next == INT64_MAX)
        linkd_timerq_remove(events, &d->event);
    else if (linkd_timerq_queued(&d->event))
        linkd_timerq_update(events, &d->event, next);
    else if (linkd_timerq_push(events, &d->event, next) < 0)
        linkd_log("link %lld: out of memory scheduling a timer", (long long)d->link->id);
}

static void dir_process(struct linkd_dir *d, int64_t now)
{
    dir_transmit(d, now);
    dir_deliver(d, now);
    dir_schedule(d);
}

/* ---- ingress ---- */

/* Unshaped, undelayed and idle: the frame can go out straight away without
 * a copy or a timer. */
static bool dir_can_cut_through(const struct linkd_dir *d)
{
    return !d->p.rate_bps && !d->sched.n && !d->p.delay_ns && !d->p.jitter_ns &&
           fifo_empty(&d->queue) && !linkd_timerq_peek(&d->delay_line);
}

/* Moves the frame just read into d->spare into a buffer of its own:
 * a small one (copy) if it fits, else the spare itself. */
static struct linkd_packet *dir_take_buffer(struct linkd_dir *d)
{
    struct linkd_packet *spare = d->spare;
    if (spare->len > LINKD_SMALL_BUF) {
        d->spare = NULL;
        return spare;
    }
    struct linkd_packet *pkt = linkd_pool_get(&d->link->pool, false);
    if (!pkt) return NULL;
    memcpy(pkt->data, spare->data, spare->len);
    pkt->len = spare->len;
    pkt->arrival = spare->arrival;
    pkt->segs = spare->segs;
    pkt->frame_bytes = spare->frame_bytes;
    pkt->wire_bytes = spare->wire_bytes;
    return pkt;
}

/* The pipeline for one frame that was read into d->spare. */
static void dir_arrive(struct linkd_dir *d, uint32_t len, int64_t now)
{
    struct linkd_packet *in = d->spare;
    in->len = len;
    in->arrival = now;
    packet_measure(in, d->p.overhead);
    d->c.packets += in->segs;
    d->c.bytes += in->frame_bytes;
    if (!d->link->up) {
        d->c.drops_down += in->segs;
        return;
    }
    if (dir_lose(d)) {
        d->c.drops_loss += in->segs;
        return;
    }
    dir_transmit(d, now);
    if (dir_queue_full(d, in)) {
        d->c.drops_queue += in->segs;
        return;
    }
    dir_mark_congestion(d, in);
    if (dir_can_cut_through(d)) {
        dir_write(d, in, in->arrival);
        return;
    }
    struct linkd_packet *pkt = dir_take_buffer(d);
    if (!pkt) {
        d->c.drops_nobuf += in->segs;
        return;
    }
    dir_enqueue(d, pkt);
    dir_transmit(d, now);
}

static void dir_read_failed(struct linkd_dir *d, int err)
{
    /* EBADFD and friends: the device is gone (its namespace died). Stop
     * watching so a dead fd cannot spin the loop. */
    linkd_log("link %lld: reading TAP %c failed: %s; direction stopped", (long long)d->link->id,
              d == &d->link->dir[0] ? 'a' : 'b', strerror(err));
    ev_io_stop(d->link->ld->loop, &d->in_io);
}

static void on_tap_readable(EV_P_ ev_io *w, int revents)
{
    struct linkd_dir *d = container_of(w, struct linkd_dir, in_io);
    struct linkd *ld = d->link->ld;
    int64_t now = linkd_now();
    for (int i = 0; i < LINKD_READ_BATCH; i++) {
        if (!d->spare) d->spare = linkd_pool_get(&d->link->pool, true);
        /* Out of buffers: still drain the TAP, so the drop is ours and counted. */
        unsigned char *buf = d->spare ? d->spare->data : ld->scratch;
        int64_t late;
        ssize_t n = dir_read(d, buf, &late);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) dir_read_failed(d, errno);
            break;
        }
        now = linkd_now();
        if ((uint32_t)n < VNET_HDR_LEN + ETH_HEADER) continue; /* runt: nothing to forward */
        /* A frame found on waking waited for us as long as the CPU took to
         * wake: date it back by that, or every release would be late by an
         * idle exit (tens to hundreds of microseconds on a quiet host). */
        int64_t arrival = now - ld->wake_delay - late;
        if (!d->spare) {
            d->c.packets++;
            d->c.drops_nobuf++;
            continue;
        }
        dir_arrive(d, (uint32_t)n, arrival);
    }
    dir_process(d, now);
}

/* ---- the timer ----
 *
 * Waking a sleeping CPU costs tens of microseconds on top of the timer itself
 * (idle-state exit, VM halt), which would add to every release. So the timerfd
 * is armed wake_lead early, where wake_lead tracks the latency actually
 * observed, and the last stretch before an event is covered by an idle
 * watcher: the loop then polls without blocking, still serving every fd. On a
 * busy CPU the observed latency is small, and so is the polling. */

#define LINKD_WAKE_LEAD_MAX 150000 /* ns: bounds the polling per event */
#define LINKD_WAKE_LEAD_INIT 50000

static void linkd_run_due(struct linkd *ld, int64_t now)
{
    /* Each direction's next event is after `now` once processed; the bound
     * only guards against a bug turning this into an endless loop. */
    size_t budget = ld->events.len;
    struct linkd_timerq_node *n;
    while (budget-- > 0 && (n = linkd_timerq_peek(&ld->events)) && n->at <= now)
        dir_process(container_of(n, struct linkd_dir, event), now);
}

static void on_timer(EV_P_ ev_io *w, int revents)
{
    struct linkd *ld = container_of(w, struct linkd, timer_io);
    uint64_t expirations;
    if (read(ld->timer_fd, &expirations, sizeof expirations) < 0) {
        if (errno != EAGAIN) linkd_log("timerfd read: %s", strerror(errno));
        return; /* not expired: the timer was re-armed meanwhile */
    }
    int64_t now = linkd_now();
    int64_t late = now - ld->armed_at;
    if (late > LINKD_WAKE_LEAD_MAX) late = LINKD_WAKE_LEAD_MAX;
    if (late > 0) ld->wake_lead += (late - ld->wake_lead) / 8;
    ld->armed_at = INT64_MAX;
    linkd_run_due(ld, now);
}

/* The loop has just returned from its wait. If it slept, the frames now
 * readable arrived at most wake_lead (the wake-up latency we observe on the
 * timer) before this moment, and not before it went to sleep. */
static void on_check(EV_P_ ev_check *w, int revents)
{
    struct linkd *ld = container_of(w, struct linkd, check);
    ld->wake_delay = 0;
    if (!ld->blocked_at) return;
    int64_t slept = linkd_now() - ld->blocked_at;
    ld->wake_delay = slept < ld->wake_lead ? slept : ld->wake_lead;
    ld->blocked_at = 0;
}

static void on_poll(EV_P_ ev_idle *w, int revents)
{
    struct linkd *ld = container_of(w, struct linkd, poll);
    linkd_run_due(ld, linkd_now());
}

/* Runs before the loop blocks: poll if the earliest event is near, else arm
 * the timerfd wake_lead before it. An earlier-than-needed expiry only costs a
 * spurious wake-up, so the timerfd is re-armed only to move it earlier. */
static void on_prepare(EV_P_ ev_prepare *w, int revents)
{
    struct linkd *ld = container_of(w, struct linkd, prepare);
    /* Idle watchers never run while I/O keeps arriving, so due events are
     * also served here, once per loop iteration. */
    int64_t now = linkd_now();
    linkd_run_due(ld, now);
    struct linkd_timerq_node *n = linkd_timerq_peek(&ld->events);
    bool near = n && n->at - now <= ld->wake_lead;
    if (near != ev_is_active(&ld->poll)) {
        if (near)
            ev_idle_start(EV_A_ & ld->poll);
        else
            ev_idle_stop(EV_A_ & ld->poll);
    }
    ld->blocked_at = near ? 0 : now; /* with the idle watcher on, the loop only polls */
    if (!n || near) return;
    int64_t at = n->at - ld->wake_lead;
    if (at >= ld->armed_at) return;
    struct itimerspec its = {.it_value = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000}};
    if (timerfd_settime(ld->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        linkd_log("timerfd_settime: %s", strerror(errno));
        return;
    }
    ld->armed_at = at;
}

/* ---- the process context ---- */

int linkd_init(struct linkd *ld, struct ev_loop *loop, char *err, size_t errlen)
{
    memset(ld, 0, sizeof *ld);
    ld->loop = loop;
    ld->armed_at = INT64_MAX;
    ld->wake_lead = LINKD_WAKE_LEAD_INIT;
    ld->pool_limit = LINKD_DEFAULT_POOL_LIMIT;
    linkd_timerq_init(&ld->events);
    ld->scratch = malloc(LINKD_LARGE_BUF);
    ld->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (!ld->scratch || ld->timer_fd < 0) {
        snprintf(err, errlen, "linkd init: %s", ld->scratch ? strerror(errno) : "out of memory");
        free(ld->scratch);
        if (ld->timer_fd >= 0) close(ld->timer_fd);
        return -1;
    }
    ev_io_init(&ld->timer_io, on_timer, ld->timer_fd, EV_READ);
    ev_io_start(loop, &ld->timer_io);
    ev_prepare_init(&ld->prepare, on_prepare);
    ev_prepare_start(loop, &ld->prepare);
    ev_check_init(&ld->check, on_check);
    ev_check_start(loop, &ld->check);
    ev_idle_init(&ld->poll, on_poll);
    return 0;
}

static void link_unlist(struct linkd_link *l);
static void link_free(struct linkd_link *l, bool remove_devices);

void linkd_destroy(struct linkd *ld)
{
    /* Only closes the TAPs: persistent ones are left to their namespaces,
     * which delete them in one batch (tap.h). */
    while (ld->links) {
        struct linkd_link *l = ld->links;
        link_unlist(l);
        link_free(l, false);
    }
    ev_idle_stop(ld->loop, &ld->poll);
    ev_prepare_stop(ld->loop, &ld->prepare);
    ev_check_stop(ld->loop, &ld->check);
    ev_io_stop(ld->loop, &ld->timer_io);
    close(ld->timer_fd);
    free(ld->scratch);
    linkd_timerq_destroy(&ld->events);
}

/* ---- links ---- */

struct linkd_link *linkd_link_find(struct linkd *ld, int64_t id)
{
    for (struct linkd_link *l = ld->links; l; l = l->next)
        if (l->id == id) return l;
    return NULL;
}

/* A cut link's TAP hands over whole, checksummed frames of at most the
 * MTU: the underlay carries no virtio-net header, and a super-frame would
 * not fit its MTU. */
static bool link_is_cut(const struct linkd_link *l)
{
    return l->cut.end != LINKD_CUT_NONE;
}

static bool link_wants_tso(const struct linkd_link *l, int i)
{
    const struct linkd_params *p = &l->dir[i].p;
    if (link_is_cut(l)) return false;
    switch (l->offload) {
    case LINKD_OFFLOAD_ON:
        return true;
    case LINKD_OFFLOAD_OFF:
        return false;
    case LINKD_OFFLOAD_AUTO:
        break;
    }
    /* Loss must hit single packets, not whole super-frames; so must a
     * schedule's opportunities. */
    if (l->dir[i].sched.n) return false;
    return (p->rate_bps == 0 || p->rate_bps >= LINKD_TSO_MIN_RATE) && p->loss == 0.0 &&
           p->ge_p == 0.0;
}

/* The offloads of TAP i decide which frames direction i reads. */
static int link_apply_offload(struct linkd_link *l, bool force, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++) {
        bool tso = link_wants_tso(l, i);
        if (!force && tso == l->tso[i]) continue;
        bool csum = l->offload != LINKD_OFFLOAD_OFF && !link_is_cut(l);
        if (l->cut.end == i) continue; /* a socket: no offloads */
        if (linkd_tap_set_offload(l->fd[i], csum, tso, err, errlen) < 0) return -1;
        l->tso[i] = tso;
    }
    return 0;
}

static void dir_init(struct linkd_dir *d, struct linkd_link *l, int i, const struct linkd_params *p,
                     uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->link = l;
    d->in_fd = l->fd[i];
    d->out_fd = l->fd[1 - i];
    d->p = *p;
    dir_keep_own_params(d, &d->p);
    d->rng = seed * 2 + (uint64_t)i; /* distinct streams per direction */
    linkd_timerq_init(&d->delay_line);
    linkd_timerq_node_init(&d->event);
    ev_io_init(&d->in_io, on_tap_readable, d->in_fd, EV_READ);
}

static void link_free(struct linkd_link *l, bool remove_devices)
{
    for (int i = 0; i < 2; i++) {
        linkd_timerq_destroy(&l->dir[i].delay_line);
        free(l->dir[i].sched.at_ns);
        if (l->fd[i] < 0) continue;
        if (remove_devices)
            linkd_tap_remove(l->fd[i]);
        else
            close(l->fd[i]);
    }
    linkd_pool_destroy(&l->pool);
    free(l);
}

struct linkd_link *linkd_link_add(struct linkd *ld, int64_t id, int fd_a, int fd_b,
                                  const struct linkd_params *ab, const struct linkd_params *ba,
                                  enum linkd_offload offload, const struct linkd_cut *cut,
                                  uint64_t seed, char *err, size_t errlen)
{
    struct linkd_link *l = calloc(1, sizeof *l);
    if (!l) {
        linkd_tap_remove(fd_a); /* a failed link_add leaves no TAP, persistent or not */
        linkd_tap_remove(fd_b);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->id = id;
    l->up = true;
    l->offload = offload;
    l->cut = cut ? *cut : (struct linkd_cut){LINKD_CUT_NONE, 0};
    l->fd[0] = fd_a;
    l->fd[1] = fd_b;
    l->ld = ld;
    linkd_pool_init(&l->pool, ld->pool_limit);
    dir_init(&l->dir[0], l, 0, ab, seed);
    dir_init(&l->dir[1], l, 1, ba, seed);
    /* Reserve now so scheduling never allocates on the packet path. */
    if (linkd_timerq_reserve(&ld->events, 2 * (ld->n_links + 1)) < 0 ||
        linkd_timerq_reserve(&l->dir[0].delay_line, 256) < 0 ||
        linkd_timerq_reserve(&l->dir[1].delay_line, 256) < 0) {
        snprintf(err, errlen, "out of memory");
        link_free(l, true);
        return NULL;
    }
    if (link_apply_offload(l, true, err, errlen) < 0) {
        link_free(l, true);
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        ev_io_start(ld->loop, &l->dir[i].in_io);
    l->next = ld->links;
    ld->links = l;
    ld->n_links++;
    return l;
}

int linkd_link_set(struct linkd_link *l, int d, const struct linkd_params *p, char *err,
                   size_t errlen)
{
    if (linkd_params_check(p, err, errlen) < 0) return -1;
    struct linkd_dir *dir = &l->dir[d];
    int64_t now = linkd_now();
    /* Frames whose serialization began under the old rate keep it. */
    dir_transmit(dir, now);
    dir->p = *p;
    dir_keep_own_params(dir, &dir->p);
    if (p->ge_p == 0.0) dir->ge_bad = false;
    int rc = link_apply_offload(l, false, err, errlen);
    dir_process(dir, now);
    return rc;
}

void linkd_link_schedule(struct linkd_link *l, int d, int64_t *at_ns, size_t n, int64_t period_ns)
{
    struct linkd_dir *dir = &l->dir[d];
    if (dir_from_underlay(dir)) { /* its transmitter is the other machine's */
        free(at_ns);
        return;
    }
    int64_t now = linkd_now();
    dir_transmit(dir, now); /* what the old rule let out by now goes out */
    free(dir->sched.at_ns);
    dir->sched = (struct linkd_schedule){at_ns, n, period_ns, now, 0, 0, 0};
    if (!n) {
        free(at_ns);
        dir->sched.at_ns = NULL;
        dir->tx_free_at = now; /* the rate takes over from here */
    }
    char err[128];
    if (link_apply_offload(l, false, err, sizeof err) < 0)
        linkd_log("link %lld: %s", (long long)l->id, err);
    dir_process(dir, now);
}

static void dir_flush(struct linkd_dir *d)
{
    d->sched.head_left = 0;
    while (!fifo_empty(&d->queue)) {
        struct linkd_packet *pkt = dir_dequeue(d);
        d->c.drops_down += pkt->segs;
        linkd_pool_put(&d->link->pool, pkt);
    }
    struct linkd_timerq_node *n;
    while ((n = linkd_timerq_pop(&d->delay_line))) {
        struct linkd_packet *pkt = container_of(n, struct linkd_packet, node);
        d->c.drops_down += pkt->segs;
        linkd_pool_put(&d->link->pool, pkt);
    }
    d->last_release = 0;
    d->tx_free_at = 0; /* the transmitter stops with the link */
    dir_schedule(d);
}

void linkd_link_set_up(struct linkd_link *l, bool up)
{
    if (l->up == up) return;
    int64_t now = linkd_now();
    for (int i = 0; i < 2; i++) {
        dir_process(&l->dir[i], now); /* what was due before the change goes out */
        if (!up) dir_flush(&l->dir[i]);
    }
    l->up = up;
}

void linkd_link_sync(struct linkd_link *l)
{
    int64_t now = linkd_now();
    for (int i = 0; i < 2; i++)
        dir_process(&l->dir[i], now);
}

uint32_t linkd_dir_in_flight(const struct linkd_dir *d)
{
    return (uint32_t)d->delay_line.len;
}

/* Takes the link out of the loop and the list. */
static void link_unlist(struct linkd_link *l)
{
    struct linkd *ld = l->ld;
    for (struct linkd_link **pp = &ld->links; *pp; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            ld->n_links--;
            break;
        }
    }
    for (int i = 0; i < 2; i++) {
        ev_io_stop(ld->loop, &l->dir[i].in_io);
        linkd_timerq_remove(&ld->events, &l->dir[i].event);
    }
}

void linkd_link_del(struct linkd_link *l)
{
    link_unlist(l);
    link_free(l, true);
}
