/* l_core.c — the C module "hiernet.core": every C-implemented function of
 * the hn table, gathered from the binding units. lua/hiernet/init.lua builds
 * the public module on top of it. */
#include "lua/l_core.h"

#include "hiernet_version.h"
#include "lua/l_emulation.h"
#include "lua/l_host.h"
#include "lua/l_model.h"
#include "lua/l_network.h"
#include "lua/l_results.h"
#include "lua/l_rng.h"
#include "lua/l_runtime.h"
#include "lua/sched.h"

#include <lauxlib.h>

int luaopen_hiernet_core(lua_State *L)
{
    lua_newtable(L);
    sched_register(L);
    l_runtime_register(L);
    l_results_register(L);
    l_emulation_register(L);
    l_network_register(L);
    l_host_register(L);
    l_files_register(L);
    l_codec_register(L);
    l_dot_register(L);
    l_model_register(L);
    l_rng_register(L);
    lua_pushstring(L, HIERNET_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
