/* worker.h — the peer's compute thread and its FIFO job queue.
 *
 * One thread runs the jobs in arrival order, so a peer computes one command
 * at a time (docs/lua-api.md "Ordering and versions"). The loop thread submits jobs; when a job has
 * run, the worker wakes the loop with ev_async_send and the loop calls the jobs' done callbacks in
 * the same order. Each job is timed: wall ms (CLOCK_MONOTONIC) and the CPU ms of the worker thread
 * (CLOCK_THREAD_CPUTIME_ID).
 *
 * Device speed emulation (node `speed`, docs/lua-api.md "Networks and nodes"; docs/fidelity.md) and
 * time dilation: a job completes at its start + dilation * (CPU time it used) / speed (its budget),
 * or at its real end if that is later. With speed 1 and dilation 1 the budget is the CPU time
 * itself, so a job waits for nothing. A job whose real end passes its budget by more than the
 * tolerance below overran: the host's CPU, not the emulated device, set its duration (another
 * process had the core). On a GPU the device's own time is stretched too (budget at least dilation
 * * real time), and overruns cannot be told from the CPU time alone: none are counted there.
 *
 * Gates: a job without run is a gate. When a gate reaches the head of the
 * queue the worker takes no further job from it and calls the gate's done
 * (on the loop thread, in order with the other jobs): the gate's owner now
 * holds the worker, as long as it needs to (a wait until its arrivals, a
 * batch until its last command), and may run jobs of its own ahead of the
 * queue with worker_submit_held; worker_release lets the queue go on. A
 * gate is not counted as a job and takes no compute time; the emulated
 * device is busy while it holds (a job queued behind it starts, for its
 * budget, when the hold ends).
 *
 * A background worker (worker_create_background) is the same FIFO thread at
 * the lowest CPU priority (SCHED_IDLE, or nice 19 where that is refused),
 * without speed emulation, dilation or overruns: for work that must only use
 * otherwise idle CPU.
 *
 * Ownership: the submitter allocates a job; the worker holds it from
 * worker_submit until it calls the job's done callback, which must release
 * it. Everything else belongs to the worker. */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/fifo.h"

struct worker_job {
    /* Set by the submitter. */
    void (*run)(struct worker_job *job); /* on the worker thread; NULL: a gate */
    /* On the loop thread, in submission order. cancelled: the worker is shutting
     * down and the job's result is not wanted (it may not have run at all). */
    void (*done)(struct worker_job *job, bool cancelled);
    /* Set by run, 0 before it: the emulated device's ms for this job (a
     * profiled grad, docs/fidelity.md), which then sets its budget instead
     * of its CPU time: dilation * device_ms / speed. */
    double device_ms;
    /* Set by the submitter: the job's done only records its result (a
     * batch's command with more queued behind it), so when the next job is
     * queued already the worker goes on to it without waking the loop,
     * whose thread (nice 0) would otherwise preempt it between the two;
     * the next wake-up delivers both, in order. */
    bool quiet_done;
    /* Filled in by the worker. */
    double start_ms;     /* before run: the emulated device's start (CLOCK_MONOTONIC ms): its
                            arrival, or the previous job's end. A job that pads itself to a
                            time (a bucket) measures from here, not from when its thread got
                            a core, which a loaded host makes later */
    double queue_ms;     /* waited for the jobs before it (from its arrival; a gate:
                            until it reached the head) */
    double wall_ms;      /* from its start (arrival, or the previous end) to its end,
                            including the emulated slowdown */
    double cpu_ms;       /* CPU time of the worker thread while it ran */
    double run_delay_ms; /* real ms the worker thread sat runnable without a core (its
                            wake-up for the job included; /proc/thread-self/schedstat).
                            Where the kernel does not say: its real ms less cpu_ms */
    bool overrun;        /* ended after its budget (beyond the tolerance) */
    bool starved;        /* an overrun that CPU time + run-queue delay alone explain: the
                            host's CPU, not a wait (I/O, a lock, page-in), made it late */
    /* Private to worker.c. */
    struct timespec submitted;
    struct fifo_link link; /* in one of the worker's queues */
};

struct worker_totals {
    uint64_t jobs;     /* completed */
    double compute_ms; /* sum of their wall_ms */
    uint64_t overruns; /* jobs that ended after their emulated completion time */
};

