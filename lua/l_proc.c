/* l_proc.c — programs in nodes: node:run(cmd) waits for a command and
 * returns its status and output; node:spawn(argv) returns a handle with
 * :wait() and :kill() (:kill(0) says whether it runs). The engine runs
 * the program (controller/netprog.h through netlife_program_spawn: its
 * namespace, registry entry, and its end with the network); this unit
 * converts the arguments and keeps the result in the handle for the
 * tasks that wait for it. */
#include "lua/l_net.h"

#include "controller/netlife.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>

/* ---- completion ---- */

/* The program ended (result), or its network was released first (NULL):
 * keep its results in the handle and wake its waiters; the engine has
 * let the program go. */
static void on_program_done(void *ctx, const struct netprog_result *r)
{
    struct l_proc *lp = ctx;
    lua_State *L = lp->net->rt->L;
    lp->pid = netprog_pid(lp->prog); /* another machine's: known once its agent answered */
    lp->prog = NULL;
    int self = lp->self_ref;
    lp->self_ref = LUA_NOREF;
    if (!r) { /* released at teardown: no task waits any more */
        luaL_unref(L, LUA_REGISTRYINDEX, self);
        return;
    }
    lp->done = true;
    lp->status = r->status;
    lua_pushlstring(L, r->out, r->out_len);
    lp->out_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushlstring(L, r->err, r->err_len);
    lp->err_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    task_token *waiters = lp->waiters;
    size_t n = lp->n_waiters;
    lp->waiters = NULL;
    lp->n_waiters = 0;
    for (size_t i = 0; i < n; i++)
        sched_wake(lp->net->rt->sched, waiters[i], NULL, NULL);
    free(waiters);
    luaL_unref(L, LUA_REGISTRYINDEX, self); /* may let the handle be collected */
}

static struct l_proc *check_proc(lua_State *L, int i)
{
    return luaL_checkudata(L, i, PROC_MT);
}

/* Collects argv from a string (run through /bin/sh -c) or an array of strings. */
static char **collect_argv(lua_State *L, int i, const char *node)
{
    if (lua_type(L, i) == LUA_TSTRING) {
        char **argv = lua_newuserdatauv(L, 4 * sizeof *argv, 0);
        argv[0] = "/bin/sh", argv[1] = "-c", argv[2] = (char *)lua_tostring(L, i), argv[3] = NULL;
        return argv;
    }
    if (!lua_istable(L, i) || luaL_len(L, i) < 1)
        luaL_error(L, "node '%s': expected a command string or a non-empty array of strings", node);
    lua_Integer n = luaL_len(L, i);
    char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "node '%s': argument %d is a %s, not a string", node, (int)k,
                       luaL_typename(L, -1));
        argv[k - 1] = (char *)lua_tostring(L, -1);
        lua_rawseti(L, i, k); /* keep the (possibly converted) string anchored in the table */
    }
    argv[n] = NULL;
    return argv;
}

/* Starts argv (at index 2) in node 1's namespace; pushes the proc handle. */
static struct l_proc *start_proc(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    struct l_network *net = n->net;
    const char *node = net->topo->nodes[n->index].name;
    if (!netlife_running(net->life))
        luaL_error(L, "node '%s': network '%s' is %s", node, net->topo->name, lnet_state_word(net));
    char **argv = collect_argv(L, 2, node);
    struct l_proc *lp = lua_newuserdatauv(L, sizeof *lp, 0);
    memset(lp, 0, sizeof *lp);
    lp->net = net;
    lp->self_ref = lp->out_ref = lp->err_ref = LUA_NOREF;
    snprintf(lp->node, sizeof lp->node, "%s", node);
    luaL_setmetatable(L, PROC_MT);
    char err[512];
    lp->prog =
        netlife_program_spawn(net->life, n->index, argv, on_program_done, lp, err, sizeof err);
    if (!lp->prog) luaL_error(L, "node '%s': %s", node, err);
    lp->pid = netprog_pid(lp->prog);
    lua_pushvalue(L, -1);
    lp->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return lp;
}

/* Parks the running task until the program of lp ends. */
static void proc_add_waiter(lua_State *L, struct l_proc *lp)
{
    if (!lp->prog) luaL_error(L, "node '%s': the program was ended with its network", lp->node);
    task_token *grown = realloc(lp->waiters, (lp->n_waiters + 1) * sizeof *grown);
    if (!grown) luaL_error(L, "node '%s': out of memory", lp->node);
    lp->waiters = grown;
    lp->waiters[lp->n_waiters] = sched_suspend(L);
    lp->n_waiters++;
}

static struct l_proc *finished_proc(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    if (!lp->done) luaL_error(L, "node '%s': the program was ended with its network", lp->node);
    return lp;
}

static int proc_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_proc *lp = finished_proc(L);
    lua_pushinteger(L, lp->status);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->out_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->err_ref);
    return 3;
}

/* p:wait() -> status, out, err (status: exit code, or 128 + signal). */
static int proc_wait(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    lua_settop(L, 1);
    if (lp->done) return proc_wait_k(L, LUA_OK, 0);
    proc_add_waiter(L, lp);
    return lua_yieldk(L, 0, 0, proc_wait_k);
}

