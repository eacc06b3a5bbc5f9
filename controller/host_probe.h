/* host_probe.h — what this host offers, found out once per process on a
 * thread of its own, so that nothing waits for it on the libev loop:
 *
 *   HOST_PROBE_KERNEL  the kernel's features (emu_nl_probe: a scratch
 *                      namespace tried for veth, bridge, tun and qdiscs;
 *                      20-40 ms, more on a loaded host), for a start's
 *                      backend choice and hn.emulation();
 *   HOST_PROBE_CUDA    whether a CUDA device can run here
 *                      (kern_device_available: loading the CUDA module
 *                      with cuBLAS, 0.1-0.2 s, then asking the driver).
 *
 * host_probe_begin starts a probe (once; later calls do nothing), as soon
 * as a run knows it will want it (a network with an emulated backend, a
 * node asking for cuda). A caller on the loop checks host_probe_done; if
 * not yet, host_probe_wait calls it back from the loop when it is. The
 * results never change once done.
 *
 * Owns: the probes' threads (detached; each ends with its probe), the
 * results, the waiters and one ev_async on the loop of the first begin (the
 * default loop: there is one per process). */
#pragma once

#include "emu/nl.h"

#include <ev.h>
#include <stdbool.h>

enum host_probe { HOST_PROBE_KERNEL, HOST_PROBE_CUDA, HOST_PROBE_COUNT };

typedef void (*host_probe_fn)(void *ctx);

void host_probe_begin(struct ev_loop *loop, enum host_probe which);
bool host_probe_done(enum host_probe which);
/* fn(ctx) from the loop once which is done (begun if it was not); not if it
 * already is (check first). 0, or -1 when out of memory. */
int host_probe_wait(struct ev_loop *loop, enum host_probe which, host_probe_fn fn, void *ctx);
/* Drops every wait of ctx (its owner goes first); NULL: every wait (the
 * run's teardown, before its tasks go). */
void host_probe_forget(void *ctx);

/* Once done: the kernel's features, or NULL with why (no privilege to
 * create a namespace, ...). */
const struct emu_nl_features *host_probe_kernel(char *why, size_t whylen);
/* The kernel's features probed here and now, unless a probe was begun
 * (then its result, or NULL while it runs): for a process that needs them
 * before its loop runs, the agent's hello, whose part's build then finds
 * the probe done instead of making a second scratch namespace beside its
 * own (one probe per agent, not two). */
const struct emu_nl_features *host_probe_kernel_now(struct ev_loop *loop, char *why, size_t whylen);
/* Once done: whether a CUDA device can run here, and if not, why. */
bool host_probe_cuda(char *why, size_t whylen);
