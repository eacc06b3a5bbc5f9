/* l_core.h — opener of the C module "hiernet.core". */
#pragma once

#include <lua.h>

int luaopen_hiernet_core(lua_State *L);
