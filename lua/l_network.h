/* l_network.h — networks and node handles as seen from Lua, and the peer
 * commands that are methods of host nodes.
 *
 * hn.network{...} -> network; net:node(name, opts) -> node; net:start();
 * net:stop(); node:<command>{...} for every peer command of docs/lua-api.md.
 * A network owns its topology model and one peer client per host node. */
#pragma once

#include <lua.h>
#include <stdbool.h>

struct hn_runtime;

/* Registers hn.network into the table at the top of L. */
void l_network_register(lua_State *L);
/* Name of the node handle at index i, or NULL when it is not a node. */
const char *l_node_name(lua_State *L, int i);

/* hiernet draw: every network defined, as DOT, to rt->draw. */
void l_network_draw_all(struct hn_runtime *rt);
/* Teardown, outside any task: close every peer channel so the peers exit. */
void l_network_stop_all(struct hn_runtime *rt);
/* True once every peer of every network has exited. */
bool l_network_all_exited(struct hn_runtime *rt);
/* Then: every network's programs end and its peers, topology, cgroups and
 * registry entries go without waiting on the loop (netlife_release); true
 * once all have gone. */
void l_network_release_begin(struct hn_runtime *rt);
bool l_network_all_released(struct hn_runtime *rt);
/* Last: SIGKILLs the peers still alive, reaps them and frees every network
 * (finishing a release the loop did not). */
void l_network_release_all(struct hn_runtime *rt);
