/* worker.h — the peer's compute thread and its FIFO job queue.
 *
 * One thread runs the jobs in arrival order, so a peer computes one command
 * at a time (DESIGN.md). The loop thread submits jobs; when a job has run, the
 * worker wakes the loop with ev_async_send and the loop calls the jobs' done
 * callbacks in the same order. Each job is timed: wall ms (CLOCK_MONOTONIC)
 * and the CPU ms of the worker thread (CLOCK_THREAD_CPUTIME_ID).
 *
 * Device speed emulation (DESIGN.md "Node limits"): with speed != 1 a job
 * completes at its start + (CPU time it used) / speed, or at its real end if
 * that is later, which is counted as an overrun.
 *
 * Gates: a job without run is a gate. When a gate reaches the head of the
 * queue the worker takes no further job from it and calls the gate's done
 * (on the loop thread, in order with the other jobs): the gate's owner now
 * holds the worker, as long as it needs to (a wait until its arrivals, a
 * batch until its last command), and may run jobs of its own ahead of the
 * queue with worker_submit_held; worker_release lets the queue go on. A
 * gate is not counted as a job and takes no compute time.
 *
 * A background worker (worker_create_background) is the same FIFO thread at
 * the lowest CPU priority (SCHED_IDLE, or nice 19 where that is refused),
 * without speed emulation: for work that must only use otherwise idle CPU.
 *
 * Ownership: the submitter allocates a job; the worker holds it from
 * worker_submit until it calls the job's done callback, which must release
 * it. Everything else belongs to the worker. */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct worker_job {
    /* Set by the submitter. */
    void (*run)(struct worker_job *job); /* on the worker thread; NULL: a gate */
    /* On the loop thread, in submission order. cancelled: the worker is shutting
     * down and the job's result is not wanted (it may not have run at all). */
    void (*done)(struct worker_job *job, bool cancelled);
    /* Filled in by the worker. */
    double queue_ms; /* waited before it started (a gate: before it reached the head) */
    double wall_ms;  /* ran (including the emulated slowdown) */
    double cpu_ms;   /* CPU time of the worker thread while it ran */
    /* Private to worker.c. */
    struct timespec submitted;
    struct worker_job *next;
};

struct worker_totals {
    uint64_t jobs;     /* completed */
    double compute_ms; /* sum of their wall_ms */
    uint64_t overruns; /* jobs that ended after their emulated completion time */
};

struct worker;

/* Starts the thread. speed > 0 (1: no emulation). NULL with errno on failure. */
struct worker *worker_create(struct ev_loop *loop, double speed);
/* Starts a background worker thread: lowest CPU priority, speed 1. */
struct worker *worker_create_background(struct ev_loop *loop);
/* The scheduling the background thread got: "SCHED_IDLE", "nice 19" or
 * "normal" (neither was allowed); "normal" for other workers. Valid once
 * the thread has run a job. */
const char *worker_priority(struct worker *w);
/* Queues a job (loop thread). */
void worker_submit(struct worker *w, struct worker_job *job);
/* While a gate holds the worker: runs job next, ahead of the queue (jobs
 * submitted so run in their order). Loop thread. */
void worker_submit_held(struct worker *w, struct worker_job *job);
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
