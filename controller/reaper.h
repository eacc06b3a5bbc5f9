/* reaper.h — children the controller has let go of (a peer, a linkd, a
 * node's program, already SIGKILLed by their owner), reaped from the libev
 * loop, never waited for on it.
 *
 * A client freed before its child exited used to waitpid for it on the
 * spot. SIGKILL does not end a process at once: its exit frees its memory
 * first, and a peer holding half a GiB of tensors took tens of ms to go
 * (node:restart right after node:kill; a network's release), while the
 * loop, and every task of the run, stood still. The owner now hands the pid
 * over here and goes on; an ev_child watcher reaps it.
 *
 * A reaper_group counts the children one owner still waits for, so that it
 * can wait for them on the loop (a network's release ends the peer template
 * and removes the cgroups only once its peers are gone). reaper_wait reaps
 * a group's children, or all, where no loop runs any more (the run's
 * teardown, the process's exit): the one place that waits, and only for
 * children already SIGKILLed.
 *
 * Owns: one entry (an ev_child watcher) per child not yet reaped. Needs the
 * default libev loop (ev_child only works there). */
#pragma once

#include <ev.h>
#include <stddef.h>
#include <sys/types.h>

struct reaper_group {
    size_t pending; /* children of the group not reaped yet */
};

/* Reaps pid (a child of this process, signalled to end) from the loop;
 * counts it in group until then (group may be NULL). A child already gone
 * is not waited for. */
void reaper_take(struct ev_loop *loop, pid_t pid, struct reaper_group *group);
/* Waits here until every child of group (NULL: every child taken) is
 * reaped. For when the loop runs no more. */
void reaper_wait(const struct reaper_group *group);
