/* sched.h — the task scheduler: scenario code runs in Lua coroutines
 * ("tasks") driven by the libev loop.
 *
 * A task that waits (peer call, sleep, join) takes a wake token and yields;
 * the completion wakes it with that token. Tokens carry the generation of
 * the task's slot, bumped on every suspension and when the slot is reused,
 * so a stale completion (for a task that has since moved on or finished) is
 * a no-op and never resumes the wrong task.
 *
 * Errors: a failed task raises its error in every task waiting for it. A
 * failure nobody observed by the time the ready queue drains is fatal: the
 * scheduler records it and breaks the loop, so no error is ever lost.
 *
 * Owns: the task slots, the ready queue, the sleep timers. Tasks are Lua
 * userdata ("hiernet.task") anchored in the registry while they run. */
#pragma once

#include <ev.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

struct sched;
struct task;

typedef struct {
    uint32_t slot, gen;
} task_token;

/* Pushes the values a woken task receives onto its thread; returns how many. */
typedef int (*sched_push_fn)(lua_State *co, void *ud);

struct sched *sched_new(lua_State *L, struct ev_loop *loop);
/* Stops timers and releases every task; call before lua_close. */
void sched_free(struct sched *s);
struct sched *sched_get(lua_State *L);

/* Registers the scheduler's Lua functions (spawn, wait_all, wait_any, sleep,
 * now, yield, and the token primitives) into the table at the top of L. */
void sched_register(lua_State *L);

/* Spawns the function at stack index -(nargs+1) with nargs arguments above it
 * (all popped) as a task, pushes the task handle and queues the task to run.
 * With is_main, the task's end (either way) breaks the loop. */
struct task *sched_spawn(lua_State *L, int nargs, bool is_main);

/* Marks the running task as waiting and returns its wake token. The caller
 * must then return lua_yield/lua_yieldk without raising in between. Raises
 * a Lua error when L is not a task that may yield. */
task_token sched_suspend(lua_State *L);
/* Queues the task of tok to resume with the values push() puts on its
 * stack, unless tok is stale (returns false). Ready tasks run from a
 * prepare watcher once the current callback has returned, never inside it. */
bool sched_wake(struct sched *s, task_token tok, sched_push_fn push, void *ud);
/* Runs every ready task, then checks for unobserved failures. */
void sched_drain(struct sched *s);
/* Ends scheduling for good (run teardown): later wakes are no-ops, so no
 * scenario code runs while the network is torn down. */
void sched_halt(struct sched *s);

/* After the loop: the outcome of the main task. */
enum sched_outcome { SCHED_RUNNING, SCHED_DONE, SCHED_FAILED };
enum sched_outcome sched_main_outcome(const struct sched *s);
/* The fatal error (message + traceback) once the outcome is SCHED_FAILED or
 * an unobserved task failure stopped the loop; NULL otherwise. */
const char *sched_fatal_error(const struct sched *s);
/* The run's clock, in emulated seconds since sched_new: real seconds
 * divided by the time dilation (1 unless set), continuous across a change
 * of dilation. hn.now() reads it, hn.sleep(s) waits s of it (s * dilation
 * real seconds), log lines are stamped with it. */
double sched_now(const struct sched *s);
/* Sets the dilation (>= 1) from now on; sleeps already started keep their
 * real deadlines. */
void sched_set_dilation(struct sched *s, double dilation);
double sched_dilation(const struct sched *s);
