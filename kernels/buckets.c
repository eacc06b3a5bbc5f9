/* buckets.c — the gradient bucket plan (see buckets.h): the architecture's
 * steps from zoo_trace, walked from the last. */
#include "kernels/buckets.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/kern_error.h"

/* The steps of one architecture, in forward order, with their weighted
 * costs; owned by grad_buckets_plan. */
struct step_list {
    struct zoo_layer *v;
    size_t n, cap;
    bool failed;
};

static void step_collect(void *ctx, const struct zoo_layer *layer)
{
    struct step_list *l = ctx;
    if (l->failed) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        struct zoo_layer *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->failed = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *layer;
}

static double weighted(const double *by_op, const double *seconds_per_flop)
{
    double total = 0;
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        total += by_op[op] * (seconds_per_flop ? seconds_per_flop[op] : 1.0);
    return total;
}

/* Closes bucket [offset, end) in out[*n]; false when there are too many. */
static bool bucket_close(struct grad_bucket *out, int *n, uint64_t offset, uint64_t end,
                         double share)
{
    if (*n == GRAD_BUCKETS_MAX) return false;
    out[*n] = (struct grad_bucket){offset, end - offset, share};
    (*n)++;
    return true;
}

/* Walks the steps from the last: the backward pass's order. */
static int plan_walk(const struct step_list *l, uint64_t size, uint64_t cap,
                     const double *seconds_per_flop, struct grad_bucket *out)
{
    double forward = 0, backward = 0;
    for (size_t i = 0; i < l->n; i++) {
        forward += weighted(l->v[i].cost.forward, seconds_per_flop);
        backward += weighted(l->v[i].cost.backward, seconds_per_flop);
    }
    double total = forward + backward > 0 ? forward + backward : 1;
    double done = forward;
    uint64_t end = size, held = 0;
    int n = 0;
    for (size_t i = l->n; i-- > 0;) {
        const struct zoo_layer *s = &l->v[i];
        done += weighted(s->cost.backward, seconds_per_flop);
        if (s->param_end <= s->param_first) continue;
        held += s->param_end - s->param_first;
        if (held >= cap && s->param_first > 0) {
            if (!bucket_close(out, &n, s->param_first, end, done / total)) return -1;
            end = s->param_first;
            held = 0;
        }
    }
    if (end > 0 && !bucket_close(out, &n, 0, end, 1.0)) return -1;
    if (n > 0) out[n - 1].ready_share = 1.0;
    return n;
}

int grad_buckets_plan(const char *name, uint64_t size, uint64_t cap_elements,
                      const double *seconds_per_flop, struct grad_bucket *out, char *err,
                      size_t errlen)
{
    struct step_list l = {0};
    if (zoo_trace(name, step_collect, &l, err, errlen) != 0) {
        free(l.v);
        return -1;
    }
    if (l.failed) {
        free(l.v);
        return kern_fail(err, errlen, "model \"%s\": out of memory planning buckets", name);
    }
    int n = plan_walk(&l, size, cap_elements ? cap_elements : 1, seconds_per_flop, out);
    free(l.v);
    if (n < 0)
        return kern_fail(err, errlen,
                         "model \"%s\": bucket cap %" PRIu64
                         " elements makes more than %d buckets (raise bucket_mb)",
                         name, cap_elements, GRAD_BUCKETS_MAX);
    return n;
}

uint64_t grad_bucket_elements(double mb)
{
    double elements = ceil(mb * 1048576.0 / 4.0);
    return elements >= 1 ? (uint64_t)elements : 1;
}
