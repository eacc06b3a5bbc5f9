/* l_modules.c — `require` support for the embedded Lua library (see modules.h). */
#include "lua/modules.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct lua_module *find_module(const char *name)
{
    for (const struct lua_module *m = lua_modules; m->name; m++)
        if (strcmp(m->name, name) == 0) return m;
    return NULL;
}

/* HIERNET_LUA_PATH/<path without "lua/">, when that file exists. */
static int load_override(lua_State *L, const struct lua_module *m)
{
    const char *dir = getenv("HIERNET_LUA_PATH");
    if (!dir || !*dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, m->path + strlen("lua/"));
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    fclose(f);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        luaL_error(L, "error loading module '%s': %s", m->name, lua_tostring(L, -1));
    lua_pushstring(L, path);
    return 2;
}

static int embedded_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const struct lua_module *m = find_module(name);
    if (!m) {
        lua_pushfstring(L, "no embedded module '%s'", name);
        return 1;
    }
    int n = load_override(L, m);
    if (n) return n;
    char chunkname[256];
    snprintf(chunkname, sizeof chunkname, "@%s", m->path);
    if (luaL_loadbufferx(L, (const char *)m->source, m->len, chunkname, "t") != LUA_OK)
        return luaL_error(L, "error loading module '%s': %s", name, lua_tostring(L, -1));
    lua_pushstring(L, m->path);
    return 2;
}

void l_modules_install(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = n; i >= 2; i--) { /* shift 2..n up by one */
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushcfunction(L, embedded_searcher);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}
