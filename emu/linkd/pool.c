/* pool.c — preallocated packet buffers (see pool.h). */
#include "emu/linkd/pool.h"

#include <stdlib.h>

/* Chunk sizes: big enough that growth is rare, small enough that an idle
 * link costs little (256 KiB small, ~540 KiB large). */
#define POOL_SMALL_PER_CHUNK 128u
#define POOL_LARGE_PER_CHUNK 8u

struct linkd_pool_chunk {
    struct linkd_pool_chunk *next;
    /* followed by the packet headers, then the buffers */
};

void linkd_pool_init(struct linkd_pool *pool, size_t limit)
{
    pool->free_small = pool->free_large = NULL;
    pool->chunks = NULL;
    pool->bytes = 0;
    pool->limit = limit;
    pool->in_use = 0;
}

void linkd_pool_destroy(struct linkd_pool *pool)
{
    struct linkd_pool_chunk *c = pool->chunks;
    while (c) {
        struct linkd_pool_chunk *next = c->next;
        free(c);
        c = next;
    }
    linkd_pool_init(pool, pool->limit);
}

/* Allocates one chunk of `large` buffers and threads them onto the free list. */
static int pool_grow(struct linkd_pool *pool, bool large)
{
    size_t count = large ? POOL_LARGE_PER_CHUNK : POOL_SMALL_PER_CHUNK;
    size_t bufsize = large ? LINKD_LARGE_BUF : LINKD_SMALL_BUF;
    size_t headers = sizeof(struct linkd_pool_chunk) + count * sizeof(struct linkd_packet);
    headers = (headers + 63) & ~(size_t)63; /* buffers start cache-line aligned */
    size_t total = headers + count * bufsize;
    if (pool->bytes + total > pool->limit) return -1;
    struct linkd_pool_chunk *chunk = aligned_alloc(64, total);
    if (!chunk) return -1;
    chunk->next = pool->chunks;
    pool->chunks = chunk;
    pool->bytes += total;

    struct linkd_packet *pkts = (struct linkd_packet *)(chunk + 1);
    unsigned char *bufs = (unsigned char *)chunk + headers;
    struct linkd_packet **free_list = large ? &pool->free_large : &pool->free_small;
    for (size_t i = 0; i < count; i++) {
        struct linkd_packet *p = &pkts[i];
        linkd_timerq_node_init(&p->node);
        p->large = large;
        p->data = bufs + i * bufsize;
        p->next = *free_list;
        *free_list = p;
    }
    return 0;
}

struct linkd_packet *linkd_pool_get(struct linkd_pool *pool, bool large)
{
    struct linkd_packet **free_list = large ? &pool->free_large : &pool->free_small;
    if (!*free_list && pool_grow(pool, large) < 0) return NULL;
    struct linkd_packet *p = *free_list;
    *free_list = p->next;
    p->next = NULL;
    pool->in_use++;
    return p;
}

void linkd_pool_put(struct linkd_pool *pool, struct linkd_packet *pkt)
{
    struct linkd_packet **free_list = pkt->large ? &pool->free_large : &pool->free_small;
    pkt->next = *free_list;
    *free_list = pkt;
    pool->in_use--;
}
