/* l_sched.c — the task scheduler and its Lua face (see sched.h).
 *
 * hn.spawn(fn, ...) -> task; task:wait(); task:status(); hn.wait_all(list);
 * hn.wait_any(list) -> index, values...; hn.sleep(s); hn.now(); hn.yield();
 * all in the run's emulated time (real time / dilation, see sched.h);
 * and for Lua-side primitives (hn.queue): core.prepare() -> token,
 * core.park(), core.wake(token). */
#include "common/container.h"
#include "lua/sched.h"

#include "common/clock.h"
#include "common/fifo.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TASK_MT "hiernet.task"
#define SCHED_KEY "hiernet.sched"

enum task_state { TASK_READY, TASK_RUNNING, TASK_WAITING, TASK_DONE, TASK_FAILED };

struct waiter {
    task_token tok;
};

struct task {
    struct sched *sched;
    lua_State *co;
    int self_ref;    /* anchors the userdata while the task is unfinished */
    int thread_ref;  /* anchors the coroutine while it runs */
    int results_ref; /* after DONE: table {n=, ...}; after FAILED: the error value */
    int traceback_ref;
    int inherited_error_ref, inherited_tb_ref; /* error re-raised from a joined task */
    uint32_t slot;
    enum task_state state;
    int nargs; /* values waiting on co's stack for the next resume */
    bool is_main, observed;
    struct task *failed_dependency; /* a joined task that failed while we waited */
    struct waiter *waiters;
    size_t n_waiters, cap_waiters;
    struct fifo_link ready_link; /* in sched.ready while TASK_READY */
    struct task *next_failed;
};

struct slot {
    struct task *task;
    uint32_t gen;
};

struct sleeper {
    ev_timer timer;
    task_token tok;
    struct sleeper *prev, *next;
    struct sched *sched;
};

struct sched {
    lua_State *L;
    struct ev_loop *loop;
    struct slot *slots;
    uint32_t n_slots, cap_slots;
    uint32_t *free_slots;
    uint32_t n_free;
    struct fifo ready;   /* tasks to resume, in order */
    struct task *failed; /* finished with an error, not yet checked for observation */
    struct sleeper *sleepers;
    struct task *main;
    enum sched_outcome main_outcome;
    char *fatal;
    bool draining, halted;
    /* The run's clock: emulated = emu0 + (real - real0) / dilation. */
    double real0, emu0, dilation;
    ev_prepare runner; /* drains the ready queue before the loop waits again */
    bool runner_held;  /* the runner keeps the loop alive: tasks are queued */
};

/* ---- slots ---- */

static int slot_alloc(struct sched *s, struct task *t)
{
    uint32_t i;
    if (s->n_free) {
        i = s->free_slots[--s->n_free];
    } else {
        if (s->n_slots == s->cap_slots) {
            uint32_t cap = s->cap_slots ? s->cap_slots * 2 : 64;
            struct slot *slots = realloc(s->slots, cap * sizeof *slots);
            if (!slots) return -1;
            s->slots = slots;
            uint32_t *free_slots = realloc(s->free_slots, cap * sizeof *free_slots);
            if (!free_slots) return -1;
            s->free_slots = free_slots;
            s->cap_slots = cap;
        }
        i = s->n_slots++;
        s->slots[i].gen = 0;
    }
    s->slots[i].task = t;
    s->slots[i].gen++;
    t->slot = i;
    return 0;
}

static void slot_release(struct sched *s, struct task *t)
{
    s->slots[t->slot].task = NULL;
    s->slots[t->slot].gen++; /* every outstanding token is now stale */
    s->free_slots[s->n_free++] = t->slot;
}

/* ---- ready queue ---- */

static void ready_push(struct sched *s, struct task *t)
{
    t->state = TASK_READY;
    fifo_push(&s->ready, &t->ready_link);
}

static struct task *ready_pop(struct sched *s)
{
    struct fifo_link *link = fifo_pop(&s->ready);
    return link ? container_of(link, struct task, ready_link) : NULL;
}

/* ---- fatal errors ---- */

static void sched_set_fatal(struct sched *s, const char *msg)
{
    if (!s->fatal) s->fatal = strdup(msg);
    ev_break(s->loop, EVBREAK_ALL);
}

/* ---- finishing a task ---- */

/* Waiters only learn that something finished; their continuations look at
 * the task states themselves, so a wake that comes too late is harmless. */
