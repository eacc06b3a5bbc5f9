/* host_probe.c — the host's features, probed off the loop (see host_probe.h). */
#include "controller/host_probe.h"

#include "kernels/device.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct probe_waiter {
    enum host_probe which;
    host_probe_fn fn;
    void *ctx;
    struct probe_waiter *next;
};

/* Written by a probe's thread before its done flag is set (release), read
 * by the loop after seeing it (acquire). */
static struct {
    atomic_bool begun, done;
    int rc; /* 0 ok, -1 failed (why) */
    char why[512];
} probes[HOST_PROBE_COUNT];
static struct emu_nl_features kernel_features;

static struct ev_loop *probe_loop;
static ev_async probe_done_async;
static struct probe_waiter *waiters; /* the loop's thread only */

static void probe_kernel(void)
{
    probes[HOST_PROBE_KERNEL].rc = emu_nl_probe(&kernel_features, probes[HOST_PROBE_KERNEL].why,
                                                sizeof probes[HOST_PROBE_KERNEL].why);
}

static void probe_cuda(void)
{
    probes[HOST_PROBE_CUDA].rc =
        kern_device_available(KERN_DEVICE_CUDA, probes[HOST_PROBE_CUDA].why,
                              sizeof probes[HOST_PROBE_CUDA].why)
            ? 0
            : -1;
}

static void *probe_main(void *arg)
{
    enum host_probe which = (enum host_probe)(long)arg;
    if (which == HOST_PROBE_KERNEL)
        probe_kernel();
    else
        probe_cuda();
    atomic_store(&probes[which].done, true);
    ev_async_send(probe_loop, &probe_done_async);
    return NULL;
}

/* Calls back every waiter whose probe is done. */
static void on_probe_done(EV_P_ ev_async *w, int revents)
{
    (void)w, (void)revents;
    struct probe_waiter **p = &waiters;
    while (*p) {
        struct probe_waiter *wt = *p;
        if (!atomic_load(&probes[wt->which].done)) {
            p = &wt->next;
            continue;
        }
        *p = wt->next;
        ev_unref(EV_A);
        wt->fn(wt->ctx); /* may add or drop waiters: the list is walked from its head again */
        free(wt);
        p = &waiters;
    }
}

static void loop_attach(struct ev_loop *loop)
{
    if (probe_loop) return;
    probe_loop = loop;
    ev_async_init(&probe_done_async, on_probe_done);
    ev_async_start(loop, &probe_done_async);
    ev_unref(loop); /* a probe keeps the loop alive only for its waiters */
}

void host_probe_begin(struct ev_loop *loop, enum host_probe which)
{
    if (atomic_exchange(&probes[which].begun, true)) return;
    loop_attach(loop);
    /* Every signal stays the loop's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t thread;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (rc == 0) rc = pthread_create(&thread, &attr, probe_main, (void *)(long)which);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) probe_main((void *)(long)which); /* no thread: here, once */
}

const struct emu_nl_features *host_probe_kernel_now(struct ev_loop *loop, char *why, size_t whylen)
{
    loop_attach(loop); /* as host_probe_begin would have: host_probe_wait needs it */
    if (!atomic_exchange(&probes[HOST_PROBE_KERNEL].begun, true)) {
        probe_kernel();
        atomic_store(&probes[HOST_PROBE_KERNEL].done, true);
    }
    if (!atomic_load(&probes[HOST_PROBE_KERNEL].done))
        return snprintf(why, whylen, "the kernel's probe is still running"), NULL;
    return host_probe_kernel(why, whylen);
}

bool host_probe_done(enum host_probe which)
{
    return atomic_load(&probes[which].done);
}

int host_probe_wait(struct ev_loop *loop, enum host_probe which, host_probe_fn fn, void *ctx)
{
    struct probe_waiter *w = malloc(sizeof *w);
    if (!w) return -1;
    host_probe_begin(loop, which);
    *w = (struct probe_waiter){which, fn, ctx, waiters};
    waiters = w;
    ev_ref(probe_loop);
    return 0;
}

void host_probe_forget(void *ctx)
{
    struct probe_waiter **p = &waiters;
    while (*p) {
        struct probe_waiter *w = *p;
        if (ctx && w->ctx != ctx) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        ev_unref(probe_loop);
        free(w);
    }
}

const struct emu_nl_features *host_probe_kernel(char *why, size_t whylen)
{
    if (probes[HOST_PROBE_KERNEL].rc == 0) return &kernel_features;
    snprintf(why, whylen, "%s", probes[HOST_PROBE_KERNEL].why);
    return NULL;
}

bool host_probe_cuda(char *why, size_t whylen)
{
    if (probes[HOST_PROBE_CUDA].rc == 0) return true;
    snprintf(why, whylen, "%s", probes[HOST_PROBE_CUDA].why);
    return false;
}
