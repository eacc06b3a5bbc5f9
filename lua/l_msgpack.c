/* l_msgpack.c — Lua <-> msgpack conversion for peer commands (see lmsgpack.h). */
#include "lua/lmsgpack.h"

#include "lua/l_network.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define PACK_MAX_DEPTH 16

static int pack_value(lua_State *L, int i, msgpack_packer *pk, int depth, const char *key,
                      char *err, size_t errlen);

/* A sequence is a table whose keys are exactly 1..n. */
static bool is_sequence(lua_State *L, int i, lua_Integer *len)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, i), count = 0;
    lua_pushnil(L);
    while (lua_next(L, i)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
            lua_pop(L, 1);
            return false;
        }
        count++;
    }
    *len = n;
    return n > 0 && count == n;
}

static int pack_array(lua_State *L, int i, lua_Integer n, msgpack_packer *pk, int depth,
                      const char *key, char *err, size_t errlen)
{
    msgpack_pack_array(pk, (size_t)n);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        int rc = pack_value(L, lua_gettop(L), pk, depth + 1, key, err, errlen);
        lua_pop(L, 1);
        if (rc < 0) return -1;
    }
    return 0;
}

static int pack_map(lua_State *L, int i, msgpack_packer *pk, int depth, const char *key, char *err,
                    size_t errlen)
{
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, i)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            snprintf(err, errlen, "param '%s': keys must be strings, got a %s", key,
                     luaL_typename(L, -1));
            lua_pop(L, 1);
            return -1;
        }
        n++;
    }
    msgpack_pack_map(pk, n);
    lua_pushnil(L);
    while (lua_next(L, i)) {
        size_t klen;
        const char *k = lua_tolstring(L, -2, &klen);
        msgpack_pack_str(pk, klen);
        msgpack_pack_str_body(pk, k, klen);
        int rc = pack_value(L, lua_gettop(L), pk, depth + 1, k, err, errlen);
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int pack_table(lua_State *L, int i, msgpack_packer *pk, int depth, const char *key,
                      char *err, size_t errlen)
{
    if (depth > PACK_MAX_DEPTH) {
        snprintf(err, errlen, "param '%s': tables nested deeper than %d", key, PACK_MAX_DEPTH);
        return -1;
    }
    luaL_checkstack(L, 4, "packing parameters");
    lua_Integer n;
    if (is_sequence(L, i, &n)) return pack_array(L, i, n, pk, depth, key, err, errlen);
    return pack_map(L, i, pk, depth, key, err, errlen);
}

static int pack_value(lua_State *L, int i, msgpack_packer *pk, int depth, const char *key,
                      char *err, size_t errlen)
{
    switch (lua_type(L, i)) {
    case LUA_TNIL:
        msgpack_pack_nil(pk);
        return 0;
    case LUA_TBOOLEAN:
        lua_toboolean(L, i) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        return 0;
    case LUA_TNUMBER:
        if (lua_isinteger(L, i))
            msgpack_pack_int64(pk, lua_tointeger(L, i));
        else
            msgpack_pack_double(pk, lua_tonumber(L, i));
        return 0;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, i, &len);
        msgpack_pack_str(pk, len);
        msgpack_pack_str_body(pk, s, len);
        return 0;
    }
    case LUA_TTABLE:
        return pack_table(L, i, pk, depth, key, err, errlen);
    case LUA_TUSERDATA: {
        const char *node = l_node_name(L, i);
        if (node) {
            msgpack_pack_str(pk, strlen(node));
            msgpack_pack_str_body(pk, node, strlen(node));
            return 0;
        }
    } /* fall through */
    default:
        snprintf(err, errlen, "param '%s': a %s cannot be sent to a peer", key,
                 luaL_typename(L, i));
        return -1;
    }
}

int lmsgpack_pack_params(lua_State *L, int i, msgpack_packer *pk, char *err, size_t errlen)
{
    i = lua_absindex(L, i);
    if (lua_isnoneornil(L, i)) return msgpack_pack_map(pk, 0), 0;
    if (!lua_istable(L, i)) {
        snprintf(err, errlen, "expected a table of parameters, got a %s", luaL_typename(L, i));
        return -1;
    }
    luaL_checkstack(L, 8, "packing parameters");
    return pack_map(L, i, pk, 0, "?", err, errlen);
}

void lmsgpack_push(lua_State *L, const msgpack_object *o)
{
    luaL_checkstack(L, 4, "unpacking a peer result");
    switch (o->type) {
    case MSGPACK_OBJECT_BOOLEAN:
        lua_pushboolean(L, o->via.boolean);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        lua_pushinteger(L, (lua_Integer)o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        lua_pushinteger(L, (lua_Integer)o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        lua_pushnumber(L, o->via.f64);
        break;
    case MSGPACK_OBJECT_STR:
        lua_pushlstring(L, o->via.str.ptr, o->via.str.size);
        break;
    case MSGPACK_OBJECT_BIN:
        lua_pushlstring(L, o->via.bin.ptr, o->via.bin.size);
        break;
    case MSGPACK_OBJECT_ARRAY:
        lua_createtable(L, (int)o->via.array.size, 0);
        for (uint32_t k = 0; k < o->via.array.size; k++) {
            lmsgpack_push(L, &o->via.array.ptr[k]);
            lua_rawseti(L, -2, (lua_Integer)k + 1);
        }
        break;
    case MSGPACK_OBJECT_MAP:
        lua_createtable(L, 0, (int)o->via.map.size);
        for (uint32_t k = 0; k < o->via.map.size; k++) {
            lmsgpack_push(L, &o->via.map.ptr[k].key);
            lmsgpack_push(L, &o->via.map.ptr[k].val);
            if (lua_isnil(L, -2))
                lua_pop(L, 2);
            else
                lua_rawset(L, -3);
        }
        break;
    default:
        lua_pushnil(L);
        break;
    }
}
