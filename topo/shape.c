/* shape.c — qdisc parameters for one shaped direction of a link (see shape.h).
 *
 * Sizing rules, and why:
 * - Rates count whole Ethernet frames as the kernel sees them on a veth
 *   (MTU + 14 bytes, no preamble/FCS/gap). GSO super-packets are charged for
 *   every segment's headers (qdisc_pkt_len_init), so accounting stays exact.
 * - The bucket depth is 1 ms at the rate (at least two frames): the qdisc
 *   watchdog fires late under load, and tokens that arrive while it sleeps are
 *   lost once the bucket is full; 1 ms covers that lateness at any rate, which
 *   is what lets multi-Gbit rates reach their target. HTB's per-class buffer
 *   is a u32 of 64 ns ticks, saturated rather than wrapped.
 * - The queue defaults to the bandwidth-delay product of the round trip,
 *   never less than 100 full frames nor 2 ms at the rate: TSO hands the
 *   qdisc 64 KiB bursts, and at multi-Gbit rates a 100-frame queue dropped
 *   enough of them to cost 3-30% of the goodput (measured at 4 and 8 Gbit/s
 *   on a 2-core host; 2 ms brought it within 1%). The leaf without netem is a bfifo
 *   (bytes), because a packet-counting fifo would hold up to 64 KiB per GSO
 *   packet and so give a queue 40 times longer than asked.
 * - netem holds the queue and every packet in its delay line, so its limit is
 *   the queue plus twice the frames in flight over delay + jitter at the rate:
 *   netem's limit must never be what caps throughput. */
#include "topo/shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int topo_shape_needs_netem(const struct topo_shape_request *request)
{
    return request->delay_ns > 0 || request->jitter_ns > 0 || request->loss > 0;
}

uint32_t topo_shape_ticks(uint64_t nanoseconds)
{
    uint64_t ticks = nanoseconds >> TOPO_SHAPE_PSCHED_SHIFT;
    return ticks > UINT32_MAX ? UINT32_MAX : (uint32_t)ticks;
}

uint64_t topo_shape_default_queue_bytes(uint64_t rate_bps, uint64_t rtt_ns, uint32_t frame_bytes)
{
    /* long double keeps rate * rtt exact enough without overflow. */
    long double bytes_per_ns = (long double)rate_bps / 8.0L / 1e9L;
    uint64_t bdp = (uint64_t)ceill(bytes_per_ns * (long double)rtt_ns);
    uint64_t floor_time = (uint64_t)ceill(bytes_per_ns * (long double)TOPO_SHAPE_QUEUE_MIN_NS);
    uint64_t floor_frames = (uint64_t)TOPO_SHAPE_QUEUE_MIN_FRAMES * frame_bytes;
    uint64_t bytes = bdp > floor_time ? bdp : floor_time;
    return bytes > floor_frames ? bytes : floor_frames;
}

uint64_t topo_shape_bdp_bytes(double multiple, uint64_t rate_bps, uint64_t rtt_ns,
                              uint32_t frame_bytes)
{
    long double bytes =
        (long double)multiple * (long double)rate_bps / 8.0L * (long double)rtt_ns / 1e9L;
    uint64_t floor_frames = 2ULL * frame_bytes;
    uint64_t b = (uint64_t)ceill(bytes);
    return b > floor_frames ? b : floor_frames;
}

double topo_shape_tcp_goodput_bps(uint64_t rate_bps, uint32_t mtu)
{
    if (mtu == 0) mtu = TOPO_SHAPE_DEFAULT_MTU;
    return (double)rate_bps * (double)(mtu - 20 - 32) / (double)(mtu + TOPO_SHAPE_ETH_HLEN);
}

static int shape_validate(const struct topo_shape_request *request, char *err, size_t errlen)
{
    if (request->mtu && (request->mtu < 68 || request->mtu > 65535)) {
        snprintf(err, errlen, "bad mtu %u: must be between 68 and 65535", request->mtu);
        return -1;
    }
    if (!(request->loss >= 0.0 && request->loss <= 1.0)) {
        snprintf(err, errlen, "bad loss %g: must be a fraction between 0 and 1", request->loss);
        return -1;
    }
    if (request->jitter_ns > request->delay_ns) {
        char jitter[32], delay[32];
        topo_units_format_time(request->jitter_ns, jitter, sizeof jitter);
        topo_units_format_time(request->delay_ns, delay, sizeof delay);
        snprintf(err, errlen, "bad jitter %s: larger than the delay %s", jitter, delay);
        return -1;
    }
    if (request->queue.packets && request->queue.bytes) {
        snprintf(err, errlen, "bad queue: give packets or bytes, not both");
        return -1;
    }
    return 0;
}

