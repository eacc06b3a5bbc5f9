/* l_model.c — what the controller knows about models and devices without
 * any peer: hn.model_check(spec), the peers' own parser of model specs
 * (kernels/model_spec.c), so that a scenario or the algorithm library
 * refuses a bad spec before any peer is asked to build it, with the same
 * message and from the one definition of the grammar; hn.zoo, hn.profiles,
 * hn.profile and hn.profile_grad_seconds over the model zoo and the device
 * profiles (kernels/zoo.h, kernels/profile.h). Conversions only. */
#include "lua/l_model.h"

#include "kernels/model_spec.h"
#include "kernels/profile.h"
#include "kernels/zoo.h"

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

static int push_fail(lua_State *L, const char *err)
{
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
}

/* { conv = FLOPs, ... } of one direction, only the kinds the model has. */
static void push_op_flops(lua_State *L, const double *by_op)
{
    lua_newtable(L);
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        if (by_op[op] > 0) {
            lua_pushnumber(L, by_op[op]);
            lua_setfield(L, -2, zoo_op_name(op));
        }
}

static void push_zoo_info(lua_State *L, const struct zoo_info *z)
{
    lua_createtable(L, 0, 12);
    lua_pushstring(L, z->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, z->family);
    lua_setfield(L, -2, "family");
    lua_pushstring(L, z->input);
    lua_setfield(L, -2, "input");
    lua_pushinteger(L, (lua_Integer)z->params);
    lua_setfield(L, -2, "params");
    lua_pushinteger(L, (lua_Integer)z->buffers);
    lua_setfield(L, -2, "buffers");
    lua_pushinteger(L, (lua_Integer)zoo_grad_bytes(z));
    lua_setfield(L, -2, "grad_bytes");
    lua_pushnumber(L, zoo_forward_flops(z));
    lua_setfield(L, -2, "forward_flops");
    lua_pushnumber(L, zoo_grad_flops(z));
    lua_setfield(L, -2, "grad_flops");
    lua_pushboolean(L, z->real);
    lua_setfield(L, -2, "real");
    push_op_flops(L, z->cost.forward);
    lua_setfield(L, -2, "forward");
    push_op_flops(L, z->cost.backward);
    lua_setfield(L, -2, "backward");
}

/* hn.zoo(name) -> the model's table, or nil and why; hn.zoo() -> the list
 * of the zoo's tables. */
static int l_zoo(lua_State *L)
{
    struct zoo_info z;
    if (lua_isnoneornil(L, 1)) {
        lua_createtable(L, zoo_count(), 0);
        for (int i = 0; zoo_at(i, &z) == 0; i++) {
            push_zoo_info(L, &z);
            lua_rawseti(L, -2, i + 1);
        }
        return 1;
    }
    const char *name = luaL_checkstring(L, 1);
    char err[1024];
    if (zoo_lookup(name, &z, err, sizeof err) < 0) return push_fail(L, err);
    push_zoo_info(L, &z); /* z.name is the Lua string at index 1: copied here */
    return 1;
}

/* hn.profiles() -> the built-in profile names, sorted. */
static int l_profiles(lua_State *L)
{
    lua_createtable(L, profile_count(), 0);
    for (int i = 0; i < profile_count(); i++) {
        lua_pushstring(L, profile_at(i));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static void push_measured(lua_State *L, const struct device_profile *p)
{
    const char *model;
    int batch;
    double seconds;
    lua_createtable(L, profile_measured_count(p), 0);
    for (int i = 0; profile_measured_at(p, i, &model, &batch, &seconds) == 0; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, model);
        lua_setfield(L, -2, "model");
        lua_pushinteger(L, batch);
        lua_setfield(L, -2, "batch");
        lua_pushnumber(L, seconds);
        lua_setfield(L, -2, "seconds");
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_profile(lua_State *L, const struct device_profile *p)
{
    lua_createtable(L, 0, 5);
    lua_pushstring(L, profile_name(p));
    lua_setfield(L, -2, "name");
    lua_pushstring(L, profile_about(p));
    lua_setfield(L, -2, "about");
    lua_pushnumber(L, profile_bandwidth(p));
    lua_setfield(L, -2, "bandwidth");
    lua_createtable(L, 0, ZOO_OP_COUNT);
    for (int op = 0; op < ZOO_OP_COUNT; op++) {
        lua_pushnumber(L, profile_rate(p, op));
        lua_setfield(L, -2, zoo_op_name(op));
    }
    lua_setfield(L, -2, "rates");
    push_measured(L, p);
    lua_setfield(L, -2, "measured");
}

/* hn.profile(name_or_path) -> { name, about, bandwidth, rates, measured },
 * or nil and why. */
static int l_profile(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    struct device_profile *p;
    char err[1024];
    if (profile_lookup(name, &p, err, sizeof err) < 0) return push_fail(L, err);
    push_profile(L, p); /* a memory error while pushing would leak p, as any
                           allocation failure of the Lua state ends the run */
    profile_free(p);
    return 1;
}

/* hn.profile_grad_seconds(profile, model, batch) -> seconds, basis
 * ("measured" or "flops"), or nil and why. */
static int l_profile_grad_seconds(lua_State *L)
{
    const char *profile = luaL_checkstring(L, 1), *model = luaL_checkstring(L, 2);
    lua_Integer batch = luaL_checkinteger(L, 3);
    luaL_argcheck(L, batch >= 1 && batch <= MODEL_MAX_BATCH, 3, "batch out of range");
    struct zoo_info z;
    struct device_profile *p;
    char err[1024];
    if (zoo_lookup(model, &z, err, sizeof err) < 0) return push_fail(L, err);
    if (profile_lookup(profile, &p, err, sizeof err) < 0) return push_fail(L, err);
    const char *basis;
    double seconds = profile_grad_seconds(p, &z, (int)batch, &basis);
    profile_free(p);
    lua_pushnumber(L, seconds);
    lua_pushstring(L, basis); /* a static string of profile.c */
    return 2;
}

static const luaL_Reg model_functions[] = {
    {"model_check", l_model_check},
    {"zoo", l_zoo},
    {"profiles", l_profiles},
    {"profile", l_profile},
    {"profile_grad_seconds", l_profile_grad_seconds},
    {NULL, NULL},
};

void l_model_register(lua_State *L)
{
    luaL_setfuncs(L, model_functions, 0);
}