/* Tolerance of the overrun count: a real end up to this share of the
 * budget plus this many real ms late is scheduling noise, not overload. */
#define WORKER_OVERRUN_SHARE 0.05
#define WORKER_OVERRUN_SLACK_MS 0.5

struct worker_timing {
    double speed;    /* > 0; 1 = this host's speed */
    double dilation; /* >= 1: real time runs this many times slower than emulated time */
    bool cpu_device; /* compute runs on the CPU (not a GPU) */
};

/* A job's budget in real ms: dilation * cpu_ms / speed (on a GPU at least
 * dilation * real_ms); and whether a real duration overran it. */
double worker_budget_ms(const struct worker_timing *t, double cpu_ms, double real_ms);
bool worker_overran(const struct worker_timing *t, double budget_ms, double real_ms);
/* Whether an overrun was CPU starvation: the time the thread ran or waited
 * for a core (cpu_ms + run_delay_ms) overran the budget by itself. What is
 * left of real_ms was the thread blocked (waiting), which more CPU or a
 * larger dilation would not shorten. */
bool worker_starved(const struct worker_timing *t, double budget_ms, double cpu_ms,
                    double run_delay_ms);

/* A job that waited out its budget ended late_ms after it (the thread's
 * wake-up from that wait): whether that end overran (as worker_overran),
 * and then in *starved whether the thread's run-queue delay over the wait
 * (wake_delay_ms; < 0 unknown, counted as all of it) alone explains it:
 * waiting for a core after the timer fired, rather than a late timer. */
bool worker_late_end(const struct worker_timing *t, double budget_ms, double late_ms,
                     double wake_delay_ms, bool *starved);

struct worker;

/* Starts the thread. NULL with errno on failure. */
struct worker *worker_create(struct ev_loop *loop, const struct worker_timing *timing);
/* Starts a background worker thread: lowest CPU priority, no emulation. */
struct worker *worker_create_background(struct ev_loop *loop);
/* The scheduling the background thread got: "SCHED_IDLE", "nice 19" or
 * "normal" (neither was allowed); "nice 10" for compute workers. Valid once
 * the thread has run a job. */
const char *worker_priority(struct worker *w);
/* Queues a job (loop thread). */
void worker_submit(struct worker *w, struct worker_job *job);
/* While a gate holds the worker: runs job next, ahead of the queue (jobs
 * submitted so run in their order). Loop thread. */
void worker_submit_held(struct worker *w, struct worker_job *job);
/* A job the loop thread may run itself (fewer wake-ups): a job handed to
 * an idle worker waits for its thread to wake and get a core, which on a
 * busy host (the worker runs at nice 10) takes 0.5 to several ms
 * (docs/fidelity.md "Overload"), and a budget of the job's CPU time alone
 * (dilation / speed <= 1) has no slack to hide it in: every such wake-up
 * moved the emulated end. worker_claim says whether that is the case now:
 * the worker is idle (nothing running, queued, or finished and not
 * delivered, those of the wake-up being delivered included, so that a job
 * run here cannot overtake their done, e.g. a send's, which hands its
 * transfer to the data plane; holder: the job is the holding gate's own, worker_submit_held)
 * and its budget cannot outlast the job's CPU time (a CPU device at
 * dilation <= speed, so running it needs no wait afterwards). When true the
 * worker is claimed: call worker_run_here, or worker_unclaim to submit the
 * job as usual. Loop thread; the caller decides which jobs are brief enough
 * for it (the loop does not receive while a job runs there). */
bool worker_claim(struct worker *w, bool holder);
void worker_unclaim(struct worker *w);
/* Runs job on the calling thread, timed and judged as on the worker (its
 * start: now; its run-queue delay: this thread's), counts it and ends the
 * claim. The caller then calls job->done itself. */
void worker_run_here(struct worker *w, struct worker_job *job);
/* Ends the hold of the gate that reached the head: the queue goes on. */
void worker_release(struct worker *w);
/* Safe from any thread. */
void worker_get_totals(struct worker *w, struct worker_totals *totals);
/* Stops the thread and cancels the queued and finished jobs (done with
 * cancelled = true), then frees the worker. When a job is still running it
 * cannot be stopped: the function then returns false without freeing
 * anything, and the caller must end the process (_exit) without freeing what
 * the job may use. Loop thread. */
bool worker_destroy(struct worker *w);
