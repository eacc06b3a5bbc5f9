/* lmsgpack.h — conversion between Lua values and msgpack for peer commands.
 *
 * Tables that are sequences (1..n, n > 0) become arrays, other tables maps
 * with string keys; node handles become their node name, so `to = node`
 * works; functions, threads and other userdata are rejected with an error
 * naming the key. Owns nothing. */
#pragma once

#include <lua.h>
#include <msgpack.h>

/* Packs the table at index i as a msgpack map (nil or none: empty map).
 * Returns 0, or -1 with err naming the offending key. */
int lmsgpack_pack_params(lua_State *L, int i, msgpack_packer *pk, char *err, size_t errlen);
/* Pushes o as a Lua value (maps become tables with their keys as given). */
void lmsgpack_push(lua_State *L, const msgpack_object *o);
