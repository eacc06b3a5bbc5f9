/* l_rng.c — hn.rng(seed[, stream]): a handle on kernels/rng.c's xoshiro256**
 * seeded from (seed, stream), so that schedules drawn in Lua (churn,
 * mobility) are the same on every host and every run, whatever the
 * timing, and never share state with math.random or another stream.
 * Owns nothing but the generator's state, inside the userdata. */
#include "lua/l_rng.h"

#include "kernels/rng.h"

#include <lauxlib.h>
#include <math.h>

#define RNG_MT "hiernet.rng"

static struct rng *check_rng(lua_State *L)
{
    return luaL_checkudata(L, 1, RNG_MT);
}

static uint64_t check_seed(lua_State *L, int i, const char *what)
{
    lua_Integer v = luaL_checkinteger(L, i);
    if (v < 0) luaL_error(L, "hn.rng: %s must be 0 or more, got %d", what, (int)v);
    return (uint64_t)v;
}

/* rng:uniform(): a double in [0, 1), 53 random bits. */
static int l_rng_uniform(lua_State *L)
{
    lua_pushnumber(L, rng_uniform(check_rng(L)));
    return 1;
}

/* rng:exponential(mean): -mean * log(1 - u), never infinite. */
static int l_rng_exponential(lua_State *L)
{
    struct rng *r = check_rng(L);
    lua_Number mean = luaL_checknumber(L, 2);
    if (!(mean > 0)) luaL_error(L, "rng:exponential: the mean must be above 0, got %f", mean);
    lua_pushnumber(L, -mean * log1p(-rng_uniform(r)));
    return 1;
}

/* rng:pick(n): an integer in [1, n], unbiased (Lua's 1-based lists). */
static int l_rng_pick(lua_State *L)
{
    struct rng *r = check_rng(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 1) luaL_error(L, "rng:pick: n must be 1 or more, got %d", (int)n);
    lua_pushinteger(L, (lua_Integer)rng_below(r, (uint64_t)n) + 1);
    return 1;
}

static int l_rng_new(lua_State *L)
{
    uint64_t seed = check_seed(L, 1, "the seed");
    uint64_t stream = lua_isnoneornil(L, 2) ? 0 : check_seed(L, 2, "the stream");
    struct rng *r = lua_newuserdatauv(L, sizeof *r, 0);
    rng_seed(r, seed, stream);
    luaL_setmetatable(L, RNG_MT);
    return 1;
}

void l_rng_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"uniform", l_rng_uniform},
        {"exponential", l_rng_exponential},
        {"pick", l_rng_pick},
        {NULL, NULL},
    };
    luaL_newmetatable(L, RNG_MT);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_rng_new);
    lua_setfield(L, -2, "rng");
}
