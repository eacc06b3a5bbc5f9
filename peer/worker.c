/* worker.c — the peer's compute thread (see worker.h): the FIFO, gates
 * and the jobs their owners run while holding it, speed emulation and time
 * dilation, and the background variant at idle priority. */
#include "peer/worker.h"

#include "common/clock.h"
#include "common/container.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The worker thread's nice value (see worker_lower_priority). */
#define WORKER_NICE 10

struct worker {
    struct ev_loop *loop;
    ev_async wakeup; /* worker -> loop: jobs in `finished` */
    struct worker_timing timing;
    double free_ms;        /* worker thread: when the last job ended (CLOCK_MONOTONIC) */
    double run_delay_mark; /* worker thread: its run-queue delay then (ms; -1 unknown) */
    pthread_t thread;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;  /* loop -> worker: a job or stop; CLOCK_MONOTONIC */
    struct fifo pending, finished;
    struct fifo held_jobs; /* run ahead of pending while a gate holds the worker */
    bool busy, stopping, held;
    bool background;
    const char *priority; /* worker_priority */
    struct worker_totals totals;
};

static void queue_push(struct fifo *q, struct worker_job *job)
{
    fifo_push(q, &job->link);
}

static struct worker_job *queue_pop(struct fifo *q)
{
    struct fifo_link *link = fifo_pop(q);
    return link ? container_of(link, struct worker_job, link) : NULL;
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
    while (!w->stopping && mono_ms() < end_ms)
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

/* The calling thread's run-queue delay so far in ms (the second field of
 * /proc/thread-self/schedstat: ns spent runnable, waiting for a core), or
 * -1 where the kernel has no schedstat. */
static double thread_run_delay_ms(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "re");
    if (!f) return -1;
    unsigned long long run_ns, wait_ns;
    int got = fscanf(f, "%llu %llu", &run_ns, &wait_ns);
    fclose(f);
    return got == 2 ? (double)wait_ns / 1e6 : -1;
}

bool worker_starved(const struct worker_timing *t, double budget_ms, double cpu_ms,
                    double run_delay_ms)
{
    return worker_overran(t, budget_ms, cpu_ms + run_delay_ms);
}

/* Whether the job overran its budget, and if so whether the host's CPU is
 * why: the running thread's run-queue delay since delay_mark (the previous
 * job's end on the worker thread, whose wake-up for this job is in it) and
 * its CPU time against the budget. */
static void worker_judge(struct worker *w, struct worker_job *job, double budget_ms, double real_ms,
                         double delay_mark)
{
    job->overrun = !w->background && worker_overran(&w->timing, budget_ms, real_ms);
    double delay = thread_run_delay_ms();
    job->run_delay_ms = delay >= 0 && delay_mark >= 0 ? delay - delay_mark : -1;
    /* Without schedstat every ms off the CPU counts as waiting for it:
     * the judgment before the kernel said. */
    if (job->run_delay_ms < 0)
        job->run_delay_ms = real_ms > job->cpu_ms ? real_ms - job->cpu_ms : 0;
    job->starved =
        job->overrun && worker_starved(&w->timing, budget_ms, job->cpu_ms, job->run_delay_ms);
}

/* Runs job on the calling thread from start_ms, times and judges it;
 * returns its budget (real ms). */
static double worker_time_run(struct worker *w, struct worker_job *job, double start_ms,
                              double delay_mark)
{
    double cpu0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    job->start_ms = start_ms;
    job->queue_ms = start_ms - ts_ms(&job->submitted);
    job->device_ms = 0;
    job->run(job);
    job->cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    double real_ms = mono_ms() - start_ms;
    /* A profiled job's time is the profile's; it waits out the rest idle. */
    double budget_ms = job->device_ms > 0 ? w->timing.dilation * job->device_ms / w->timing.speed
                                          : worker_budget_ms(&w->timing, job->cpu_ms, real_ms);
    worker_judge(w, job, budget_ms, real_ms, delay_mark);
    return budget_ms;
}

/* The job ended now (lock held): the device is free, the totals count it. */
static void worker_account(struct worker *w, struct worker_job *job)
{
    double end_ms = mono_ms();
    job->wall_ms = end_ms - job->start_ms;
    w->free_ms = end_ms;
    w->totals.jobs++;
    w->totals.overruns += job->overrun;
    w->totals.compute_ms += job->wall_ms;
}

bool worker_late_end(const struct worker_timing *t, double budget_ms, double late_ms,
                     double wake_delay_ms, bool *starved)
{
    if (!worker_overran(t, budget_ms, budget_ms + late_ms)) return false;
    /* Without schedstat every late ms counts as waiting for a core, as in
     * worker_judge. */
    *starved = !(wake_delay_ms >= 0) || worker_overran(t, budget_ms, budget_ms + wake_delay_ms);
    return true;
}

