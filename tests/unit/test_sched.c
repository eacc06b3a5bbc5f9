/* test_sched.c — the task scheduler: spawn/wait ordering, wait_any and
 * wait_all, errors reaching their waiters, unobserved failures, stale wake
 * tokens, and ten thousand tasks. Runs Lua snippets on a private loop. */
#include "check.h"
#include "lua/sched.h"

#include <lauxlib.h>
#include <lualib.h>
#include <time.h>

struct env {
    lua_State *L;
    struct ev_loop *loop;
    struct sched *s;
};

static void env_open(struct env *e)
{
    e->L = luaL_newstate();
    luaL_openlibs(e->L);
    e->loop = ev_loop_new(EVFLAG_AUTO);
    e->s = sched_new(e->L, e->loop);
    lua_newtable(e->L);
    sched_register(e->L);
    lua_setglobal(e->L, "hn");
}

static void env_close(struct env *e)
{
    sched_free(e->s);
    lua_close(e->L);
    ev_loop_destroy(e->loop);
}

/* Runs code as the main task until it ends; returns the outcome. */
static enum sched_outcome run_main(struct env *e, const char *code)
{
    if (luaL_loadstring(e->L, code) != LUA_OK) {
        fprintf(stderr, "load: %s\n", lua_tostring(e->L, -1));
        return SCHED_FAILED;
    }
    sched_spawn(e->L, 0, true);
    lua_pop(e->L, 1);
    sched_drain(e->s);
    if (sched_main_outcome(e->s) == SCHED_RUNNING && !sched_fatal_error(e->s)) ev_run(e->loop, 0);
    return sched_main_outcome(e->s);
}

static const char *global_string(struct env *e, const char *name)
{
    lua_getglobal(e->L, name);
    const char *s = lua_tostring(e->L, -1);
    lua_pop(e->L, 1);
    return s ? s : "(nil)";
}

/* Runs code that sets the global `out`, and compares it with want. */
static void expect_out(const char *code, const char *want)
{
    struct env e;
    env_open(&e);
    enum sched_outcome o = run_main(&e, code);
    CHECK_MSG(o == SCHED_DONE, "outcome %d, fatal: %s", o,
              sched_fatal_error(e.s) ? sched_fatal_error(e.s) : "none");
    CHECK_STREQ(global_string(&e, "out"), want);
    env_close(&e);
}

static void test_spawn_order(void)
{
    /* Spawned tasks run in spawn order once the spawner waits. */
    expect_out("local log = {}\n"
               "local ts = {}\n"
               "for i = 1, 5 do ts[i] = hn.spawn(function() log[#log+1] = i end) end\n"
               "log[#log+1] = 'main'\n"
               "for _, t in ipairs(ts) do t:wait() end\n"
               "out = table.concat(log, ',')",
               "main,1,2,3,4,5");
}

static void test_wait_results(void)
{
    expect_out("local t = hn.spawn(function(a, b) hn.sleep(0.01) return a + b, 'x' end, 2, 3)\n"
               "local r1, r2 = t:wait()\n"
               "local s1 = t:status()\n"
               "local again = t:wait()\n" /* waiting on a finished task returns at once */
               "out = r1 .. r2 .. s1 .. again",
               "5xdone5");
}

static void test_wait_any_first_finisher(void)
{
    expect_out("local slow = hn.spawn(function() hn.sleep(0.08) return 'slow' end)\n"
               "local fast = hn.spawn(function() hn.sleep(0.01) return 'fast' end)\n"
               "local i, v = hn.wait_any{slow, fast}\n"
               "out = i .. v .. slow:status()",
               "2fastwaiting");
}

static void test_wait_all(void)
{
    expect_out("local ts = {}\n"
               "for i = 1, 4 do ts[i] = hn.spawn(function() hn.sleep(0.01 * (5 - i)) return i * i "
               "end) end\n"
               "out = table.concat(hn.wait_all(ts), ',')",
               "1,4,9,16");
}

