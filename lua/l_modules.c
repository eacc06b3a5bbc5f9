/* l_modules.c — `require` for the scenario's folder, HIERNET_LUA_PATH and
 * the embedded Lua library (see modules.h for the order). */
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

static int readable(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    fclose(f);
    return 1;
}

/* Adds one line to the message at index msg: Lua 5.4's require joins the
 * searchers' messages with "\n\t", and a searcher joins its own lines so. */
static void add_tried(lua_State *L, int msg, const char *line)
{
    const char *before = lua_tostring(L, msg);
    lua_pushfstring(L, "%s%s%s", before, *before ? "\n\t" : "", line);
    lua_replace(L, msg);
}

/* Looks for file (the module name, dots made slashes) as dir/file.lua, then
 * dir/file/init.lua. Found: pushes its path and returns 1. Not found: adds
 * the paths tried to the message at index msg (as Lua's own searchers list
 * them) and returns 0, the stack as it was. */
static int find_in_dir(lua_State *L, const char *dir, const char *file, int msg)
{
    static const char *const forms[] = {"%s/%s.lua", "%s/%s/init.lua"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *path = lua_pushfstring(L, forms[i], dir, file);
        if (readable(path)) return 1;
        add_tried(L, msg, lua_pushfstring(L, "no file '%s'", path));
        lua_pop(L, 2); /* the line, the path */
    }
    return 0;
}

/* Loads the file at the top of the stack: returns the chunk and its path,
 * as a searcher does. A file that does not parse is an error naming it, not
 * a miss: another module of that name would hide the researcher's typo. */
static int load_file(lua_State *L, const char *name)
{
    const char *path = lua_tostring(L, -1);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path,
                          lua_tostring(L, -1));
    lua_insert(L, -2); /* chunk, path */
    return 2;
}

static int load_embedded(lua_State *L, const struct lua_module *m)
{
    char chunkname[256];
    snprintf(chunkname, sizeof chunkname, "@%s", m->path);
    if (luaL_loadbufferx(L, (const char *)m->source, m->len, chunkname, "t") != LUA_OK)
        return luaL_error(L, "error loading module '%s': %s", m->name, lua_tostring(L, -1));
    lua_pushstring(L, m->path);
    return 2;
}

/* The searcher. Upvalue 1: the list of directories to look in first. */
static int hiernet_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *file = luaL_gsub(L, name, ".", "/"); /* index 2 */
    lua_pushliteral(L, "");                          /* index 3: what was tried */
    int dirs = lua_upvalueindex(1);
    lua_Integer n = (lua_Integer)lua_rawlen(L, dirs);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, dirs, i);
        if (find_in_dir(L, lua_tostring(L, -1), file, 3)) return load_file(L, name);
        lua_pop(L, 1);
    }
    const struct lua_module *m = find_module(name);
    if (m) return load_embedded(L, m);
    add_tried(L, 3, lua_pushfstring(L, "no embedded module '%s'", name));
    lua_settop(L, 3);
    return 1;
}

/* The directories of HIERNET_LUA_PATH, in order, appended to the table at
 * the top of the stack (empty entries are skipped, as "" means no path). */
static void add_lua_path(lua_State *L)
{
    const char *env = getenv("HIERNET_LUA_PATH");
    while (env && *env) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        if (len > 0) {
            lua_pushlstring(L, env, len);
            lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        }
        env = colon ? colon + 1 : NULL;
    }
}

void l_modules_install(lua_State *L, const char *scenario_dir)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = n; i >= 2; i--) { /* shift 2..n up by one */
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_newtable(L); /* the directories, the searcher's upvalue */
    if (scenario_dir) {
        lua_pushstring(L, scenario_dir);
        lua_rawseti(L, -2, 1);
    }
    add_lua_path(L);
    lua_pushcclosure(L, hiernet_searcher, 1);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}
