/* l_emulation.h — hn.emulation (see l_emulation.c). */
#pragma once

#include <lua.h>

/* Adds the functions to the table on top of the stack. */
void l_emulation_register(lua_State *L);
