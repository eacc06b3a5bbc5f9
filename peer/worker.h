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
    void (*run)(struct worker_job *job); /* on the worker thread */
    /* On the loop thread, in submission order. cancelled: the worker is shutting
     * down and the job's result is not wanted (it may not have run at all). */
    void (*done)(struct worker_job *job, bool cancelled);
    /* Filled in by the worker. */
    double queue_ms; /* waited before it started */
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
/* Queues a job (loop thread). */
void worker_submit(struct worker *w, struct worker_job *job);
/* Safe from any thread. */
void worker_get_totals(struct worker *w, struct worker_totals *totals);
/* Stops the thread and cancels the queued and finished jobs (done with
 * cancelled = true), then frees the worker. When a job is still running it
 * cannot be stopped: the function then returns false without freeing
 * anything, and the caller must end the process (_exit) without freeing what
 * the job may use. Loop thread. */
bool worker_destroy(struct worker *w);
