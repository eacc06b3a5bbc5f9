/* l_runtime.h — registers hn.param, hn.log, hn.progress, hn.record and hn.overload. */
#pragma once

#include <lua.h>

/* Registers the functions into the table at the top of L. */
void l_runtime_register(lua_State *L);