/* Waiters only learn that something finished; their continuations look at
 * the task states themselves, so a wake that comes too late is harmless. A
 * failure is also noted on each waiter still registered, so wait_all can
 * raise it without rescanning its whole list. */
static void wake_waiters(struct sched *s, struct task *t)
{
    size_t n = t->n_waiters;
    struct waiter *waiters = t->waiters;
    t->waiters = NULL;
    t->n_waiters = t->cap_waiters = 0;
    for (size_t i = 0; i < n; i++) {
        task_token tok = waiters[i].tok;
        struct slot *sl = tok.slot < s->n_slots ? &s->slots[tok.slot] : NULL;
        if (t->state == TASK_FAILED && sl && sl->task && sl->gen == tok.gen &&
            !sl->task->failed_dependency)
            sl->task->failed_dependency = t;
        sched_wake(s, tok, NULL, NULL);
    }
    free(waiters);
}

static void release_thread(struct sched *s, struct task *t)
{
#if LUA_VERSION_RELEASE_NUM >= 50406
    lua_closethread(t->co, s->L);
#else
    lua_resetthread(t->co);
#endif
    luaL_unref(s->L, LUA_REGISTRYINDEX, t->thread_ref);
    t->thread_ref = LUA_NOREF;
    t->co = NULL;
}

static void task_finish_ok(struct sched *s, struct task *t, int nres)
{
    lua_State *L = s->L;
    luaL_checkstack(L, nres + 2, "too many task results");
    lua_xmove(t->co, L, nres);
    lua_createtable(L, nres, 1);
    lua_insert(L, -(nres + 1));
    int tbl = lua_absindex(L, -(nres + 1));
    for (int i = nres; i >= 1; i--)
        lua_rawseti(L, tbl, i);
    lua_pushinteger(L, nres);
    lua_setfield(L, tbl, "n");
    t->results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    t->state = TASK_DONE;
}

/* Traceback of the failed coroutine; reuses the joined task's traceback when
 * the error is one re-raised from it. */
static void task_record_failure(struct sched *s, struct task *t)
{
    lua_State *L = s->L;
    lua_xmove(t->co, L, 1); /* the error value */
    bool inherited = false;
    if (t->inherited_error_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, t->inherited_error_ref);
        inherited = lua_rawequal(L, -1, -2);
        lua_pop(L, 1);
    }
    if (inherited) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, t->inherited_tb_ref);
    } else {
        /* Convert a copy: the error value itself is re-raised as it was. */
        const char *msg = luaL_tolstring(L, -1, NULL);
        luaL_traceback(L, t->co, msg, 0);
        lua_remove(L, -2);
    }
    t->traceback_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    t->results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    t->state = TASK_FAILED;
    t->next_failed = s->failed;
    s->failed = t;
}

static void unanchor(struct sched *s, struct task *t)
{
    luaL_unref(s->L, LUA_REGISTRYINDEX, t->self_ref);
    t->self_ref = LUA_NOREF;
}

static void task_finished(struct sched *s, struct task *t)
{
    release_thread(s, t);
    slot_release(s, t);
    if (t->is_main) {
        s->main_outcome = t->state == TASK_DONE ? SCHED_DONE : SCHED_FAILED;
        t->observed = true; /* the runner reports it */
        if (t->state == TASK_FAILED) {
            lua_rawgeti(s->L, LUA_REGISTRYINDEX, t->traceback_ref);
            sched_set_fatal(s, lua_tostring(s->L, -1));
            lua_pop(s->L, 1);
        }
        ev_break(s->loop, EVBREAK_ALL);
    }
    wake_waiters(s, t);
    /* Failed tasks stay anchored until the unobserved-failure check. */
    if (t->state == TASK_DONE) unanchor(s, t);
}

/* ---- running ---- */

static void task_resume(struct sched *s, struct task *t)
{
    int nres = 0;
    t->state = TASK_RUNNING;
    int status = lua_resume(t->co, s->L, t->nargs, &nres);
    t->nargs = 0;
    if (status == LUA_YIELD) {
        if (t->state == TASK_RUNNING) {
            /* A bare coroutine.yield(): let the other ready tasks run. */
            lua_pop(t->co, nres);
            ready_push(s, t);
        }
        return;
    }
    if (status == LUA_OK)
        task_finish_ok(s, t, nres);
    else
        task_record_failure(s, t);
    task_finished(s, t);
}

