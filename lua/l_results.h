/* l_results.h — hn.write_json, hn.results_dir and hn.null (see l_results.c). */
#pragma once

#include <lua.h>

/* Adds the functions to the table on top of the stack. */
void l_results_register(lua_State *L);
