/* clock_estimate.h — an agent's clock offset from the controller's, from
 * control-channel round trips (docs/design-notes.md, "One clock").
 *
 * One sample is a ping: t0 sent by the controller, t1 received and t2
 * answered by the agent (on its clock), t3 received back. Its offset is
 * ((t1 - t0) + (t2 - t3)) / 2 (agent minus controller) and its delay
 * (t3 - t0) - (t2 - t1), the round trip without the agent's own time. As
 * NTP's clock filter does, the estimate is the offset of the least-delay
 * sample among the last CLOCK_ESTIMATE_SAMPLES: queueing only ever adds
 * delay, so the fastest round trip is the least disturbed. Its error is at
 * most half that sample's delay: an offset within the round trip is all an
 * asymmetric path can hide. Pure arithmetic; no clock is read here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLOCK_ESTIMATE_SAMPLES 8

struct clock_sample {
    double offset_ns; /* agent minus controller */
    int64_t delay_ns;
};

struct clock_estimate {
    struct clock_sample s[CLOCK_ESTIMATE_SAMPLES]; /* a ring of the last samples */
    size_t n;                                      /* samples held (<= CLOCK_ESTIMATE_SAMPLES) */
    size_t next;                                   /* where the next one goes */
    uint64_t total;                                /* samples ever added */
};

void clock_estimate_init(struct clock_estimate *c);
/* Adds one ping's four times. A sample whose delay is negative (t3 before
 * t0, or the agent's time longer than the round trip), or whose times are
 * so far apart that a difference overflows int64, is impossible on
 * monotonic clocks and is refused: false. */
bool clock_estimate_add(struct clock_estimate *c, int64_t t0, int64_t t1, int64_t t2, int64_t t3);

struct clock_offset {
    double offset_ms; /* add to a controller time to get the agent's */
    double error_ms;  /* |true offset - offset_ms| <= error_ms */
    double rtt_ms;    /* the chosen sample's delay */
};

/* The estimate from the samples held; false when there is none. */
bool clock_estimate_get(const struct clock_estimate *c, struct clock_offset *out);