static void check_unobserved(struct sched *s)
{
    while (s->failed) {
        struct task *t = s->failed;
        s->failed = t->next_failed;
        if (!t->observed) {
            lua_rawgeti(s->L, LUA_REGISTRYINDEX, t->traceback_ref);
            sched_set_fatal(s, lua_tostring(s->L, -1));
            lua_pop(s->L, 1);
        }
        unanchor(s, t);
    }
}

void sched_halt(struct sched *s)
{
    s->halted = true;
}

static void runner_release(struct sched *s)
{
    if (!s->runner_held) return;
    s->runner_held = false;
    ev_unref(s->loop);
}

void sched_drain(struct sched *s)
{
    if (s->draining) return;
    if (s->halted) {
        runner_release(s);
        return;
    }
    s->draining = true;
    struct task *t;
    while (!s->fatal && (t = ready_pop(s)))
        task_resume(s, t);
    s->draining = false;
    runner_release(s);
    check_unobserved(s);
}

bool sched_wake(struct sched *s, task_token tok, sched_push_fn push, void *ud)
{
    if (s->halted || tok.slot >= s->n_slots) return false;
    struct slot *sl = &s->slots[tok.slot];
    struct task *t = sl->task;
    if (!t || sl->gen != tok.gen || t->state != TASK_WAITING) return false;
    if (push) {
        luaL_checkstack(t->co, 8, "waking a task");
        t->nargs = push(t->co, ud);
    }
    /* Only queued: the ready tasks run from the loop's prepare watcher, once
     * the callback that woke them has returned. Running scenario code inside
     * an I/O callback would let it free the very object whose callback is
     * on the stack (node:restart from a reply, say). */
    ready_push(s, t);
    if (!s->runner_held) {
        s->runner_held = true;
        ev_ref(s->loop); /* the loop must come round once more to run it */
    }
    return true;
}

static struct task *current_task(lua_State *L)
{
    return *(struct task **)lua_getextraspace(L);
}

task_token sched_suspend(lua_State *L)
{
    struct task *t = current_task(L);
    if (!t || t->co != L || t->state != TASK_RUNNING || !lua_isyieldable(L))
        luaL_error(L, "this call waits and must run in a hiernet task (not inside a plain "
                      "coroutine, metamethod or iterator)");
    struct sched *s = t->sched;
    s->slots[t->slot].gen++;
    t->state = TASK_WAITING;
    t->failed_dependency = NULL;
    return (task_token){t->slot, s->slots[t->slot].gen};
}

/* ---- spawning ---- */

static struct task *check_task(lua_State *L, int i)
{
    return luaL_checkudata(L, i, TASK_MT);
}

struct task *sched_spawn(lua_State *L, int nargs, bool is_main)
{
    struct sched *s = sched_get(L);
    int fn = lua_gettop(L) - nargs;
    luaL_checktype(L, fn, LUA_TFUNCTION);
    struct task *t = lua_newuserdatauv(L, sizeof *t, 0);
    memset(t, 0, sizeof *t);
    t->self_ref = t->thread_ref = t->results_ref = t->traceback_ref = LUA_NOREF;
    t->inherited_error_ref = t->inherited_tb_ref = LUA_NOREF;
    t->sched = s;
    t->is_main = is_main;
    luaL_setmetatable(L, TASK_MT);
    if (slot_alloc(s, t) < 0) luaL_error(L, "out of memory spawning a task");
    t->co = lua_newthread(L);
    *(struct task **)lua_getextraspace(t->co) = t;
    t->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, -1);
    t->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    /* Move fn and args into the coroutine; leave the handle in fn's place. */
    lua_rotate(L, fn, 1);
    lua_xmove(L, t->co, nargs + 1);
    t->nargs = nargs;
    ready_push(s, t);
    if (is_main) s->main = t;
    return t;
}

/* hn.spawn(fn, ...) -> task. The new task runs when the caller next waits. */
static int l_spawn(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    sched_spawn(L, lua_gettop(L) - 1, false);
    return 1;
}

/* ---- joining ---- */

static void add_waiter(lua_State *L, struct task *t, task_token tok)
{
    if (t->n_waiters == t->cap_waiters) {
        size_t cap = t->cap_waiters ? t->cap_waiters * 2 : 2;
        struct waiter *w = realloc(t->waiters, cap * sizeof *w);
        if (!w) luaL_error(L, "out of memory waiting for a task");
        t->waiters = w;
        t->cap_waiters = cap;
    }
    t->waiters[t->n_waiters++] = (struct waiter){tok};
}

