/* l_model.c — hn.model_check(spec): the peers' own parser of model specs
 * (kernels/model_spec.c), so that a scenario or the algorithm library
 * refuses a bad spec before any peer is asked to build it, with the same
 * message and from the one definition of the grammar. */
#include "lua/l_model.h"

#include "kernels/model_spec.h"

#include <lauxlib.h>

/* hn.model_check(spec) -> the parameter count, or nil and why. */
static int l_model_check(lua_State *L)
{
    const char *spec = luaL_checkstring(L, 1);
    struct model_spec parsed;
    char err[256];
    if (model_spec_parse(spec, &parsed, err, sizeof err) < 0) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushinteger(L, (lua_Integer)parsed.param_count);
    return 1;
}

static const luaL_Reg model_functions[] = {
    {"model_check", l_model_check},
    {NULL, NULL},
};

void l_model_register(lua_State *L)
{
    luaL_setfuncs(L, model_functions, 0);
}