/* Waits out the rest of the job's budget (lock held). The wait ends on a
 * timer and the thread then needs a core again: a late wake-up moves the
 * job's end as much as a late run would, so it is judged the same way.
 * delay_mark: the thread's run-queue delay before the wait. */
static void worker_pad(struct worker *w, struct worker_job *job, double budget_ms,
                       double delay_mark)
{
    double end_ms = job->start_ms + budget_ms;
    worker_wait_until(w, end_ms);
    double late_ms = mono_ms() - end_ms;
    if (job->overrun || w->stopping || !worker_overran(&w->timing, budget_ms, budget_ms + late_ms))
        return; /* the usual case: no file read under the lock */
    double delay = thread_run_delay_ms();
    double wake_delay = delay >= 0 && delay_mark >= 0 ? delay - delay_mark : -1;
    job->overrun = worker_late_end(&w->timing, budget_ms, late_ms, wake_delay, &job->starved);
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
    double budget_ms = worker_time_run(w, job, start_ms, w->run_delay_mark);
    double delay_mark = thread_run_delay_ms();
    pthread_mutex_lock(&w->lock);
    if (mono_ms() < start_ms + budget_ms) worker_pad(w, job, budget_ms, delay_mark);
    worker_account(w, job);
}

/* The next job to run (lock held): while held, only the holder's. */
static struct worker_job *worker_next(struct worker *w)
{
    return queue_pop(w->held ? &w->held_jobs : &w->pending);
}

/* A job is queued to run next (lock held). */
static bool worker_has_next(const struct worker *w)
{
    return !fifo_empty(w->held ? &w->held_jobs : &w->pending);
}

/* A gate reached the head (lock held): the worker is held from now on and
 * the gate's owner hears of it through done. */
static void worker_hold(struct worker *w, struct worker_job *gate)
{
    double now = mono_ms();
    gate->queue_ms = now - ts_ms(&gate->submitted);
    gate->wall_ms = gate->cpu_ms = gate->run_delay_ms = 0;
    w->held = true;
}

/* Compute yields to control: the peer's loop thread (requests, replies, the
 * data plane) and the controller preempt this thread at once when they
 * wake, even when every core is computing. Otherwise a request or reply can
 * wait out a time slice behind other peers' compute, and on an overloaded
 * host (many peers per core) that wait, not the emulated link or device,
 * would set the times. A real NIC and a real controller do not queue behind
 * a device's compute either. Best effort: a failure changes nothing else. */
static void worker_lower_priority(struct worker *w)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0 && nice < WORKER_NICE) (void)setpriority(PRIO_PROCESS, (id_t)tid, WORKER_NICE);
    w->priority = "nice 10";
}

/* Background threads only use CPU nobody else wants. A thread may always
 * lower its own priority, but a sandbox may refuse SCHED_IDLE. */
static void worker_idle_priority(struct worker *w)
{
    struct sched_param param = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0)
        w->priority = "SCHED_IDLE";
    else if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) == 0)
        w->priority = "nice 19";
    else
        w->priority = "normal";
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_mutex_lock(&w->lock);
    if (w->background)
        worker_idle_priority(w);
    else
        worker_lower_priority(w);
    w->run_delay_mark = thread_run_delay_ms();
    for (;;) {
        struct worker_job *job = NULL;
        while (!w->stopping && !(job = worker_next(w)))
            pthread_cond_wait(&w->wake, &w->lock);
        if (!job) break;
        bool ran = job->run != NULL; /* job is the loop's once it is in finished */
        if (ran) {
            w->busy = true;
            pthread_mutex_unlock(&w->lock);
            worker_run_job(w, job);
            w->busy = false;
        } else {
            worker_hold(w, job);
        }
        bool wake = !(ran && job->quiet_done && worker_has_next(w));
        queue_push(&w->finished, job);
        pthread_mutex_unlock(&w->lock);
        if (ran) w->run_delay_mark = thread_run_delay_ms(); /* the next job's from here */
        if (wake) ev_async_send(w->loop, &w->wakeup);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Delivers the jobs finished at the wake-up on the loop thread, oldest
 * first, one at a time: each stays in `finished` until its done is called,
 * so while an earlier one's done runs (and starts the next command of its
 * batch) the later ones count as not delivered (worker_idle), and no job
 * the loop runs itself (worker_run_here) overtakes their done. Taken out
 * all at once, a send queued on the worker handed its transfer to the data
 * plane after that of a send the loop ran behind it: two transfers to one
 * peer crossed, and a ring's wait took one bucket's data for another's
 * (lua.overlap_exact). Jobs finished meanwhile wait for their own wake-up,
 * as before, so that the loop goes back to its other watchers between. */
