/* worker.c — the peer's compute thread (see worker.h). */
#include "peer/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The worker thread's nice value (see worker_lower_priority). */
#define WORKER_NICE 10

struct job_queue {
    struct worker_job *head, *tail;
};

struct worker {
    struct ev_loop *loop;
    ev_async wakeup; /* worker -> loop: jobs in `finished` */
    struct worker_timing timing;
    double free_ms; /* worker thread: when the last job ended (CLOCK_MONOTONIC) */
    pthread_t thread;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;  /* loop -> worker: a job or stop; CLOCK_MONOTONIC */
    struct job_queue pending, finished;
    bool busy, stopping;
    struct worker_totals totals;
};

static void queue_push(struct job_queue *q, struct worker_job *job)
{
    job->next = NULL;
    if (q->tail)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
}

static struct worker_job *queue_pop(struct job_queue *q)
{
    struct worker_job *job = q->head;
    if (job) {
        q->head = job->next;
        if (!q->head) q->tail = NULL;
    }
    return job;
}

static double ts_ms(const struct timespec *t)
{
    return (double)t->tv_sec * 1e3 + (double)t->tv_nsec / 1e6;
}

static double clock_ms(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return ts_ms(&t);
}

/* Holds the worker (lock held) until end_ms (CLOCK_MONOTONIC). The wait is
 * on the condition variable so that shutdown can cut it short. */
static void worker_wait_until(struct worker *w, double end_ms)
{
    struct timespec until = {.tv_sec = (time_t)(end_ms / 1e3)};
    until.tv_nsec = (long)((end_ms - (double)until.tv_sec * 1e3) * 1e6);
    if (until.tv_nsec > 999999999) until.tv_nsec = 999999999;
    while (!w->stopping && clock_ms(CLOCK_MONOTONIC) < end_ms)
        if (pthread_cond_timedwait(&w->wake, &w->lock, &until) == ETIMEDOUT) break;
}

double worker_budget_ms(const struct worker_timing *t, double cpu_ms, double real_ms)
{
    double budget = t->dilation * cpu_ms / t->speed;
    /* A GPU's time is not CPU time: the device itself is stretched. */
    if (!t->cpu_device && t->dilation * real_ms > budget) budget = t->dilation * real_ms;
    return budget;
}

bool worker_overran(const struct worker_timing *t, double budget_ms, double real_ms)
{
    if (!t->cpu_device) return false;
    return real_ms > budget_ms * (1.0 + WORKER_OVERRUN_SHARE) + WORKER_OVERRUN_SLACK_MS;
}

/* Runs one job and times it. Called with the lock released; returns with it
 * held. The emulated device takes the job when it arrives, or when the
 * previous one ends if that is later: the moment this thread actually gets a
 * core is the host's business, so a late start counts against the job, not
 * as queueing. The job ends at that start + its budget, or at its real end
 * when that is later (an overrun, beyond the tolerance). */
static void worker_run_job(struct worker *w, struct worker_job *job)
{
    double submitted_ms = ts_ms(&job->submitted);
    double start_ms = submitted_ms > w->free_ms ? submitted_ms : w->free_ms;
    double cpu0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    job->queue_ms = start_ms - submitted_ms;
    job->run(job);
    job->cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    double real_ms = clock_ms(CLOCK_MONOTONIC) - start_ms;
    double budget_ms = worker_budget_ms(&w->timing, job->cpu_ms, real_ms);
    pthread_mutex_lock(&w->lock);
    job->overrun = worker_overran(&w->timing, budget_ms, real_ms);
    if (real_ms < budget_ms) worker_wait_until(w, start_ms + budget_ms);
    double end_ms = clock_ms(CLOCK_MONOTONIC);
    job->wall_ms = end_ms - start_ms;
    w->free_ms = end_ms;
    w->totals.jobs++;
    w->totals.overruns += job->overrun;
    w->totals.compute_ms += job->wall_ms;
}

/* Compute yields to control: the peer's loop thread (requests, replies, the
 * data plane) and the controller preempt this thread at once when they
 * wake, even when every core is computing. Otherwise a request or reply can
 * wait out a time slice behind other peers' compute, and on an overloaded
 * host (many peers per core) that wait, not the emulated link or device,
 * would set the times. A real NIC and a real controller do not queue behind
 * a device's compute either. Best effort: a failure changes nothing else. */
static void worker_lower_priority(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0 && nice < WORKER_NICE) (void)setpriority(PRIO_PROCESS, (id_t)tid, WORKER_NICE);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    worker_lower_priority();
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->pending.head && !w->stopping)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->stopping) break;
        struct worker_job *job = queue_pop(&w->pending);
        w->busy = true;
        pthread_mutex_unlock(&w->lock);
        worker_run_job(w, job);
        w->busy = false;
        queue_push(&w->finished, job);
        pthread_mutex_unlock(&w->lock);
        ev_async_send(w->loop, &w->wakeup);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Delivers finished jobs on the loop thread, oldest first. */
static void on_wakeup(EV_P_ ev_async *watcher, int revents)
{
    struct worker *w = watcher->data;
    pthread_mutex_lock(&w->lock);
    struct job_queue finished = w->finished;
    w->finished = (struct job_queue){0};
    pthread_mutex_unlock(&w->lock);
    struct worker_job *job;
    while ((job = queue_pop(&finished)))
        job->done(job, false);
}

static int worker_init_sync(struct worker *w)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return -1;
    int err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!err) err = pthread_cond_init(&w->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (err) return -1;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        pthread_cond_destroy(&w->wake);
        return -1;
    }
    return 0;
}

struct worker *worker_create(struct ev_loop *loop, const struct worker_timing *timing)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->loop = loop;
    w->timing = *timing;
    if (!(w->timing.speed > 0)) w->timing.speed = 1.0;
    if (!(w->timing.dilation >= 1)) w->timing.dilation = 1.0;
    if (worker_init_sync(w) != 0) {
        free(w);
        return NULL;
    }
    int err = pthread_create(&w->thread, NULL, worker_main, w);
    if (err) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        errno = err;
        return NULL;
    }
    ev_async_init(&w->wakeup, on_wakeup);
    w->wakeup.data = w;
    ev_async_start(loop, &w->wakeup);
    return w;
}

void worker_submit(struct worker *w, struct worker_job *job)
{
    clock_gettime(CLOCK_MONOTONIC, &job->submitted);
    pthread_mutex_lock(&w->lock);
    queue_push(&w->pending, job);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void worker_get_totals(struct worker *w, struct worker_totals *totals)
{
    pthread_mutex_lock(&w->lock);
    *totals = w->totals;
    pthread_mutex_unlock(&w->lock);
}

static void worker_cancel(struct job_queue *q)
{
    struct worker_job *job;
    while ((job = queue_pop(q)))
        job->done(job, true);
}

bool worker_destroy(struct worker *w)
{
    if (!w) return true;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    bool busy = w->busy;
    pthread_mutex_unlock(&w->lock);
    if (busy) return false;
    pthread_join(w->thread, NULL);
    ev_async_stop(w->loop, &w->wakeup);
    worker_cancel(&w->pending);
    worker_cancel(&w->finished);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return true;
}