static bool task_finished_state(const struct task *t)
{
    return t->state == TASK_DONE || t->state == TASK_FAILED;
}

/* Re-raises a joined task's error in the current task, remembering where it came from. */
static int raise_task_error(lua_State *L, struct task *t)
{
    struct task *self = current_task(L);
    t->observed = true;
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->results_ref);
    if (self) {
        luaL_unref(L, LUA_REGISTRYINDEX, self->inherited_error_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, self->inherited_tb_ref);
        lua_pushvalue(L, -1);
        self->inherited_error_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_rawgeti(L, LUA_REGISTRYINDEX, t->traceback_ref);
        self->inherited_tb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return lua_error(L);
}

/* Pushes a finished task's results (or raises its error); returns the count. */
static int push_results(lua_State *L, struct task *t)
{
    if (t->state == TASK_FAILED) return raise_task_error(L, t);
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->results_ref);
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, n, "too many task results");
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

static int wait_k(lua_State *L, int status, lua_KContext ctx)
{
    return push_results(L, check_task(L, 1));
}

/* task:wait() -> the task function's results, or raises its error. */
static int l_task_wait(lua_State *L)
{
    struct task *t = check_task(L, 1);
    lua_settop(L, 1);
    if (task_finished_state(t)) return push_results(L, t);
    if (t == current_task(L)) return luaL_error(L, "a task cannot wait for itself");
    task_token tok = sched_suspend(L);
    add_waiter(L, t, tok);
    return lua_yieldk(L, 0, 0, wait_k);
}

static int l_task_status(lua_State *L)
{
    static const char *const names[] = {"ready", "running", "waiting", "done", "failed"};
    lua_pushstring(L, names[check_task(L, 1)->state]);
    return 1;
}

static int l_task_tostring(lua_State *L)
{
    struct task *t = check_task(L, 1);
    lua_pushfstring(L, "task: %p", (void *)t);
    return 1;
}

