/* common/clock.h: the monotonic clock in the units the modules use: seconds
 * (deadlines, timings), milliseconds (jobs, requests) and nanoseconds (the
 * link emulator's delay line). CLOCK_MONOTONIC throughout: wall-clock steps
 * never move a deadline. Header only; no state. */
#pragma once

#include <stdint.h>
#include <time.h>

static inline double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
