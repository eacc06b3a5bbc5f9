/* proc.h — programs run inside a node (node:run, node:spawn).
 *
 * Forks a child that enters the node's network namespace and execs argv,
 * with stdout and stderr captured through pipes read on the libev loop
 * (never blocking it) and the exit reaped with ev_child. The completion
 * callback runs once, after the exit and both pipes' EOF.
 * Owns the pipes, the captured output (at most PROC_OUTPUT_MAX bytes per
 * stream; the rest is counted and dropped) and the child until reaped.
 * Needs the default libev loop (ev_child). */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROC_OUTPUT_MAX (16u << 20)

struct proc;

/* status: the exit code, or 128 + signal number when killed. out/err are
 * NUL-terminated and valid only during the call. */
typedef void (*proc_done_fn)(void *ctx, struct proc *p, int status, const char *out, size_t out_len,
                             const char *err, size_t err_len);

/* Where and how a program runs. */
struct proc_spec {
    int netns_fd;    /* the node's namespace (the program then runs under an init
                      * of its own, spawn.h), or -1 for the controller's */
    const char *cwd; /* working directory, or NULL for the controller's */
    /* The program's end is the end: whatever it started and left running
     * is SIGKILLed (its process group; with a namespace, everything in its
     * PID namespace), so that it cannot hold the output pipes open.
     * Without it, the completion waits for them (a node's daemons). */
    bool end_with_program;
};

struct proc *proc_spawn(struct ev_loop *loop, const struct proc_spec *spec, char *const argv[],
                        proc_done_fn done, void *ctx, char *err, size_t errlen);
pid_t proc_pid(const struct proc *p);
bool proc_finished(const struct proc *p);
void proc_kill(struct proc *p, int sig);
/* Changes where the completion goes (e.g. NULL when its waiter is gone). */
void proc_set_done(struct proc *p, proc_done_fn done, void *ctx);
/* SIGKILLs the child if it is still running (reaped from the loop,
 * controller/reaper.h), then frees. Never waits. */
void proc_free(struct proc *p);
