/* l_emulation.c — hn.emulation(): which backend `auto` would give a network that
 * uses everything (rates, delay/jitter/loss, switches) on this host, and
 * why, so that a scenario can say in one line what it falls back to. The
 * probe is topo_nl_probe() (it creates and removes one namespace); the
 * decision is backend_pick.c's, as for `hiernet doctor`. */
#include "lua/l_emulation.h"

#include "controller/backend_pick.h"
#include "topo/network.h"
#include "topo/nl.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

/* hn.emulation() -> "kernel" | "user" | "none", reason. */
static int l_emulation(lua_State *L)
{
    struct topo_nl_features f;
    char why[512], probe_err[256];
    int backend;
    if (topo_nl_probe(&f, probe_err, sizeof probe_err) == 0) {
        backend = doctor_pick_backend(&f, why, sizeof why);
    } else {
        backend = doctor_pick_backend(NULL, why, sizeof why);
        snprintf(why + strlen(why), sizeof why - strlen(why), " (%s)", probe_err);
    }
    lua_pushstring(L, topo_backend_name((enum topo_backend)backend));
    lua_pushstring(L, why);
    return 2;
}

static const luaL_Reg emulation_functions[] = {
    {"emulation", l_emulation},
    {NULL, NULL},
};

void l_emulation_register(lua_State *L)
{
    luaL_setfuncs(L, emulation_functions, 0);
}
