/* common/fifo.h: the one intrusive FIFO queue (the peer's worker jobs and
 * data-plane sends, the Lua scheduler's ready tasks, hiernet-linkd's
 * frames waiting for a direction's transmitter). An item embeds a
 * struct fifo_link and is recovered from it with container_of, so queueing
 * allocates nothing and cannot fail. Header only; owns nothing (the items
 * stay their queuer's); no locking (callers that share a queue lock it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct fifo_link {
    struct fifo_link *next;
};

struct fifo {
    struct fifo_link *head, *tail; /* both NULL when empty */
};

static inline bool fifo_empty(const struct fifo *q)
{
    return q->head == NULL;
}

/* The oldest item, left queued; NULL when empty. */
static inline struct fifo_link *fifo_first(const struct fifo *q)
{
    return q->head;
}

static inline void fifo_push(struct fifo *q, struct fifo_link *item)
{
    item->next = NULL;
    if (q->tail)
        q->tail->next = item;
    else
        q->head = item;
    q->tail = item;
}

/* Takes the oldest item off; NULL when empty. */
static inline struct fifo_link *fifo_pop(struct fifo *q)
{
    struct fifo_link *item = q->head;
    if (item) {
        q->head = item->next;
        if (!q->head) q->tail = NULL;
    }
    return item;
}
