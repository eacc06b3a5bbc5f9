/* l_fields.h — setting one field of the table on top of the Lua stack, for
 * the bindings that build result tables (t.key = value). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <lua.h>

static inline void set_number(lua_State *L, const char *key, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

static inline void set_integer(lua_State *L, const char *key, uint64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, key);
}

static inline void set_string(lua_State *L, const char *key, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, key);
}

static inline void set_boolean(lua_State *L, const char *key, bool v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, key);
}
