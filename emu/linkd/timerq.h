/* timerq.h — binary min-heap of release times for hiernet-linkd.
 *
 * Provides an intrusive priority queue ordered by (time, insertion order):
 * owners embed a struct linkd_timerq_node and recover themselves with
 * container_of. Ties keep insertion order, which is what lets a link's delay
 * line stay FIFO when many packets share one release time. linkd uses one
 * queue for the links' next events (keys updated in place) and one per
 * direction for packets in flight (push/pop only).
 *
 * The queue owns only its array of node pointers, never the nodes. The array
 * grows by doubling when full; callers reserve up front so that the steady
 * state does not allocate. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define LINKD_TIMERQ_NONE SIZE_MAX /* index of a node not in any queue */

struct linkd_timerq_node {
    int64_t at;   /* release time, CLOCK_MONOTONIC ns */
    uint64_t seq; /* tie-break: insertion order */
    size_t index; /* position in the heap, LINKD_TIMERQ_NONE when not queued */
};

struct linkd_timerq {
    struct linkd_timerq_node **heap;
    size_t len, cap;
    uint64_t next_seq;
};

void linkd_timerq_init(struct linkd_timerq *q);
void linkd_timerq_destroy(struct linkd_timerq *q);
/* Makes room for at least cap nodes. 0 on success, -1 when out of memory. */
int linkd_timerq_reserve(struct linkd_timerq *q, size_t cap);
static inline void linkd_timerq_node_init(struct linkd_timerq_node *n)
{
    n->index = LINKD_TIMERQ_NONE;
}
static inline int linkd_timerq_queued(const struct linkd_timerq_node *n)
{
    return n->index != LINKD_TIMERQ_NONE;
}
/* Inserts n (not queued) at time `at`. -1 only when growing the array fails. */
int linkd_timerq_push(struct linkd_timerq *q, struct linkd_timerq_node *n, int64_t at);
/* Moves a queued node to a new time; it keeps its place among equal times
 * only if the time is unchanged. */
void linkd_timerq_update(struct linkd_timerq *q, struct linkd_timerq_node *n, int64_t at);
/* Removes n if queued; a no-op otherwise. */
void linkd_timerq_remove(struct linkd_timerq *q, struct linkd_timerq_node *n);
static inline struct linkd_timerq_node *linkd_timerq_peek(const struct linkd_timerq *q)
{
    return q->len ? q->heap[0] : NULL;
}
struct linkd_timerq_node *linkd_timerq_pop(struct linkd_timerq *q);
