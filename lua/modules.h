/* modules.h — the Lua library compiled into the binary, and the searcher
 * that lets `require` find it. HIERNET_LUA_PATH (a directory holding
 * hiernet/...) overrides the embedded copies, for development. */
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
/* Puts the embedded searcher right after package.preload's. */
void l_modules_install(struct lua_State *L);