static int run_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_proc *lp = finished_proc(L);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, lp->status);
    lua_setfield(L, -2, "status");
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->out_ref);
    lua_setfield(L, -2, "out");
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->err_ref);
    lua_setfield(L, -2, "err");
    return 1;
}

/* node:run(cmd) -> {status=, out=, err=}: cmd is a shell command string or an argv array. */
int lnet_node_run(lua_State *L)
{
    lua_settop(L, 2);
    struct l_proc *lp = start_proc(L);
    lua_replace(L, 1); /* the handle takes the node's place */
    lua_settop(L, 1);
    if (lp->done) return run_k(L, LUA_OK, 0);
    proc_add_waiter(L, lp);
    return lua_yieldk(L, 0, 0, run_k);
}

/* node:spawn(argv) -> handle with :wait() -> status, out, err; :kill([signal]); .pid */
int lnet_node_spawn(lua_State *L)
{
    lua_settop(L, 2);
    start_proc(L);
    return 1;
}

/* ---- p:kill(0): the liveness probe ---- */

struct proc_probe {
    struct sched *sched;
    task_token tok;
};

struct probe_answer {
    bool running;
    const char *error;
};

static int push_probe_answer(lua_State *co, void *ud)
{
    const struct probe_answer *a = ud;
    lua_pushboolean(co, a->running);
    if (a->error)
        lua_pushstring(co, a->error);
    else
        lua_pushnil(co);
    return 2;
}

/* The agent answered (or could not): wakes the task; a stale token, a task
 * gone meanwhile, makes it a no-op. */
static void on_probe_answer(void *ctx, bool running, const char *error)
{
    struct proc_probe *w = ctx;
    struct probe_answer a = {running, error};
    sched_wake(w->sched, w->tok, push_probe_answer, &a);
    free(w);
}

/* Handle at 1; the answer's running and error on top. A program that ended
 * while the agent answered is not running; a failed question is an error
 * unless the program has ended by then (its machine lost: it ended 137). */
static int probe_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    struct l_proc *lp = check_proc(L, 1);
    bool ended = lp->done || !lp->prog;
    if (!lua_isnil(L, -1) && !ended)
        return luaL_error(L, "node '%s': kill(0): %s", lp->node, lua_tostring(L, -1));
    lua_pushboolean(L, lua_toboolean(L, -2) && !ended);
    return 1;
}

/* p:kill(0) -> whether the program runs: at once here, after its agent's
 * answer on another machine (the task waits, the loop does not). */
static int proc_probe(lua_State *L, struct l_proc *lp)
{
    lua_settop(L, 1);
    struct proc_probe *w = lp->prog ? malloc(sizeof *w) : NULL;
    if (lp->prog && !w) return luaL_error(L, "node '%s': kill(0): out of memory", lp->node);
    /* A token no task has: should sched_suspend raise (not in a task), the
     * answer wakes nobody, and frees w. */
    if (w) *w = (struct proc_probe){lp->net->rt->sched, {UINT32_MAX, 0}};
    char err[512];
    int rc =
        lp->prog ? netprog_probe(lp->prog, on_probe_answer, w, err, sizeof err) : NETPROG_ENDED;
    if (rc != NETPROG_ASKED) free(w);
    if (rc < 0) return luaL_error(L, "node '%s': kill(0): %s", lp->node, err);
    if (rc != NETPROG_ASKED) {
        lua_pushboolean(L, rc == NETPROG_RUNNING);
        return 1;
    }
    w->tok = sched_suspend(L); /* the answer comes from the loop, after this yield */
    return lua_yieldk(L, 0, 0, probe_k);
}

/* p:kill([signum]): signals the program (SIGTERM by default); one that
 * ended is left alone. Signal 0 probes (proc_probe). */
static int l_proc_kill(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    int sig = (int)luaL_optinteger(L, 2, SIGTERM);
    if (sig < 0 || sig > 64) return luaL_error(L, "kill: bad signal number %d", sig);
    if (sig == 0) return proc_probe(L, lp);
    if (lp->prog) netprog_kill(lp->prog, sig);
    return 0;
}

static int l_proc_index(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "pid") == 0) {
        lua_pushinteger(L, lp->prog ? netprog_pid(lp->prog) : lp->pid);
        return 1;
    }
    if (strcmp(key, "done") == 0) {
        lua_pushboolean(L, lp->done);
        return 1;
    }
    lua_getfield(L, lua_upvalueindex(1), key);
    return 1;
}

static int l_proc_gc(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, lp->out_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lp->err_ref);
    lp->out_ref = lp->err_ref = LUA_NOREF;
    free(lp->waiters);
    lp->waiters = NULL;
    return 0;
}

static const luaL_Reg proc_methods[] = {
    {"wait", proc_wait},
    {"kill", l_proc_kill},
    {NULL, NULL},
};

void lnet_create_proc_meta(lua_State *L)
{
    luaL_newmetatable(L, PROC_MT);
    luaL_newlib(L, proc_methods);
    lua_pushcclosure(L, l_proc_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_proc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
}