/* Collects the tasks of the list argument, checking their type. */
static int list_length(lua_State *L, int i)
{
    luaL_checktype(L, i, LUA_TTABLE);
    int n = (int)luaL_len(L, i);
    for (int k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        if (!luaL_testudata(L, -1, TASK_MT))
            luaL_error(L, "element %d of the task list is a %s, not a task", k,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    return n;
}

static struct task *list_task(lua_State *L, int list, int k)
{
    lua_rawgeti(L, list, k);
    struct task *t = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return t;
}

static int wait_all_k(lua_State *L, int status, lua_KContext ctx);

/* Results table of a wait_all whose tasks have all finished well. */
static int wait_all_results(lua_State *L, int n)
{
    lua_createtable(L, n, 0);
    int tbl = lua_gettop(L);
    for (int k = 1; k <= n; k++) {
        int got = push_results(L, list_task(L, 1, k));
        if (got == 0) lua_pushnil(L);
        lua_settop(L, tbl + 1);
        lua_rawseti(L, tbl, k);
    }
    return 1;
}

/* Moves the cursor (ctx) past finished tasks; returns it (n + 1 when all are done). */
static lua_KContext wait_all_advance(lua_State *L, int n, lua_KContext cursor)
{
    while (cursor <= n && task_finished_state(list_task(L, 1, (int)cursor)))
        cursor++;
    return cursor;
}

/* One token registered on every unfinished task: each finish wakes us; a
 * failure anywhere arrives through failed_dependency; the cursor makes the
 * total scanning O(n). */
static int wait_all_k(lua_State *L, int status, lua_KContext cursor)
{
    struct task *self = current_task(L);
    int n = (int)luaL_len(L, 1);
    lua_settop(L, 1);
    if (self->failed_dependency) return raise_task_error(L, self->failed_dependency);
    cursor = wait_all_advance(L, n, cursor);
    if (cursor > n) return wait_all_results(L, n);
    self->state = TASK_WAITING; /* park again under the same token */
    return lua_yieldk(L, 0, cursor, wait_all_k);
}

/* hn.wait_all(list) -> array of each task's first result; raises the first failure seen. */
static int l_wait_all(lua_State *L)
{
    int n = list_length(L, 1);
    lua_settop(L, 1);
    struct task *self = current_task(L);
    for (int k = 1; k <= n; k++) {
        struct task *t = list_task(L, 1, k);
        if (t->state == TASK_FAILED) return raise_task_error(L, t);
        if (t == self) return luaL_error(L, "a task cannot wait for itself");
    }
    lua_KContext cursor = wait_all_advance(L, n, 1);
    if (cursor > n) return wait_all_results(L, n);
    task_token tok = sched_suspend(L);
    for (int k = (int)cursor; k <= n; k++) {
        struct task *t = list_task(L, 1, k);
        if (!task_finished_state(t)) add_waiter(L, t, tok);
    }
    return lua_yieldk(L, 0, cursor, wait_all_k);
}

static int wait_any_k(lua_State *L, int status, lua_KContext ctx);

static int wait_any_result(lua_State *L, int k)
{
    lua_pushinteger(L, k);
    return 1 + push_results(L, list_task(L, 1, k));
}

/* hn.wait_any(list) -> index, results... of the first task to finish. */
static int l_wait_any(lua_State *L)
{
    int n = list_length(L, 1);
    lua_settop(L, 1);
    if (n == 0) return luaL_error(L, "wait_any: the task list is empty");
    for (int k = 1; k <= n; k++)
        if (task_finished_state(list_task(L, 1, k))) return wait_any_result(L, k);
    task_token tok = sched_suspend(L);
    for (int k = 1; k <= n; k++)
        add_waiter(L, list_task(L, 1, k), tok);
    return lua_yieldk(L, 0, 0, wait_any_k);
}

static int wait_any_k(lua_State *L, int status, lua_KContext ctx)
{
    /* Several tasks may have finished before we ran: report the lowest index
     * among them, which is the one whose completion woke us when they finished
     * in list order, and deterministic otherwise. */
    int n = (int)luaL_len(L, 1);
    for (int k = 1; k <= n; k++)
        if (task_finished_state(list_task(L, 1, k))) return wait_any_result(L, k);
    return luaL_error(L, "wait_any: woken with no finished task");
}

/* ---- time ---- */

static void on_sleep_done(EV_P_ ev_timer *w, int revents)
{
    struct sleeper *sl = container_of(w, struct sleeper, timer);
    struct sched *s = sl->sched;
    if (sl->prev)
        sl->prev->next = sl->next;
    else
        s->sleepers = sl->next;
    if (sl->next) sl->next->prev = sl->prev;
    task_token tok = sl->tok;
    free(sl);
    sched_wake(s, tok, NULL, NULL);
}

static int l_sleep(lua_State *L)
{
    double seconds = luaL_checknumber(L, 1);
    if (!(seconds >= 0)) return luaL_error(L, "sleep: seconds must be >= 0, got %f", seconds);
    struct sched *s = sched_get(L);
    task_token tok = sched_suspend(L); /* raises outside a task */
    struct sleeper *sl = calloc(1, sizeof *sl);
    if (!sl) return luaL_error(L, "sleep: out of memory");
    sl->tok = tok;
    sl->sched = s;
    sl->next = s->sleepers;
    if (s->sleepers) s->sleepers->prev = sl;
    s->sleepers = sl;
    /* Timers count from the loop's cached time, which is as old as this
     * loop iteration: refresh it, or the sleep ends early. */
    ev_now_update(s->loop);
    ev_timer_init(&sl->timer, on_sleep_done, seconds * s->dilation, 0);
    ev_timer_start(s->loop, &sl->timer);
    return lua_yield(L, 0);
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, sched_now(sched_get(L)));
    return 1;
}

/* hn.yield(): let every other ready task run, then continue. */
static int l_yield(lua_State *L)
{
    struct task *t = current_task(L);
    if (!t || t->co != L || !lua_isyieldable(L))
        return luaL_error(L, "yield must run in a hiernet task");
    return lua_yield(L, 0);
}

/* ---- token primitives for Lua-side synchronisation (hn.queue) ---- */

/* _prepare() -> token: a token for the next _park(). Wakes before the park
 * are refused, so a token can be handed out before the task parks. */
static int l_prepare(lua_State *L)
{
    task_token tok = sched_suspend(L);
    current_task(L)->state = TASK_RUNNING;
    lua_pushinteger(L, (lua_Integer)(((uint64_t)tok.slot << 32) | tok.gen));
    return 1;
}

static int l_park(lua_State *L)
{
    struct task *t = current_task(L);
    if (!t || t->co != L || !lua_isyieldable(L)) return luaL_error(L, "park outside a task");
    t->state = TASK_WAITING;
    return lua_yield(L, 0);
}

static int l_wake(lua_State *L)
{
    uint64_t v = (uint64_t)luaL_checkinteger(L, 1);
    task_token tok = {(uint32_t)(v >> 32), (uint32_t)v};
    lua_pushboolean(L, sched_wake(sched_get(L), tok, NULL, NULL));
    return 1;
}

/* ---- setup ---- */

static int l_task_gc(lua_State *L)
{
    struct task *t = check_task(L, 1);
    /* Unfinished tasks are anchored, so only finished ones get here. */
    free(t->waiters);
    t->waiters = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, t->results_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, t->traceback_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, t->inherited_error_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, t->inherited_tb_ref);
    t->results_ref = t->traceback_ref = LUA_NOREF;
    t->inherited_error_ref = t->inherited_tb_ref = LUA_NOREF;
    return 0;
}

