/* shape.h — qdisc parameters for one shaped direction of a link.
 *
 * Provides the pure computation that turns what a scenario asks of a link
 * direction (rate, delay, jitter, loss, queue) into the numbers the kernel
 * qdiscs take: HTB or TBF rate/burst/quantum in bytes and kernel ticks, the
 * leaf queue limit (from the bandwidth-delay product when not given) and the
 * netem delay line and limit. nl_qdisc.c turns a plan into netlink messages.
 * Owns nothing: no allocation, no system calls; unit-tested without root.
 *
 * The qdisc tree a plan describes, on the egress of one interface:
 *   rate and netem:   root 1: htb|tbf -> class 1:1 -> leaf 10: netem
 *   rate only:        root 1: htb|tbf -> class 1:1 -> leaf 10: bfifo
 *   netem only:       root 10: netem
 *   nothing:          no qdisc (the veth default, noqueue)
 * (TBF has its class 1:1 built in; its leaf replaces TBF's internal bfifo.) */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "topo/units.h"

#define TOPO_SHAPE_ETH_HLEN 14             /* veth frames carry an Ethernet header, no FCS */
#define TOPO_SHAPE_DEFAULT_MTU 1500        /* used when the request leaves mtu at 0 */
#define TOPO_SHAPE_BURST_NS 1000000ULL     /* token bucket depth: 1 ms at the rate */
#define TOPO_SHAPE_QUANTUM_MAX 200000      /* above this HTB warns "quantum is big" */
#define TOPO_SHAPE_QUEUE_MIN_FRAMES 100    /* default queue floor, full frames */
#define TOPO_SHAPE_QUEUE_MIN_NS 2000000ULL /* ... and at least 2 ms at the rate */
/* Rate assumed to size netem's delay line when the link has no rate limit. */
#define TOPO_SHAPE_UNSHAPED_BPS 10000000000ULL
#define TOPO_SHAPE_PSCHED_SHIFT 6 /* kernel tick = 64 ns (PSCHED_SHIFT) */

/* The qdisc handles a plan uses (the kernel's u32 major:minor; tc writes
 * both halves in hex, so 0x00100000 is what `tc` shows as 10:). */
#define TOPO_SHAPE_ROOT_HANDLE 0x00010000U  /* 1: */
#define TOPO_SHAPE_CLASS_HANDLE 0x00010001U /* 1:1 */
#define TOPO_SHAPE_LEAF_HANDLE 0x00100000U  /* 10: */

enum topo_shape_root {
    TOPO_SHAPE_ROOT_HTB, /* HTB class: the Mininet TCLink construction */
    TOPO_SHAPE_ROOT_TBF, /* token bucket filter: one qdisc less */
};

enum topo_shape_leaf {
    TOPO_SHAPE_LEAF_NONE,  /* no rate and no netem: nothing to install */
    TOPO_SHAPE_LEAF_BFIFO, /* byte-limited drop-tail queue */
    TOPO_SHAPE_LEAF_NETEM, /* delay line with jitter and loss, packet limit */
};

/* What a scenario asks of one direction; zero means "not set". */
struct topo_shape_request {
    uint64_t rate_bps;             /* 0 = no rate limit */
    uint64_t delay_ns;             /* one-way */
    uint64_t jitter_ns;            /* +/- around delay */
    double loss;                   /* fraction in [0, 1] */
    struct topo_units_queue queue; /* both 0 = derive from the BDP */
    uint32_t mtu;                  /* L3 MTU; 0 = TOPO_SHAPE_DEFAULT_MTU */
    uint64_t rtt_ns;               /* round trip the queue must cover; 0 = 2*(delay+jitter) */
    enum topo_shape_root root;
};

struct topo_shape_rate {
    uint64_t bytes_per_second;
    uint32_t burst_bytes;  /* token bucket depth; also HTB cburst */
    uint32_t buffer_ticks; /* the same depth in kernel ticks */
    uint32_t quantum;      /* HTB only: bytes per DRR round */
};

struct topo_shape_netem {
    uint64_t latency_ns;
    uint64_t jitter_ns;
    uint32_t loss;  /* probability scaled to 0..UINT32_MAX, as the kernel takes it */
    uint32_t limit; /* packets: queue plus the delay line */
};

struct topo_shape_plan {
    int has_rate; /* a root htb/tbf with class 1:1 */
    enum topo_shape_root root;
    struct topo_shape_rate rate;
    enum topo_shape_leaf leaf;
    uint32_t queue_bytes;   /* bfifo limit, and TBF's own limit */
    uint32_t queue_packets; /* the same queue in full frames */
    struct topo_shape_netem netem;
    uint32_t frame_bytes; /* MTU + Ethernet header */
};

/* True when the request needs sch_netem (delay, jitter or loss). */
int topo_shape_needs_netem(const struct topo_shape_request *request);

/* Computes the plan. have_netem says whether the kernel has sch_netem; a
 * request that needs it on a kernel without it fails with a message naming
 * the user backend rather than silently dropping the parameter. Returns 0,
 * or -1 with a one-line message in err. */
int topo_shape_plan(const struct topo_shape_request *request, int have_netem,
                    struct topo_shape_plan *plan, char *err, size_t errlen);

/* Nanoseconds to kernel psched ticks, saturating at UINT32_MAX. */
uint32_t topo_shape_ticks(uint64_t nanoseconds);

/* A queue of `multiple` bandwidth-delay products of a link of rate_bps
 * whose round trip over the link is rtt_ns (2 x (delay + jitter)), in
 * bytes, never less than 2 frames (a link without delay has no BDP, and
 * TCP needs a frame in the queue besides the one on the wire). */
uint64_t topo_shape_bdp_bytes(double multiple, uint64_t rate_bps, uint64_t rtt_ns,
                              uint32_t frame_bytes);

/* Default queue in bytes: the bandwidth-delay product of rtt at rate, at
 * least TOPO_SHAPE_QUEUE_MIN_FRAMES full frames and TOPO_SHAPE_QUEUE_MIN_NS
 * at the rate. */
uint64_t topo_shape_default_queue_bytes(uint64_t rate_bps, uint64_t rtt_ns, uint32_t frame_bytes);

/* Application goodput a saturated TCP flow can reach through a rate limit
 * that counts frame bytes: rate * mss / frame, where mss = mtu - 20 (IPv4)
 * - 32 (TCP with timestamps). For test and benchmark expectations. */
double topo_shape_tcp_goodput_bps(uint64_t rate_bps, uint32_t mtu);