static void test_error_reaches_waiter(void)
{
    expect_out("local t = hn.spawn(function() hn.sleep(0.01) error('boom') end)\n"
               "local ok, err = pcall(t.wait, t)\n"
               "out = tostring(ok) .. ' ' .. tostring(err):gsub('^.-: ', '')",
               "false boom");
    /* wait_all raises the failure of any task, not only the first. */
    expect_out("local a = hn.spawn(function() hn.sleep(0.05) return 1 end)\n"
               "local b = hn.spawn(function() hn.sleep(0.01) error('second failed') end)\n"
               "local ok, err = pcall(hn.wait_all, {a, b})\n"
               "out = tostring(ok) .. ' ' .. tostring(err):match('second failed')",
               "false second failed");
}

static void test_unobserved_error_is_fatal(void)
{
    struct env e;
    env_open(&e);
    enum sched_outcome o = run_main(&e, "hn.spawn(function() error('lost in a task') end)\n"
                                        "hn.sleep(0.5)\n");
    CHECK(o == SCHED_RUNNING); /* the main task never finished */
    const char *fatal = sched_fatal_error(e.s);
    CHECK(fatal != NULL);
    if (fatal) {
        CHECK_CONTAINS(fatal, "lost in a task");
        CHECK_CONTAINS(fatal, "stack traceback");
    }
    env_close(&e);
}

static void test_main_error_has_position(void)
{
    struct env e;
    env_open(&e);
    enum sched_outcome o = run_main(&e, "local x = nil\nlocal y = x.field\n");
    CHECK(o == SCHED_FAILED);
    const char *fatal = sched_fatal_error(e.s);
    CHECK(fatal && strstr(fatal, ":2: attempt to index"));
    env_close(&e);
}

static int push_marker(lua_State *co, void *ud)
{
    lua_pushstring(co, ud);
    return 1;
}

/* A wake token taken before the task moved on must not resume it. */
static void test_stale_token(void)
{
    struct env e;
    env_open(&e);
    /* _prepare/_park expose tokens; keep the first one and wake it late. */
    enum sched_outcome o = run_main(&e, "tok = hn._prepare()\n"
                                        "hn._wake(tok)\n" /* not parked yet: refused */
                                        "hn._park()\n");  /* parks under tok */
    CHECK(o == SCHED_RUNNING);
    lua_getglobal(e.L, "tok");
    uint64_t v = (uint64_t)lua_tointeger(e.L, -1);
    lua_pop(e.L, 1);
    task_token tok = {(uint32_t)(v >> 32), (uint32_t)v};
    task_token stale = {tok.slot, tok.gen - 1};
    CHECK(!sched_wake(e.s, stale, push_marker, "stale"));
    CHECK(sched_wake(e.s, tok, push_marker, "fresh"));
    CHECK(!sched_wake(e.s, tok, push_marker, "again")); /* queued already, not waiting */
    sched_drain(e.s);                                   /* what the loop's prepare does */
    CHECK(!sched_wake(e.s, tok, push_marker, "late"));  /* the task has finished */
    CHECK(sched_main_outcome(e.s) == SCHED_DONE);
    env_close(&e);
}

static void test_many_tasks(void)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_out("local ts = {}\n"
               "for i = 1, 10000 do ts[i] = hn.spawn(function() hn.sleep(0.001) return i end) end\n"
               "local sum = 0\n"
               "for _, v in ipairs(hn.wait_all(ts)) do sum = sum + v end\n"
               "out = tostring(sum)",
               "50005000");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("10000 tasks spawned, slept and joined in %.1f ms\n",
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
}

static void test_outside_task(void)
{
    struct env e;
    env_open(&e);
    int rc = luaL_dostring(e.L, "hn.sleep(0.01)");
    CHECK(rc != LUA_OK);
    CHECK_CONTAINS(lua_tostring(e.L, -1), "must run in a hiernet task");
    env_close(&e);
}

int main(void)
{
    test_spawn_order();
    test_wait_results();
    test_wait_any_first_finisher();
    test_wait_all();
    test_error_reaches_waiter();
    test_unobserved_error_is_fatal();
    test_main_error_has_position();
    test_stale_token();
    test_many_tasks();
    test_outside_task();
    return check_report();
}
