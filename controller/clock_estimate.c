/* clock_estimate.c — an agent's clock offset (see clock_estimate.h). */
#include "controller/clock_estimate.h"

#include <string.h>

void clock_estimate_init(struct clock_estimate *c)
{
    memset(c, 0, sizeof *c);
}

bool clock_estimate_add(struct clock_estimate *c, int64_t t0, int64_t t1, int64_t t2, int64_t t3)
{
    /* t1 and t2 come off the wire: a difference that overflows int64 is
     * as impossible as a negative delay (and signed overflow is undefined:
     * it made INT64_MIN..INT64_MAX pass as a delay of 11 ns). */
    int64_t rtt, held, delay, out, back;
    if (__builtin_sub_overflow(t3, t0, &rtt) || __builtin_sub_overflow(t2, t1, &held) ||
        __builtin_sub_overflow(rtt, held, &delay) || __builtin_sub_overflow(t1, t0, &out) ||
        __builtin_sub_overflow(t2, t3, &back))
        return false;
    if (rtt < 0 || held < 0 || delay < 0) return false;
    /* Halved as doubles: two integer nanosecond sums may be odd. */
    double offset = ((double)out + (double)back) / 2;
    c->s[c->next] = (struct clock_sample){offset, delay};
    c->next = (c->next + 1) % CLOCK_ESTIMATE_SAMPLES;
    if (c->n < CLOCK_ESTIMATE_SAMPLES) c->n++;
    c->total++;
    return true;
}

bool clock_estimate_get(const struct clock_estimate *c, struct clock_offset *out)
{
    if (c->n == 0) return false;
    const struct clock_sample *best = &c->s[0];
    for (size_t i = 1; i < c->n; i++)
        if (c->s[i].delay_ns < best->delay_ns) best = &c->s[i];
    out->offset_ms = best->offset_ns / 1e6;
    out->error_ms = (double)best->delay_ns / 2e6;
    out->rtt_ms = (double)best->delay_ns / 1e6;
    return true;
}
