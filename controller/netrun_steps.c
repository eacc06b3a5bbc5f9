/* netrun_steps.c — the netrun's worker thread: a build's (or a run-time
 * change's) step off the loop, one at a time, and the build's first
 * error. */
#include "controller/netrun_internal.h"

#include "common/container.h"

#include <signal.h>

/* ---- the build's steps off the loop ----
 *
 * The kernel work of a build (namespaces, veths, addresses, routes, qdiscs,
 * waiting for the links to run) takes from milliseconds to seconds and
 * touches nothing but the netrun's own topology: it runs on a thread of its
 * own, one step at a time, and the loop hears of its end through job_done
 * (an ev_async) and goes on with the next step. Every signal stays blocked
 * on that thread: they are the loop's. */
static void *job_main(void *arg)
{
    struct netrun *nr = arg;
    nr->job.work(nr);
    ev_async_send(nr->loop, &nr->job_done);
    return NULL;
}

void netrun_job_begin(struct netrun *nr, void (*work)(struct netrun *),
                      void (*then)(struct netrun *))
{
    nr->job.work = work;
    nr->job.then = then;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    nr->job.running = pthread_create(&nr->job.thread, NULL, job_main, nr) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!nr->job.running) job_main(nr); /* no thread: here, in turn; `then` still on the loop */
}

/* Goes on with `then` at the loop's next turn (no work off the loop). */
void netrun_job_then(struct netrun *nr, void (*then)(struct netrun *))
{
    nr->job.then = then;
    ev_async_send(nr->loop, &nr->job_done);
}

void netrun_on_job_done(EV_P_ ev_async *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, job_done);
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    void (*then)(struct netrun *) = nr->job.then;
    nr->job.then = NULL;
    if (then) then(nr);
}

/* The build fails; node and link are the ones at fault (-1: none known). */
void netrun_job_fail_at(struct netrun *nr, bool env_error, int node, int link, const char *err)
{
    if (nr->job.rc < 0) return; /* the first error wins */
    nr->job.rc = -1;
    net_error_set(&nr->job.error, net_error_build_code(env_error), node, link, err);
}

/* The build fails with a step's error (the first error wins). */
void netrun_job_fail_with(struct netrun *nr, const struct net_error *e)
{
    if (nr->job.rc < 0) return;
    nr->job.rc = -1;
    nr->job.error = *e;
}

void netrun_job_fail(struct netrun *nr, bool env_error, const char *err)
{
    netrun_job_fail_at(nr, env_error, -1, -1, err);
}
