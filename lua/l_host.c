/* l_host.c — programs the Lua library runs on the controller's host
 * (gnuplot, Graphviz's dot, the Mininet helper), outside every emulated
 * node: core._host_run(argv, {cwd=, sandbox=, timeout=}) waits for the
 * program without blocking the loop and returns status, stdout, stderr.
 *
 * The process work is controller/proc.c. Owns one struct host_run per
 * running program, listed in the runtime so that the run's end (normal,
 * error or signal) kills and reaps whatever is still running. */
#include "lua/l_host.h"

#include "common/container.h"
#include "controller/proc.h"
#include "emu/netns.h"

#include <lauxlib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_ARGV_MAX 64

struct host_run {
    struct hn_runtime *rt;
    struct proc *proc;
    task_token tok;
    ev_timer timer;
    double timeout_s;
    bool timed_out;
    struct host_run *prev, *next;
};

/* What the waiting task receives. */
struct host_result {
    const struct host_run *h;
    int status;
    const char *out, *err;
    size_t out_len, err_len;
};

static void host_unlink(struct host_run *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        h->rt->host_runs = h->next;
    if (h->next) h->next->prev = h->prev;
}

/* status, out, err; or nil, "timed out after N s", err on a timeout. */
static int push_result(lua_State *co, void *ud)
{
    const struct host_result *r = ud;
    if (r->h->timed_out) {
        lua_pushnil(co);
        lua_pushfstring(co, "timed out after %f s", r->h->timeout_s);
    } else {
        lua_pushinteger(co, r->status);
        lua_pushlstring(co, r->out, r->out_len);
    }
    lua_pushlstring(co, r->err, r->err_len);
    return 3;
}

static void on_done(void *ctx, struct proc *p, int status, const char *out, size_t out_len,
                    const char *err, size_t err_len)
{
    struct host_run *h = ctx;
    struct host_result r = {h, status, out, err, out_len, err_len};
    ev_timer_stop(h->rt->loop, &h->timer);
    host_unlink(h);
    sched_wake(h->rt->sched, h->tok, push_result, &r);
    proc_free(p); /* its last callback: out and err are no longer needed */
    free(h);
}

static void on_timeout(EV_P_ ev_timer *w, int revents)
{
    struct host_run *h = container_of(w, struct host_run, timer);
    h->timed_out = true;
    proc_kill(h->proc, SIGKILL); /* the completion follows once it is reaped */
}

/* argv from an array of strings; the strings stay anchored in the table. */
static char **collect_argv(lua_State *L, int i, char **argv)
{
    lua_Integer n = luaL_len(L, i);
    if (n < 1 || n >= HOST_ARGV_MAX)
        luaL_error(L, "_host_run: argv must hold 1 to %d strings", HOST_ARGV_MAX - 1);
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_rawgeti(L, i, k) != LUA_TSTRING)
            luaL_error(L, "_host_run: argument %d is not a string", (int)k);
        argv[k - 1] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    argv[n] = NULL;
    return argv;
}

/* A fresh, empty network namespace (root only): a program that runs code
 * we do not control gets no way to touch the host's network. -1 when this
 * process may not make one; the program then runs without the privilege
 * to change the network anyway. */
static int sandbox_namespace(struct emu_netns *ns)
{
    char err[256];
    if (geteuid() != 0 || emu_netns_create(ns, 0, err, sizeof err) < 0) return -1;
    return ns->fd;
}

static int host_run_k(lua_State *L, int status, lua_KContext ctx)
{
    return 3;
}

/* core._host_run(argv, {cwd=, sandbox=false, timeout=0}) -> status, out, err */
static int l_host_run(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isyieldable(L)) return luaL_error(L, "_host_run: must be called from a task");
    lua_settop(L, 2);
    if (lua_isnil(L, 2)) {
        lua_newtable(L);
        lua_replace(L, 2);
    }
    luaL_checktype(L, 2, LUA_TTABLE);
    char *argv[HOST_ARGV_MAX];
    collect_argv(L, 1, argv);
    lua_getfield(L, 2, "cwd");
    const char *cwd = lua_tostring(L, -1);
    lua_getfield(L, 2, "sandbox");
    bool sandbox = lua_toboolean(L, -1);
    lua_getfield(L, 2, "timeout");
    double timeout = lua_tonumber(L, -1);
    struct host_run *h = calloc(1, sizeof *h);
    if (!h) return luaL_error(L, "%s: out of memory", argv[0]);
    /* No task to wake until sched_suspend below gives one: should it raise
     * (a coroutine that is not a task), the completion wakes nobody. */
    h->tok = (task_token){UINT32_MAX, 0};
    struct emu_netns ns = {.fd = -1};
    struct proc_spec spec = {sandbox ? sandbox_namespace(&ns) : -1, cwd, true};
    char err[512];
    h->proc = proc_spawn(rt->loop, &spec, argv, on_done, h, err, sizeof err);
    emu_netns_close(&ns); /* the program holds its namespace now */
    if (!h->proc) {
        free(h);
        return luaL_error(L, "%s", err);
    }
    h->rt = rt;
    h->timeout_s = timeout;
    ev_timer_init(&h->timer, on_timeout, timeout, 0);
    /* From now, not from the loop's cached time, which the Lua before this
     * call (and the fork) made old: the timeout would be cut short. */
    ev_now_update(rt->loop);
    if (timeout > 0) ev_timer_start(rt->loop, &h->timer);
    h->next = rt->host_runs;
    if (h->next) h->next->prev = h;
    rt->host_runs = h;
    /* The completion cannot come before we yield: callbacks run from the loop. */
    h->tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, host_run_k);
}

/* core._which(name) -> the path of an executable found through PATH, or nil. */
static int l_which(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strchr(name, '/')) {
        if (access(name, X_OK) == 0) return lua_pushstring(L, name), 1;
        return 0;
    }
    const char *path = getenv("PATH");
    char candidate[4096];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(candidate, sizeof candidate, "%.*s/%s", (int)n, n ? path : ".", name);
        if (access(candidate, X_OK) == 0) return lua_pushstring(L, candidate), 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

void l_host_release(struct hn_runtime *rt)
{
    while (rt->host_runs) {
        struct host_run *h = rt->host_runs;
        host_unlink(h);
        ev_timer_stop(rt->loop, &h->timer);
        proc_set_done(h->proc, NULL, NULL);
        proc_free(h->proc); /* SIGKILLs its process group and reaps it */
        free(h);
    }
}

void l_host_register(lua_State *L)
{
    static const luaL_Reg fns[] = {{"_host_run", l_host_run}, {"_which", l_which}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
