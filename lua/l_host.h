/* l_host.h — hn.emulation (see l_host.c). */
#pragma once

#include <lua.h>

/* Adds the functions to the table on top of the stack. */
void l_host_register(lua_State *L);