static void on_wakeup(EV_P_ ev_async *watcher, int revents)
{
    struct worker *w = watcher->data;
    pthread_mutex_lock(&w->lock);
    const struct fifo_link *last = w->finished.tail; /* alive until its done */
    pthread_mutex_unlock(&w->lock);
    for (bool more = last != NULL; more;) {
        pthread_mutex_lock(&w->lock);
        struct worker_job *job = queue_pop(&w->finished);
        pthread_mutex_unlock(&w->lock);
        if (!job) return;
        more = &job->link != last;
        job->done(job, false);
    }
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

static struct worker *worker_start(struct ev_loop *loop, const struct worker_timing *timing,
                                   bool background)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->loop = loop;
    w->timing = *timing;
    if (!(w->timing.speed > 0)) w->timing.speed = 1.0;
    if (!(w->timing.dilation >= 1)) w->timing.dilation = 1.0;
    w->background = background;
    w->priority = "normal";
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

struct worker *worker_create(struct ev_loop *loop, const struct worker_timing *timing)
{
    return worker_start(loop, timing, false);
}

struct worker *worker_create_background(struct ev_loop *loop)
{
    static const struct worker_timing none = {.speed = 1.0, .dilation = 1.0, .cpu_device = true};
    return worker_start(loop, &none, true);
}

const char *worker_priority(struct worker *w)
{
    pthread_mutex_lock(&w->lock);
    const char *priority = w->priority;
    pthread_mutex_unlock(&w->lock);
    return priority;
}

void worker_submit(struct worker *w, struct worker_job *job)
{
    clock_gettime(CLOCK_MONOTONIC, &job->submitted);
    pthread_mutex_lock(&w->lock);
    /* A gate that finds the worker idle, with nothing queued and every
     * earlier job delivered, is at the head already: it holds the worker at
     * once, without a round trip through the worker thread. */
    bool at_head =
        !job->run && !w->busy && !w->held && fifo_empty(&w->pending) && fifo_empty(&w->finished);
    if (at_head)
        worker_hold(w, job);
    else
        queue_push(&w->pending, job);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    if (at_head) job->done(job, false);
}

void worker_submit_held(struct worker *w, struct worker_job *job)
{
    clock_gettime(CLOCK_MONOTONIC, &job->submitted);
    pthread_mutex_lock(&w->lock);
    queue_push(&w->held_jobs, job);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

/* No job is running, queued (for holder: among the holding gate's own, which
 * alone could run next) or finished but not delivered: one run now is in
 * order. Lock held. */
static bool worker_idle(const struct worker *w, bool holder)
{
    if (w->busy || !fifo_empty(&w->finished) || w->held != holder) return false;
    return fifo_empty(holder ? &w->held_jobs : &w->pending);
}

/* A budget that cannot outlast the CPU time it is made of: a CPU device at
 * dilation / speed <= 1 (worker_budget_ms). */
static bool worker_no_slack(const struct worker *w)
{
    return w->timing.cpu_device && w->timing.dilation <= w->timing.speed;
}

bool worker_claim(struct worker *w, bool holder)
{
    if (w->background || !worker_no_slack(w)) return false;
    pthread_mutex_lock(&w->lock);
    bool idle = !w->stopping && worker_idle(w, holder);
    if (idle) w->busy = true;
    pthread_mutex_unlock(&w->lock);
    return idle;
}

void worker_unclaim(struct worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->busy = false;
    pthread_mutex_unlock(&w->lock);
}

void worker_run_here(struct worker *w, struct worker_job *job)
{
    double delay_mark = thread_run_delay_ms(); /* a file read: before the job's start */
    clock_gettime(CLOCK_MONOTONIC, &job->submitted);
    (void)worker_time_run(w, job, ts_ms(&job->submitted), delay_mark);
    pthread_mutex_lock(&w->lock);
    worker_account(w, job);
    w->busy = false;
    pthread_mutex_unlock(&w->lock);
}

/* The hold ends now: the emulated device was busy until now, so the next
 * job's budget starts here, not at its (earlier) arrival. */
void worker_release(struct worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->held = false;
    double now = mono_ms();
    if (now > w->free_ms) w->free_ms = now;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void worker_get_totals(struct worker *w, struct worker_totals *totals)
{
    pthread_mutex_lock(&w->lock);
    *totals = w->totals;
    pthread_mutex_unlock(&w->lock);
}

static void worker_cancel(struct fifo *q)
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
    worker_cancel(&w->held_jobs);
    worker_cancel(&w->pending);
    worker_cancel(&w->finished);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return true;
}
