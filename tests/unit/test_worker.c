/* test_worker.c — the peer's worker (peer/worker.h): jobs run in order on
 * its thread, and the loop thread runs a job itself (worker_claim,
 * worker_run_here) only when the worker is idle and the job's budget has no
 * slack: not while a job runs, is queued or waits to be delivered, not for
 * a job outside the gate that holds the worker, not on a slow node, a
 * dilated one, a GPU or the background worker; and a job's end after a
 * late wake-up from waiting out its budget is judged as an overrun; a
 * quiet_done job's delivery waits for the job queued behind it; jobs that
 * finished together are delivered one by one, no claim in between. */
#include "check.h"
#include "peer/worker.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

struct probe_job {
    struct worker_job work; /* first: the job is the probe */
    pthread_t ran_on;
    int order, delivered;
    double sleep_ms;
};

static int deliveries;

static void probe_run(struct worker_job *job)
{
    struct probe_job *p = (struct probe_job *)job;
    p->ran_on = pthread_self();
    if (p->sleep_ms > 0) {
        struct timespec t = {0, (long)(p->sleep_ms * 1e6)};
        nanosleep(&t, NULL);
    }
}

static void probe_done(struct worker_job *job, bool cancelled)
{
    struct probe_job *p = (struct probe_job *)job;
    p->delivered = cancelled ? -1 : ++deliveries;
}

static struct probe_job probe(double sleep_ms)
{
    return (struct probe_job){.work = {.run = probe_run, .done = probe_done}, .sleep_ms = sleep_ms};
}

/* Runs the loop until job has been delivered (or a second has passed). */
static void deliver(struct ev_loop *loop, struct probe_job *job)
{
    for (int i = 0; i < 1000 && !job->delivered; i++)
        ev_run(loop, EVRUN_ONCE);
}

static const struct worker_timing host = {.speed = 1, .dilation = 1, .cpu_device = true};

/* An idle worker at speed 1, dilation 1: the loop thread runs the job,
 * timed and counted like one of the worker's. */
static void test_runs_here_when_idle(struct ev_loop *loop)
{
    struct worker *w = worker_create(loop, &host);
    CHECK(w != NULL);
    struct probe_job a = probe(2);
    CHECK(worker_claim(w, false));
    worker_run_here(w, &a.work);
    CHECK(pthread_equal(a.ran_on, pthread_self()));
    CHECK(a.work.wall_ms >= 2 && a.work.wall_ms < 1000);
    CHECK(a.work.queue_ms == 0);
    CHECK(a.work.overrun); /* a sleep is a wait: no CPU time, the whole budget at speed 1 */
    struct worker_totals totals;
    worker_get_totals(w, &totals);
    CHECK(totals.jobs == 1);
    /* The claim ended with the run: a second one is granted, and given back. */
    CHECK(worker_claim(w, false));
    worker_unclaim(w);
    /* Jobs submitted as usual still run on the worker's thread. */
    struct probe_job b = probe(0);
    worker_submit(w, &b.work);
    deliver(loop, &b);
    CHECK(b.delivered > 0);
    CHECK(!pthread_equal(b.ran_on, pthread_self()));
    CHECK(worker_destroy(w));
}

/* While a job runs, is queued, or is finished but not yet delivered, a job
 * run here would overtake it: no claim. */
static void test_no_claim_out_of_order(struct ev_loop *loop)
{
    struct worker *w = worker_create(loop, &host);
    struct probe_job slow = probe(50), next = probe(0);
    worker_submit(w, &slow.work);
    worker_submit(w, &next.work);
    CHECK(!worker_claim(w, false)); /* running or queued */
    struct timespec t = {0, 150 * 1000000L};
    nanosleep(&t, NULL); /* both have run; neither is delivered (the loop has not run) */
    CHECK(slow.delivered == 0 && next.delivered == 0);
    CHECK(!worker_claim(w, false));
    deliver(loop, &next);
    CHECK(slow.delivered > 0 && next.delivered == slow.delivered + 1);
    CHECK(worker_claim(w, false));
    worker_unclaim(w);
    CHECK(worker_destroy(w));
}

/* A gate that holds the worker: its own jobs may run here, others wait. */
static void test_gate_holder(struct ev_loop *loop)
{
    struct worker *w = worker_create(loop, &host);
    struct probe_job gate = {.work = {.run = NULL, .done = probe_done}};
    worker_submit(w, &gate.work); /* idle: it holds the worker at once */
    CHECK(gate.delivered > 0);
    CHECK(!worker_claim(w, false));
    CHECK(worker_claim(w, true));
    struct probe_job own = probe(0);
    worker_run_here(w, &own.work);
    CHECK(pthread_equal(own.ran_on, pthread_self()));
    worker_release(w);
    CHECK(!worker_claim(w, true)); /* nothing holds it any more */
    CHECK(worker_claim(w, false));
    worker_unclaim(w);
    CHECK(worker_destroy(w));
}

/* Where the budget outlasts the CPU time (a slow device, a dilated run), a
 * job run here would have to wait out the rest on the loop: never claimed.
 * Nor a GPU's (its time is not the thread's) or the background worker. */