static const luaL_Reg task_methods[] = {
    {"wait", l_task_wait},
    {"status", l_task_status},
    {NULL, NULL},
};

static const luaL_Reg task_meta[] = {
    {"__gc", l_task_gc},
    {"__tostring", l_task_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

static void on_runner(EV_P_ ev_prepare *w, int revents)
{
    sched_drain(container_of(w, struct sched, runner));
}

struct sched *sched_new(lua_State *L, struct ev_loop *loop)
{
    struct sched *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->L = L;
    s->loop = loop;
    ev_prepare_init(&s->runner, on_runner);
    ev_prepare_start(loop, &s->runner);
    ev_unref(loop); /* queued tasks alone must not keep the loop alive */
    s->real0 = mono_s();
    s->dilation = 1.0;
    /* Lua leaves the main thread's extra space uninitialised; new threads
     * copy it, so NULL here means "not a task" everywhere but in tasks. */
    *(struct task **)lua_getextraspace(L) = NULL;
    lua_pushlightuserdata(L, s);
    lua_setfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
    luaL_newmetatable(L, TASK_MT);
    luaL_setfuncs(L, task_meta, 0);
    luaL_newlib(L, task_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    return s;
}

struct sched *sched_get(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
    struct sched *s = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!s) luaL_error(L, "hiernet scheduler is not running");
    return s;
}

void sched_free(struct sched *s)
{
    if (!s) return;
    runner_release(s);
    ev_ref(s->loop);
    ev_prepare_stop(s->loop, &s->runner);
    while (s->sleepers) {
        struct sleeper *sl = s->sleepers;
        s->sleepers = sl->next;
        ev_timer_stop(s->loop, &sl->timer);
        free(sl);
    }
    /* Release unfinished tasks so lua_close can collect them. */
    for (uint32_t i = 0; i < s->n_slots; i++) {
        struct task *t = s->slots[i].task;
        if (!t) continue;
        luaL_unref(s->L, LUA_REGISTRYINDEX, t->thread_ref);
        luaL_unref(s->L, LUA_REGISTRYINDEX, t->self_ref);
        t->thread_ref = t->self_ref = LUA_NOREF;
        free(t->waiters);
        t->waiters = NULL;
        t->n_waiters = t->cap_waiters = 0;
        *(struct task **)lua_getextraspace(t->co) = NULL;
    }
    while (s->failed) {
        struct task *t = s->failed;
        s->failed = t->next_failed;
        unanchor(s, t);
    }
    lua_pushnil(s->L);
    lua_setfield(s->L, LUA_REGISTRYINDEX, SCHED_KEY);
    free(s->slots);
    free(s->free_slots);
    free(s->fatal);
    free(s);
}

static const luaL_Reg sched_functions[] = {
    {"spawn", l_spawn},       {"wait_all", l_wait_all},
    {"wait_any", l_wait_any}, {"sleep", l_sleep},
    {"now", l_now},           {"yield", l_yield},
    {"_prepare", l_prepare},  {"_park", l_park},
    {"_wake", l_wake},        {NULL, NULL},
};

void sched_register(lua_State *L)
{
    luaL_setfuncs(L, sched_functions, 0);
}

enum sched_outcome sched_main_outcome(const struct sched *s)
{
    return s->main_outcome;
}

const char *sched_fatal_error(const struct sched *s)
{
    return s->fatal;
}

double sched_now(const struct sched *s)
{
    return s->emu0 + (mono_s() - s->real0) / s->dilation;
}

void sched_set_dilation(struct sched *s, double dilation)
{
    s->emu0 = sched_now(s);
    s->real0 = mono_s();
    s->dilation = dilation >= 1 ? dilation : 1.0;
}

double sched_dilation(const struct sched *s)
{
    return s->dilation;
}
