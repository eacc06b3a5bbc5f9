/* step_timer.h — what the kernel benchmarks (kernels.c on the CPU,
 * kernels_device.c on a device) share: their numeric options, random inputs
 * and a timed round of steps on a given clock. Header-only: every
 * tools/bench/*.c is its own executable. */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/rng.h"

/* An option's value v as a positive number (whole when integer), or -1:
 * "8x", "" and "0" are refused, not read as 8 or 0. */
static inline double step_timer_positive(const char *v, bool integer)
{
    char *end;
    errno = 0;
    double x = integer ? (double)strtol(v, &end, 10) : strtod(v, &end);
    return errno || end == v || *end || !(x > 0) || (integer && x > INT_MAX) ? -1 : x;
}

static inline double step_timer_now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n floats uniform in [-0.5, 0.5) (malloc'd, the caller frees), or NULL. */
static inline float *step_timer_random_floats(struct rng *r, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; p && i < n; i++)
        p[i] = rng_uniform_float(r) - 0.5f;
    return p;
}

/* Seconds per step of one round of at least `budget` seconds by `clock`,
 * or -1 when a step failed (returned < 0). */
static inline double step_timer_round(int (*step)(void *), void *arg, double budget,
                                      clockid_t clock)
{
    int n = 0;
    double start = step_timer_now(clock), elapsed;
    do {
        if (step(arg) < 0) return -1;
        n++;
    } while ((elapsed = step_timer_now(clock) - start) < budget);
    return elapsed / n;
}
