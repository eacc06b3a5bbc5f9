/* timerq.c — binary min-heap of release times (see timerq.h). */
#include "emu/linkd/timerq.h"

#include <stdbool.h>
#include <stdlib.h>

void linkd_timerq_init(struct linkd_timerq *q)
{
    q->heap = NULL;
    q->len = q->cap = 0;
    q->next_seq = 0;
}

void linkd_timerq_destroy(struct linkd_timerq *q)
{
    for (size_t i = 0; i < q->len; i++)
        q->heap[i]->index = LINKD_TIMERQ_NONE;
    free(q->heap);
    linkd_timerq_init(q);
}

int linkd_timerq_reserve(struct linkd_timerq *q, size_t cap)
{
    if (cap <= q->cap) return 0;
    struct linkd_timerq_node **h = realloc(q->heap, cap * sizeof *h);
    if (!h) return -1;
    q->heap = h;
    q->cap = cap;
    return 0;
}

static bool timerq_before(const struct linkd_timerq_node *a, const struct linkd_timerq_node *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void timerq_place(struct linkd_timerq *q, size_t i, struct linkd_timerq_node *n)
{
    q->heap[i] = n;
    n->index = i;
}

static void timerq_sift_up(struct linkd_timerq *q, size_t i)
{
    struct linkd_timerq_node *n = q->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!timerq_before(n, q->heap[parent])) break;
        timerq_place(q, i, q->heap[parent]);
        i = parent;
    }
    timerq_place(q, i, n);
}

static void timerq_sift_down(struct linkd_timerq *q, size_t i)
{
    struct linkd_timerq_node *n = q->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= q->len) break;
        if (child + 1 < q->len && timerq_before(q->heap[child + 1], q->heap[child])) child++;
        if (!timerq_before(q->heap[child], n)) break;
        timerq_place(q, i, q->heap[child]);
        i = child;
    }
    timerq_place(q, i, n);
}

int linkd_timerq_push(struct linkd_timerq *q, struct linkd_timerq_node *n, int64_t at)
{
    if (q->len == q->cap && linkd_timerq_reserve(q, q->cap ? 2 * q->cap : 64) < 0) return -1;
    n->at = at;
    n->seq = q->next_seq++;
    timerq_place(q, q->len++, n);
    timerq_sift_up(q, n->index);
    return 0;
}

void linkd_timerq_update(struct linkd_timerq *q, struct linkd_timerq_node *n, int64_t at)
{
    if (n->at == at) return;
    n->at = at;
    n->seq = q->next_seq++;
    timerq_sift_up(q, n->index);
    timerq_sift_down(q, n->index);
}

void linkd_timerq_remove(struct linkd_timerq *q, struct linkd_timerq_node *n)
{
    size_t i = n->index;
    if (i == LINKD_TIMERQ_NONE) return;
    n->index = LINKD_TIMERQ_NONE;
    struct linkd_timerq_node *last = q->heap[--q->len];
    if (i == q->len) return;
    timerq_place(q, i, last);
    timerq_sift_up(q, i);
    timerq_sift_down(q, last->index);
}

struct linkd_timerq_node *linkd_timerq_pop(struct linkd_timerq *q)
{
    if (!q->len) return NULL;
    struct linkd_timerq_node *top = q->heap[0];
    linkd_timerq_remove(q, top);
    return top;
}
