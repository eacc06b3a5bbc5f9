/* pool.h — preallocated packet buffers of one hiernet-linkd link.
 *
 * Provides struct linkd_packet (one frame plus its pipeline metadata) and a
 * pool that hands them out in two sizes: small buffers for frames up to a
 * plain Ethernet MTU, large ones for GSO super-frames and jumbo frames. The
 * pool grows in chunks until its byte limit and never shrinks, so a link in
 * steady state does no per-packet allocation. The pool owns every chunk; a
 * packet taken with linkd_pool_get belongs to the caller until it is given
 * back with linkd_pool_put. */
#pragma once

#include "emu/linkd/timerq.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/fifo.h" /* struct fifo_link, which every packet embeds */

/* A small buffer holds the 10-byte virtio-net header, a VLAN-tagged 1500-byte
 * frame and slack; a large one the biggest GSO frame tun hands out (64 KiB IP
 * packet plus link-layer header). */
#define LINKD_SMALL_BUF 2048u
#define LINKD_LARGE_BUF (65536u + 4096u)

struct linkd_packet {
    struct linkd_timerq_node node; /* position in the delay line */
    struct fifo_link link;         /* position in its direction's queue */
    struct linkd_packet *next;     /* free list */
    int64_t arrival;               /* read from the ingress TAP, CLOCK_MONOTONIC ns */
    uint32_t len;                  /* bytes in data, virtio-net header included */
    uint32_t frame_bytes;          /* Ethernet bytes after segmentation (no FCS) */
    uint32_t wire_bytes;           /* frame_bytes plus per-frame overhead: what the rate sees */
    uint32_t segs;                 /* packets on the wire: 1, or the GSO segment count */
    bool large;
    unsigned char *data;
};

struct linkd_pool_chunk;

struct linkd_pool {
    struct linkd_packet *free_small, *free_large;
    struct linkd_pool_chunk *chunks;
    size_t bytes; /* allocated so far */
    size_t limit; /* never allocate past this */
    size_t in_use;
};

void linkd_pool_init(struct linkd_pool *pool, size_t limit);
/* Frees every chunk; packets still out are invalid afterwards. */
void linkd_pool_destroy(struct linkd_pool *pool);
/* NULL when the pool is at its limit (or malloc fails). */
struct linkd_packet *linkd_pool_get(struct linkd_pool *pool, bool large);
void linkd_pool_put(struct linkd_pool *pool, struct linkd_packet *pkt);