static void test_no_claim_with_slack(struct ev_loop *loop)
{
    const struct worker_timing cases[] = {
        {.speed = 0.5, .dilation = 1, .cpu_device = true},
        {.speed = 1, .dilation = 2, .cpu_device = true},
        {.speed = 1, .dilation = 1, .cpu_device = false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct worker *w = worker_create(loop, &cases[i]);
        CHECK_MSG(!worker_claim(w, false), "case %zu", i);
        CHECK(worker_destroy(w));
    }
    /* speed 2 at dilation 2: the budget is the CPU time again. */
    struct worker_timing fast = {.speed = 2, .dilation = 2, .cpu_device = true};
    struct worker *w = worker_create(loop, &fast);
    CHECK(worker_claim(w, false));
    worker_unclaim(w);
    CHECK(worker_destroy(w));
    struct worker *bg = worker_create_background(loop);
    CHECK(!worker_claim(bg, false));
    CHECK(worker_destroy(bg));
}

/* A job that blocks its thread until the test posts `go`. */
struct gated_job {
    struct probe_job probe; /* first */
    sem_t go;
    atomic_bool started;
};

static void gated_run(struct worker_job *job)
{
    struct gated_job *g = (struct gated_job *)job;
    atomic_store(&g->started, true);
    sem_wait(&g->go);
}

/* quiet_done: with the next job queued behind it, a finished job is not
 * delivered until that one wakes the loop (both then, in order); without
 * it, at once. */
static void check_quiet_done(struct ev_loop *loop, bool quiet)
{
    struct worker *w = worker_create(loop, &host);
    struct probe_job a = probe(0);
    a.work.quiet_done = quiet;
    struct gated_job b = {.probe = probe(0)};
    b.probe.work.run = gated_run;
    sem_init(&b.go, 0, 0);
    int before = deliveries;
    worker_submit(w, &a.work);
    worker_submit(w, &b.probe.work);
    for (int i = 0; i < 1000 && !atomic_load(&b.started); i++) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
    CHECK(atomic_load(&b.started)); /* a has run */
    if (quiet) {
        for (int i = 0; i < 20; i++)
            ev_run(loop, EVRUN_NOWAIT);
        CHECK_MSG(a.delivered == 0, "quiet: delivered while the next job ran");
    } else {
        deliver(loop, &a);
        CHECK(a.delivered == before + 1 && b.probe.delivered == 0);
    }
    sem_post(&b.go);
    deliver(loop, &b.probe);
    CHECK(a.delivered == before + 1 && b.probe.delivered == before + 2);
    CHECK(worker_destroy(w));
    sem_destroy(&b.go);
}

/* A job whose done tries to claim the worker, as a batch's done does when
 * it starts the next command, which may be brief. */
struct claiming_job {
    struct probe_job probe; /* first */
    struct worker *worker;
    int claimed; /* -1: not tried; else whether the claim was granted */
};

static void claiming_done(struct worker_job *job, bool cancelled)
{
    struct claiming_job *c = (struct claiming_job *)job;
    probe_done(job, cancelled);
    c->claimed = worker_claim(c->worker, false);
    if (c->claimed) worker_unclaim(c->worker);
}

/* Jobs finished together are delivered one by one, and while the first
 * one's done runs the next is not delivered yet: no claim. (They were taken
 * out of the worker all at once, and a claim made then let a job run on the
 * loop ahead of the next one's done: a send run so handed its transfer to
 * the data plane before the send queued ahead of it.) The gate job keeps
 * the worker busy until the three are queued, and quiet_done leaves the
 * loop asleep until the last has run, so that one wake-up finds all. */
static void test_no_claim_while_delivering(struct ev_loop *loop)
{
    struct worker *w = worker_create(loop, &host);
    struct gated_job gate = {.probe = probe(0)};
    gate.probe.work.run = gated_run;
    gate.probe.work.quiet_done = true;
    sem_init(&gate.go, 0, 0);
    struct claiming_job first = {.probe = probe(0), .worker = w, .claimed = -1};
    first.probe.work.done = claiming_done;
    first.probe.work.quiet_done = true;
    struct probe_job second = probe(0);
    worker_submit(w, &gate.probe.work);
    worker_submit(w, &first.probe.work);
    worker_submit(w, &second.work);
    sem_post(&gate.go);
    deliver(loop, &second);
    CHECK(first.probe.delivered > 0 && second.delivered == first.probe.delivered + 1);
    CHECK_MSG(first.claimed == 0, "claimed while the next job was not delivered (%d)",
              first.claimed);
    CHECK(worker_claim(w, false)); /* all delivered */
    worker_unclaim(w);
    CHECK(worker_destroy(w));
    sem_destroy(&gate.go);
}

/* A job that waited out its budget and woke late: its end is judged like
 * a late run (5% + 0.5 ms), starved when the wake-up's run-queue delay
 * alone passes that; unknown delay counts as starved. */
static void test_late_end(void)
{
    const struct worker_timing slow = {.speed = 0.1, .dilation = 1, .cpu_device = true};
    bool starved = false;
    CHECK(!worker_late_end(&slow, 6, 0.7, 0.7, &starved)); /* under 0.3 + 0.5 ms */
    CHECK(worker_late_end(&slow, 6, 0.9, 0.9, &starved) && starved);
    starved = true;
    CHECK(worker_late_end(&slow, 6, 0.9, 0.1, &starved) && !starved); /* the timer was late */
    starved = false;
    CHECK(worker_late_end(&slow, 6, 0.9, -1, &starved) && starved);
    const struct worker_timing gpu = {.speed = 1, .dilation = 4, .cpu_device = false};
    CHECK(!worker_late_end(&gpu, 6, 100, 100, &starved)); /* never counted on a GPU */
}

int main(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    test_runs_here_when_idle(loop);
    test_no_claim_out_of_order(loop);
    test_gate_holder(loop);
    test_no_claim_with_slack(loop);
    test_late_end();
    check_quiet_done(loop, false);
    check_quiet_done(loop, true);
    test_no_claim_while_delivering(loop);
    ev_loop_destroy(loop);
    return check_report();
}
