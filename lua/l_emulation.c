/* l_emulation.c — hn.emulation(): which backend `auto` would give a network that
 * uses everything (rates, delay/jitter/loss, switches) on this host, and
 * why, so that a scenario can say in one line what it falls back to. The
 * probe is emu_nl_probe() (it creates and removes one namespace), run once
 * per process off the loop (controller/host_probe.h): a call before it is
 * done suspends only the calling task. The decision is backend_pick.c's,
 * as for `hiernet doctor`. */
#include "lua/l_emulation.h"

#include "controller/backend_pick.h"
#include "controller/host_probe.h"
#include "lua/runtime.h"
#include "topo/network.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pushes "kernel" | "user" | "none", reason; the probe is done. */
static int push_emulation(lua_State *L)
{
    char why[512], probe_err[256];
    const struct emu_nl_features *f = host_probe_kernel(probe_err, sizeof probe_err);
    int backend = doctor_pick_backend(f, why, sizeof why);
    if (!f) snprintf(why + strlen(why), sizeof why - strlen(why), " (%s)", probe_err);
    lua_pushstring(L, topo_backend_name((enum topo_backend)backend));
    lua_pushstring(L, why);
    return 2;
}

/* A task waiting for the probe. */
struct emulation_wait {
    struct sched *sched;
    task_token tok;
};

static int push_on_wake(lua_State *co, void *ud)
{
    (void)ud;
    return push_emulation(co);
}

static void on_probed(void *ctx)
{
    struct emulation_wait *w = ctx;
    sched_wake(w->sched, w->tok, push_on_wake, NULL);
    free(w);
}

static int emulation_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    return 2; /* what push_on_wake pushed */
}

/* hn.emulation() -> "kernel" | "user" | "none", reason. */
static int l_emulation(lua_State *L)
{
    if (host_probe_done(HOST_PROBE_KERNEL)) return push_emulation(L);
    if (!lua_isyieldable(L)) return luaL_error(L, "hn.emulation: call it from a task");
    struct hn_runtime *rt = hn_runtime(L);
    struct emulation_wait *w = malloc(sizeof *w);
    if (!w || host_probe_wait(rt->loop, HOST_PROBE_KERNEL, on_probed, w) < 0) {
        free(w);
        return luaL_error(L, "hn.emulation: out of memory");
    }
    w->sched = rt->sched;
    /* The probe's end cannot be heard before we yield: it comes from the loop. */
    w->tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, emulation_k);
}

static const luaL_Reg emulation_functions[] = {
    {"emulation", l_emulation},
    {NULL, NULL},
};

void l_emulation_register(lua_State *L)
{
    luaL_setfuncs(L, emulation_functions, 0);
}
