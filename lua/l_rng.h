/* l_rng.h — hn.rng(seed[, stream]): the project's seeded random number
 * generator (kernels/rng.h) for scenarios and the Lua library (see l_rng.c). */
#pragma once

#include <lua.h>

/* Adds hn.rng to the table on top of the stack. */
void l_rng_register(lua_State *L);
