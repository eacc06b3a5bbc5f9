/* l_codec.c — byte codecs for the Lua library's tools:
 * core._json_decode(text [, null]) turns JSON into Lua values through the
 * strict reader of common/json_read.c (objects become tables keyed by
 * name, arrays 1-based tables, integers integers; null becomes the second
 * argument, or nil), and core._base64(bytes) encodes for data: URIs. */
#include "lua/l_host.h"

#include "common/json_read.h"

#include <lauxlib.h>
#include <stdlib.h>

/* The null stand-in is at stack index `null` (nil when absent). */
static void push_json(lua_State *L, const struct json_value *v, int null)
{
    luaL_checkstack(L, 4, "JSON nesting");
    switch (v->type) {
    case JSON_NULL:
        lua_pushvalue(L, null);
        break;
    case JSON_FALSE:
        lua_pushboolean(L, 0);
        break;
    case JSON_TRUE:
        lua_pushboolean(L, 1);
        break;
    case JSON_NUMBER:
        if (v->is_int)
            lua_pushinteger(L, (lua_Integer)v->integer);
        else
            lua_pushnumber(L, v->number);
        break;
    case JSON_STRING:
        lua_pushlstring(L, v->string, v->len);
        break;
    case JSON_ARRAY:
        lua_createtable(L, (int)v->n, 0);
        for (size_t i = 0; i < v->n; i++) {
            push_json(L, &v->items[i], null);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    case JSON_OBJECT:
        lua_createtable(L, 0, (int)v->n);
        for (size_t i = 0; i < v->n; i++) {
            lua_pushlstring(L, v->members[i].key, v->members[i].key_len);
            push_json(L, &v->members[i].value, null);
            lua_rawset(L, -3);
        }
        break;
    }
}

/* Frees the tree should pushing it raise (out of memory). */
static int tree_gc(lua_State *L)
{
    struct json_value **root = lua_touserdata(L, 1);
    json_free(*root);
    *root = NULL;
    return 0;
}

/* core._json_decode(text [, null]) -> value; or nil, "line L, column C: ..." */
static int l_json_decode(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    lua_settop(L, 2);
    struct json_value **root = lua_newuserdatauv(L, sizeof *root, 0);
    *root = NULL;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, tree_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    char err[256];
    *root = json_read(text, len, err, sizeof err);
    if (!*root) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    push_json(L, *root, 2);
    json_free(*root);
    *root = NULL;
    return 1;
}

/* core._base64(bytes) -> RFC 4648 base64 with padding, no line breaks */
static int l_base64(lua_State *L)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n;
    const unsigned char *in = (const unsigned char *)luaL_checklstring(L, 1, &n);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, (n + 2) / 3 * 4);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    luaL_pushresultsize(&b, o);
    return 1;
}

void l_codec_register(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"_json_decode", l_json_decode}, {"_base64", l_base64}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
