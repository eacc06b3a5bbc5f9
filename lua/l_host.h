/* l_host.h — what the Lua library's tools (plots, reports, the Mininet
 * import) use of the controller's own host: programs run there (l_host.c),
 * files and scratch directories (l_files.c), JSON and base64 (l_codec.c),
 * and a topology description drawn as DOT (l_dot.c). Each unit registers
 * internal functions ("_name") into the hiernet.core table; they are not
 * part of the public hn API. */
#pragma once

#include "lua/runtime.h"

#include <lua.h>

void l_host_register(lua_State *L);
void l_files_register(lua_State *L);
void l_codec_register(lua_State *L);
void l_dot_register(lua_State *L);

/* The path a scenario's data file is read from (a trace, a churn or a
 * mobility schedule): a relative path names a file of the scenario's folder
 * when there is one, as `require` finds a module there first, else it is
 * taken as it is (from the working directory). Pushes the path and returns
 * it (the Lua stack keeps it). */
const char *l_files_find(lua_State *L, const char *path);

/* Run teardown: SIGKILLs and reaps every host program still running. */
void l_host_release(struct hn_runtime *rt);
/* Run teardown: removes the scratch directories the tools left (an
 * interrupted plot), with the files in them. */
void l_files_release(struct hn_runtime *rt);
