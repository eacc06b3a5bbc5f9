/* modules.h — the Lua library compiled into the binary, and the searcher
 * that lets `require` find modules. A name is looked up, in this order:
 *   1. the scenario's own folder (name.lua, name/init.lua; dots are folders),
 *   2. each directory of HIERNET_LUA_PATH (colon-separated), the same way,
 *   3. the compiled-in library (lua/hiernet/...),
 * then Lua's own package.path and package.cpath. A file found in 1 or 2 may
 * be a new module or replace a built-in one (HIERNET_LUA_PATH=lua loads the
 * library from the source tree, for development). */
#pragma once

#include <stddef.h>

struct lua_module {
    const char *name; /* "hiernet", "hiernet.topo", ... */
    const char *path; /* "lua/hiernet/init.lua": the chunk name in messages */
    const unsigned char *source;
    size_t len;
};

extern const struct lua_module lua_modules[]; /* ends with a NULL name */

struct lua_State;
/* Puts the hiernet searcher right after package.preload's. scenario_dir:
 * the folder of the scenario file ("." for a bare file name), or NULL (a
 * tool such as `hiernet plot` has no scenario). HIERNET_LUA_PATH is read
 * here, once per run. */
void l_modules_install(struct lua_State *L, const char *scenario_dir);