static void shape_rate(uint64_t rate_bps, uint32_t frame_bytes, struct topo_shape_rate *rate)
{
    uint64_t bytes_per_second = (rate_bps + 4) / 8;
    uint64_t burst, quantum;

    if (bytes_per_second == 0) bytes_per_second = 1;
    burst = bytes_per_second * TOPO_SHAPE_BURST_NS / 1000000000ULL;
    if (burst < 2ULL * frame_bytes) burst = 2ULL * frame_bytes;
    if (burst > UINT32_MAX) burst = UINT32_MAX;
    quantum = bytes_per_second / 10; /* HTB's own default: rate / r2q, r2q = 10 */
    if (quantum < frame_bytes) quantum = frame_bytes;
    if (quantum > TOPO_SHAPE_QUANTUM_MAX) quantum = TOPO_SHAPE_QUANTUM_MAX;

    rate->bytes_per_second = bytes_per_second;
    rate->burst_bytes = (uint32_t)burst;
    rate->buffer_ticks =
        topo_shape_ticks((uint64_t)((long double)burst * 1e9L / (long double)bytes_per_second));
    rate->quantum = (uint32_t)quantum;
}

/* The queue in bytes and in full frames, from the request or the BDP. */
static int shape_queue(const struct topo_shape_request *request, uint32_t frame_bytes,
                       struct topo_shape_plan *plan, char *err, size_t errlen)
{
    uint64_t rate = request->rate_bps ? request->rate_bps : TOPO_SHAPE_UNSHAPED_BPS;
    uint64_t rtt = request->rtt_ns ? request->rtt_ns : 2 * (request->delay_ns + request->jitter_ns);
    uint64_t bytes;

    if (request->queue.packets)
        bytes = request->queue.packets * frame_bytes;
    else if (request->queue.bytes)
        bytes = request->queue.bytes;
    else
        bytes = topo_shape_default_queue_bytes(rate, rtt, frame_bytes);
    if (bytes > UINT32_MAX) {
        snprintf(err, errlen, "bad queue: %llu bytes is more than a qdisc can hold (4 GiB)",
                 (unsigned long long)bytes);
        return -1;
    }
    plan->queue_bytes = (uint32_t)bytes;
    plan->queue_packets = (uint32_t)((bytes + frame_bytes - 1) / frame_bytes);
    return 0;
}

static void shape_netem(const struct topo_shape_request *request, struct topo_shape_plan *plan)
{
    uint64_t rate = request->rate_bps ? request->rate_bps : TOPO_SHAPE_UNSHAPED_BPS;
    long double line_ns = (long double)(request->delay_ns + request->jitter_ns);
    long double in_flight = (long double)rate / 8.0L * line_ns / 1e9L / plan->frame_bytes;
    long double limit = (long double)plan->queue_packets + ceill(2.0L * in_flight);

    plan->netem.latency_ns = request->delay_ns;
    plan->netem.jitter_ns = request->jitter_ns;
    plan->netem.loss = (uint32_t)llroundl((long double)request->loss * UINT32_MAX);
    plan->netem.limit = limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit;
}

int topo_shape_plan(const struct topo_shape_request *request, int have_netem,
                    struct topo_shape_plan *plan, char *err, size_t errlen)
{
    uint32_t mtu = request->mtu ? request->mtu : TOPO_SHAPE_DEFAULT_MTU;
    int needs_netem = topo_shape_needs_netem(request);

    memset(plan, 0, sizeof *plan);
    if (shape_validate(request, err, errlen) < 0) return -1;
    if (needs_netem && !have_netem) {
        snprintf(err, errlen,
                 "delay, jitter and loss need the kernel's sch_netem, which this "
                 "kernel lacks: use backend \"user\" (hiernet-linkd)");
        return -1;
    }
    plan->frame_bytes = mtu + TOPO_SHAPE_ETH_HLEN;
    plan->root = request->root;
    plan->has_rate = request->rate_bps > 0;
    if (plan->has_rate) shape_rate(request->rate_bps, plan->frame_bytes, &plan->rate);
    if (shape_queue(request, plan->frame_bytes, plan, err, errlen) < 0) return -1;
    plan->leaf = needs_netem      ? TOPO_SHAPE_LEAF_NETEM
                 : plan->has_rate ? TOPO_SHAPE_LEAF_BFIFO
                                  : TOPO_SHAPE_LEAF_NONE;
    if (needs_netem) shape_netem(request, plan);
    return 0;
}
