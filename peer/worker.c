/* worker.c — the peer's compute thread (see worker.h). */
#include "peer/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct job_queue {
    struct worker_job *head, *tail;
};

struct worker {
    struct ev_loop *loop;
    ev_async wakeup; /* worker -> loop: jobs in `finished` */
    double speed;
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

/* Holds the worker (lock held) until start_ms + cpu_ms / speed; returns
 * false when that time had already passed (an overrun). The wait is on the
 * condition variable so that shutdown can cut it short. */
static bool worker_emulate_speed(struct worker *w, double start_ms, double cpu_ms)
{
    double end_ms = start_ms + cpu_ms / w->speed;
    if (clock_ms(CLOCK_MONOTONIC) >= end_ms) return false;
    struct timespec until = {.tv_sec = (time_t)(end_ms / 1e3)};
    until.tv_nsec = (long)((end_ms - (double)until.tv_sec * 1e3) * 1e6);
    if (until.tv_nsec > 999999999) until.tv_nsec = 999999999;
    while (!w->stopping && clock_ms(CLOCK_MONOTONIC) < end_ms)
        if (pthread_cond_timedwait(&w->wake, &w->lock, &until) == ETIMEDOUT) break;
    return true;
}

/* Runs one job and times it. Called with the lock released; returns with it
 * held. */
static void worker_run_job(struct worker *w, struct worker_job *job)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    double cpu0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    job->queue_ms = ts_ms(&start) - ts_ms(&job->submitted);
    job->run(job);
    job->cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    pthread_mutex_lock(&w->lock);
    if (w->speed != 1.0 && !worker_emulate_speed(w, ts_ms(&start), job->cpu_ms))
        w->totals.overruns++;
    job->wall_ms = clock_ms(CLOCK_MONOTONIC) - ts_ms(&start);
    w->totals.jobs++;
    w->totals.compute_ms += job->wall_ms;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
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

struct worker *worker_create(struct ev_loop *loop, double speed)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->loop = loop;
    w->speed = speed > 0 ? speed : 1.0;
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
