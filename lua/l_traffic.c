/* l_traffic.c — net:traffic{...}, background traffic between two hosts
 * (docs/lua-api.md "Background traffic"). The binding's part: it checks the
 * option names, converts `rate` ("5Mbit", bit/s) and `on_s` / `off_s`
 * ("500ms", seconds) with the units of net:link, and hands the plain table
 * to hiernet.traffic (lua/hiernet/traffic.lua), which asks the two peers for
 * the flow (peer/commands_traffic.h) and returns its handle. The peers own
 * the flows: they end with them, at net:stop() or when the run ends. */
#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lua/l_net.h"
#include "topo/units.h"

static const char *const traffic_options[] = {"from",  "to",   "rate",  "pattern", "on_s", "off_s",
                                              "proto", "seed", "bytes", "size",    NULL};

static const char *traffic_net_name(lua_State *L)
{
    struct l_network **p = luaL_checkudata(L, 1, NETWORK_MT);
    if (!*p) luaL_error(L, "network handle is closed");
    return (*p)->topo->name;
}

/* rate: bit/s from "5Mbit" or a number; a negative or zero one is an error
 * quoting it. Left as it is when absent. */
static void traffic_convert_rate(lua_State *L, int opts, const char *net)
{
    int type = lua_getfield(L, opts, "rate");
    char err[200];
    uint64_t bps = 0;
    if (type == LUA_TSTRING) {
        if (topo_units_parse_rate(lua_tostring(L, -1), &bps, err, sizeof err) != 0)
            luaL_error(L, "network '%s': traffic: rate: %s", net, err);
        lua_pushnumber(L, (double)bps);
        lua_setfield(L, opts, "rate");
    } else if (type == LUA_TNUMBER) {
        if (!(lua_tonumber(L, -1) > 0))
            luaL_error(L, "network '%s': traffic: rate %s must be above 0 bit/s", net,
                       luaL_tolstring(L, -1, NULL));
    } else if (type != LUA_TNIL) {
        luaL_error(L, "network '%s': traffic: rate must be a rate (\"5Mbit\") or bit/s, got %s",
                   net, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

/* on_s / off_s: seconds from "500ms" or a number; negative is an error. */
static void traffic_convert_time(lua_State *L, int opts, const char *key, const char *net)
{
    int type = lua_getfield(L, opts, key);
    char err[200];
    uint64_t ns = 0;
    if (type == LUA_TSTRING) {
        if (topo_units_parse_time(lua_tostring(L, -1), &ns, err, sizeof err) != 0)
            luaL_error(L, "network '%s': traffic: %s: %s", net, key, err);
        lua_pushnumber(L, (double)ns / 1e9);
        lua_setfield(L, opts, key);
    } else if (type == LUA_TNUMBER) {
        if (!(lua_tonumber(L, -1) >= 0))
            luaL_error(L, "network '%s': traffic: %s %s is negative", net, key,
                       luaL_tolstring(L, -1, NULL));
    } else if (type != LUA_TNIL) {
        luaL_error(L, "network '%s': traffic: %s must be a time (\"2s\") or seconds, got %s", net,
                   key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

static int traffic_k(lua_State *L, int status, lua_KContext base)
{
    return lua_gettop(L) - (int)base;
}

/* net:traffic{...}: upvalue 1 is the network's methods table, which
 * hiernet.traffic extends once so that net:stop() stops the flows first. */
static int l_net_traffic(lua_State *L)
{
    const char *net = traffic_net_name(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    char what[160];
    snprintf(what, sizeof what, "network '%s': traffic", net);
    lnet_check_options(L, 2, traffic_options, what);
    lua_newtable(L); /* a copy: the caller's table stays as written */
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, 3);
    }
    traffic_convert_rate(L, 3, net);
    traffic_convert_time(L, 3, "on_s", net);
    traffic_convert_time(L, 3, "off_s", net);
    int base = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushstring(L, "hiernet.traffic");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "start");
    lua_remove(L, -2);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 3);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_callk(L, 3, LUA_MULTRET, base, traffic_k);
    return traffic_k(L, LUA_OK, base);
}

void lnet_traffic_methods(lua_State *L)
{
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_net_traffic, 1);
    lua_setfield(L, -2, "traffic");
}
