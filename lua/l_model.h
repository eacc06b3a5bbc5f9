/* l_model.h — hn.model_check, hn.zoo, hn.profiles, hn.profile,
 * hn.profile_grad_seconds (see l_model.c). */
#pragma once

#include <lua.h>

/* Adds the functions to the table on top of the stack. */
void l_model_register(lua_State *L);
