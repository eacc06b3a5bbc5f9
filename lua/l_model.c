/* l_model.c — what the controller knows about models and devices without
 * any peer: hn.model_check(spec), the peers' own parser of model specs
 * (kernels/model_spec.c), so that a scenario or the algorithm library
 * refuses a bad spec before any peer is asked to build it, with the same
 * message and from the one definition of the grammar; hn.zoo, hn.profiles,
 * hn.profile and hn.profile_grad_seconds over the model zoo and the device
 * profiles (kernels/zoo.h, kernels/profile.h). Conversions only. */
#include "lua/l_model.h"
#include "lua/l_fields.h"

#include "kernels/buckets.h"
#include "kernels/model_spec.h"
#include "kernels/profile.h"
#include "kernels/zoo.h"

#include <lauxlib.h>

/* nil and the message: an expected failure (docs/lua-api.md). */
static int push_fail(lua_State *L, const char *err)
{
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
}

/* hn.model_check(spec) -> the parameter count, or nil and why. */
static int l_model_check(lua_State *L)
{
    const char *spec = luaL_checkstring(L, 1);
    struct model_spec parsed;
    char err[256];
    if (model_spec_parse(spec, &parsed, err, sizeof err) < 0) return push_fail(L, err);
    lua_pushinteger(L, (lua_Integer)parsed.param_count);
    return 1;
}

static const char *layer_kind_name(enum model_layer_kind k)
{
    static const char *const names[] = {"dense",     "conv",     "pool",   "flatten",
                                        "batchnorm", "residual", "avgpool"};
    return names[k];
}

/* One row of hn.model_layers: what a split model's planner needs. */
static void push_layer(lua_State *L, const struct model_spec *s, int i)
{
    const struct model_layer *l = &s->layers[i];
    double macs = l->kind == MODEL_LAYER_DENSE  ? (double)l->in_size * l->out_size
                  : l->kind == MODEL_LAYER_CONV ? (double)l->col_size * l->out_c
                                                : 0;
    size_t weights = l->bias_offset - l->weight_offset;
    size_t params =
        l->kind == MODEL_LAYER_DENSE || l->kind == MODEL_LAYER_CONV ||
                l->kind == MODEL_LAYER_BATCHNORM
            ? weights + (l->bias || l->kind == MODEL_LAYER_BATCHNORM ? (size_t)l->out_c : 0)
            : 0;
    char err[256];
    lua_createtable(L, 0, 8);
    set_string(L, "kind", layer_kind_name(l->kind));
    set_integer(L, "in_size", (lua_Integer)l->in_size);
    set_integer(L, "out_size", (lua_Integer)l->out_size);
    set_integer(L, "params", (lua_Integer)params);
    set_number(L, "forward_flops", 2 * macs);
    /* Where its parameters sit in the flat tensor (0-based elements). */
    set_integer(L, "offset", (lua_Integer)l->weight_offset);
    if (l->kind == MODEL_LAYER_BATCHNORM) {
        set_integer(L, "stat_offset", (lua_Integer)l->stat_offset);
        set_integer(L, "stats", 2 * (lua_Integer)l->out_c);
    }
    /* A part may start here: the cut before it is not inside a block. */
    set_boolean(L, "cut_before",
                model_spec_range_check(s, i, s->layer_count - 1, err, sizeof err) == 0);
}

/* hn.model_layers(spec) -> the layer table, 1-based as forward{} counts,
 * or nil and why. */
static int l_model_layers(lua_State *L)
{
    const char *spec = luaL_checkstring(L, 1);
    struct model_spec parsed;
    char err[256];
    if (model_spec_parse(spec, &parsed, err, sizeof err) < 0) return push_fail(L, err);
    lua_createtable(L, parsed.layer_count, 0);
    for (int i = 0; i < parsed.layer_count; i++) {
        push_layer(L, &parsed, i);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* { conv = FLOPs, ... } of one direction, only the kinds the model has. */
static void push_op_flops(lua_State *L, const double *by_op)
{
    lua_newtable(L);
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        if (by_op[op] > 0) set_number(L, zoo_op_name(op), by_op[op]);
}

static void push_zoo_info(lua_State *L, const struct zoo_info *z)
{
    lua_createtable(L, 0, 12);
    set_string(L, "name", z->name);
    set_string(L, "family", z->family);
    set_string(L, "input", z->input);
    set_integer(L, "params", z->params);
    set_integer(L, "buffers", z->buffers);
    set_integer(L, "grad_bytes", zoo_grad_bytes(z));
    set_number(L, "forward_flops", zoo_forward_flops(z));
    set_number(L, "grad_flops", zoo_grad_flops(z));
    set_boolean(L, "real", z->real);
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
        set_string(L, "model", model);
        set_integer(L, "batch", (uint64_t)batch);
        set_number(L, "seconds", seconds);
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_profile(lua_State *L, const struct device_profile *p)
{
    lua_createtable(L, 0, 5);
    set_string(L, "name", profile_name(p));
    set_string(L, "about", profile_about(p));
    set_number(L, "bandwidth", profile_bandwidth(p));
    lua_createtable(L, 0, ZOO_OP_COUNT);
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        set_number(L, zoo_op_name(op), profile_rate(p, op));
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

/* hn.grad_buckets(model, size, bucket_mb [, profile]) -> { {offset=,
 * count=, ready_share=}, ... } in the order they are ready (kernels/
 * buckets.h; shares weighted by the profile's rates when one is given),
 * or nil and why. */
static int l_grad_buckets(lua_State *L)
{
    const char *model = luaL_checkstring(L, 1);
    lua_Integer size = luaL_checkinteger(L, 2);
    double mb = luaL_checknumber(L, 3);
    const char *profile = luaL_optstring(L, 4, NULL);
    luaL_argcheck(L, size >= 1, 2, "size must be positive");
    luaL_argcheck(L, mb > 0, 3, "bucket_mb must be positive");
    struct grad_bucket b[GRAD_BUCKETS_MAX];
    double weights[ZOO_OP_COUNT];
    char err[1024];
    if (profile) {
        struct device_profile *p;
        if (profile_lookup(profile, &p, err, sizeof err) < 0) return push_fail(L, err);
        for (int op = 0; op < ZOO_OP_COUNT; op++)
            weights[op] = 1.0 / profile_rate(p, (enum zoo_op)op);
        profile_free(p);
    }
    int n = grad_buckets_plan(model, (uint64_t)size, grad_bucket_elements(mb),
                              profile ? weights : NULL, b, err, sizeof err);
    if (n < 0) return push_fail(L, err);
    lua_createtable(L, n, 0);
    for (int k = 0; k < n; k++) {
        lua_createtable(L, 0, 3);
        set_integer(L, "offset", b[k].offset);
        set_integer(L, "count", b[k].count);
        set_number(L, "ready_share", b[k].ready_share);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

static const luaL_Reg model_functions[] = {
    {"grad_buckets", l_grad_buckets},
    {"model_check", l_model_check},
    {"model_layers", l_model_layers},
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
