/* l_faults.c — faults as experiment features, on a network's handle:
 * net:partition({a, ...}, {b, ...}) and net:heal([a, b]) (the topology engine's
 * blackhole routes, emu/tc_backend.h), net:reachable(a, b), and the events
 * algorithms react to: net:on("partition" | "heal" | "kill" | "restart", fn).
 * Each listener runs as a task of its own when the event happens: fn(net,
 * groupA, groupB) for a partition, fn(net) for a heal, fn(net, node) for a
 * node killed or restarted (node:kill(), node:restart(), l_node.c),
 * fn(net, node, why) for a node lost with its machine (lnet_fire_lost); and
 * net:churn{...}, whose schedule is lua/hiernet/churn.lua's.
 *
 * Owns the network's listener table (a registry reference in l_network).
 * The partitions in place (which node is in which group; they add up until
 * one heal removes them all) are the engine's record; the routes change
 * off the loop, and the calling task waits for them (controller/netlife.h,
 * controller/netrun.h). */
#include "lua/l_net.h"

#include "controller/netlife.h"
#include "lua/sched.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_events[] = {"partition", "heal", "kill", "restart", NULL};

static struct l_network *check_net(lua_State *L, int i)
{
    struct l_network **p = luaL_checkudata(L, i, NETWORK_MT);
    if (!*p) luaL_error(L, "network handle is closed");
    return *p;
}

/* ---- events ---- */

/* net:on(event, fn): fn runs as a new task each time the event happens. */
static int l_net_on(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    int event = luaL_checkoption(L, 2, NULL, fault_events);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    if (net->listeners_ref == LUA_NOREF) {
        lua_newtable(L);
        net->listeners_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->listeners_ref);
    if (lua_getfield(L, -1, fault_events[event]) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, fault_events[event]);
    }
    lua_pushvalue(L, 3);
    lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    return 0;
}

/* Spawns every listener of event with the nargs values on top of the stack
 * (popped) after the network handle at net_index. */
void lnet_fire(lua_State *L, struct l_network *net, int net_index, const char *event, int nargs)
{
    net_index = lua_absindex(L, net_index);
    int args = lua_gettop(L) - nargs + 1;
    if (net->listeners_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, net->listeners_ref);
        if (lua_getfield(L, -1, event) == LUA_TTABLE) {
            lua_Integer n = (lua_Integer)luaL_len(L, -1);
            for (lua_Integer i = 1; i <= n; i++) {
                luaL_checkstack(L, nargs + 3, "listeners");
                lua_rawgeti(L, -1, i);
                lua_pushvalue(L, net_index);
                for (int a = 0; a < nargs; a++)
                    lua_pushvalue(L, args + a);
                sched_spawn(L, nargs + 1, false);
                lua_pop(L, 1); /* the task handle */
            }
        }
        lua_pop(L, 2);
    }
    lua_pop(L, nargs);
}

/* Run under lua_pcall: fires "kill" with (network, node, why). */
static int fire_lost(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    lnet_fire(L, net, 1, "kill", 2);
    return 0;
}

void lnet_fire_lost(struct l_network *net, int node, const char *why)
{
    lua_State *L = net->rt->L;
    int top = lua_gettop(L);
    /* From a loop callback, outside any task: an error raised here (out of
     * memory) must not reach Lua's panic, so it runs protected. */
    if (!lua_checkstack(L, 4) || net->self_ref == LUA_NOREF) return;
    lua_pushcfunction(L, fire_lost);
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->self_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
    lua_rawgeti(L, -1, node + 1);
    lua_replace(L, -2);
    lua_pushstring(L, why);
    if (lua_pcall(L, 3, 0, 0) != LUA_OK)
        hn_logf(net->rt, "node '%s': its loss was not reported: %s", net->topo->nodes[node].name,
                lua_tostring(L, -1));
    lua_settop(L, top);
}

/* ---- partition ---- */

/* Marks the hosts of the list at index i as group g in side[] (names or
 * node handles of this network), raising an error naming what is wrong. */
static void read_group(lua_State *L, struct l_network *net, int i, unsigned char *side,
                       unsigned char g)
{
    luaL_checktype(L, i, LUA_TTABLE);
    lua_Integer n = (lua_Integer)luaL_len(L, i);
    if (n == 0) luaL_error(L, "network '%s': partition: group %d is empty", net->topo->name, g);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        struct l_node *node = luaL_testudata(L, -1, NODE_MT);
        int index = node && node->net == net ? node->index
                    : lua_type(L, -1) == LUA_TSTRING
                        ? topo_node_find(net->topo, lua_tostring(L, -1))
                        : -1;
        if (index < 0 || net->topo->nodes[index].kind != TOPO_NODE_HOST)
            luaL_error(L,
                       "network '%s': partition: group %d, entry %d (%s) is not a host of this "
                       "network",
                       net->topo->name, g, (int)k, luaL_tolstring(L, -1, NULL));
        if (side[index])
            luaL_error(L, "network '%s': partition: node '%s' is in both groups (or twice)",
                       net->topo->name, net->topo->nodes[index].name);
        side[index] = g;
        lua_pop(L, 1);
    }
}

static void check_started(lua_State *L, struct l_network *net, const char *what)
{
    if (!netlife_running(net->life))
        luaL_error(L, "network '%s': %s: network is %s", net->topo->name, what,
                   lnet_state_word(net));
}

/* A partition or heal whose routes change off the loop (netrun.h): the
 * task waits for them, then the log line and the events follow. */
struct cut_wait {
    struct sched *sched;
    task_token tok;
};

static int push_cut_result(lua_State *co, void *ud)
{
    const char *error = ud;
    if (!error) return lua_pushnil(co), 1;
    lua_pushstring(co, error);
    return 1;
}

static void on_cut_done(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct cut_wait *w = ctx;
    sched_wake(w->sched, w->tok, push_cut_result, (void *)error);
    free(w);
}

/* Asks the engine for the change and suspends the task until it is in place;
 * continues with k. */
static int cut_request(lua_State *L, struct l_network *net, const unsigned char *side,
                       lua_KFunction k, lua_KContext ctx)
{
    const char *what = "partition";
    struct cut_wait *w = malloc(sizeof *w);
    if (!w) return luaL_error(L, "network '%s': %s: out of memory", net->topo->name, what);
    w->sched = net->rt->sched;
    char err[512];
    int rc = netlife_partition(net->life, side, on_cut_done, w, err, sizeof err);
    if (rc < 0) {
        free(w);
        return luaL_error(L, "network '%s': %s: %s", net->topo->name, what, err);
    }
    if (rc == 0) { /* in place already (no part had anything to answer) */
        free(w);
        lua_pushnil(L);
        return k(L, LUA_OK, ctx);
    }
    /* The change's end comes from the loop, after this task yields. */
    w->tok = sched_suspend(L);
    return lua_yieldk(L, 0, ctx, k);
}

static int partition_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    struct l_network *net = check_net(L, 1);
    if (!lua_isnil(L, -1))
        return luaL_error(L, "network '%s': partition: %s", net->topo->name, lua_tostring(L, -1));
    hn_logf(net->rt, "network '%s': partitioned", net->topo->name);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lnet_fire(L, net, 1, "partition", 2);
    return 0;
}

/* net:partition({nodes}, {nodes}): what the hosts of one group send to the
 * other's is dropped (both ways) until net:heal(); other traffic flows.
 * Several partitions add up. Returns once the routes are in place. */
static int l_net_partition(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    check_started(L, net, "partition");
    size_t n = net->topo->n_nodes;
    lua_settop(L, 3);
    unsigned char *side = lua_newuserdatauv(L, n ? n : 1, 0); /* freed by the GC on errors */
    memset(side, 0, n ? n : 1);
    read_group(L, net, 2, side, 1);
    read_group(L, net, 3, side, 2);
    return cut_request(L, net, side, partition_k, 0);
}

/* ctx: how many partitions went, times two, plus one for a heal of one cut. */
static int heal_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    struct l_network *net = check_net(L, 1);
    if (!lua_isnil(L, -1))
        return luaL_error(L, "network '%s': heal: %s", net->topo->name, lua_tostring(L, -1));
    hn_logf(net->rt, "network '%s': healed%s", net->topo->name, ctx & 1 ? " (one cut)" : "");
    lnet_fire(L, net, 1, "heal", 0);
    lua_pushinteger(L, (lua_Integer)(ctx >> 1));
    return 1;
}

/* net:heal(): every partition goes; routes are as they were.
 * net:heal({a, ...}, {b, ...}): only the partitions that cut those two
 * groups go (a churn heals its own node this way, the others' cuts stay). */
static int l_net_heal(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    check_started(L, net, "heal");
    unsigned char *side = NULL;
    if (!lua_isnoneornil(L, 2)) {
        size_t n = net->topo->n_nodes;
        side = lua_newuserdatauv(L, n ? n : 1, 0); /* freed by the GC on errors */
        memset(side, 0, n ? n : 1);
        read_group(L, net, 2, side, 1);
        read_group(L, net, 3, side, 2);
    }
    char err[512];
    size_t healed = 0;
    struct cut_wait *w = malloc(sizeof *w);
    if (!w) return luaL_error(L, "network '%s': heal: out of memory", net->topo->name);
    w->sched = net->rt->sched;
    int rc = netlife_heal(net->life, side, &healed, on_cut_done, w, err, sizeof err);
    if (rc <= 0) { /* refused, or nothing to heal: nothing to wait for */
        free(w);
        if (rc < 0) return luaL_error(L, "network '%s': heal: %s", net->topo->name, err);
        lua_pushinteger(L, (lua_Integer)healed); /* 0, or those healed at once */
        return 1;
    }
    /* The routes change off the loop; the task waits (heal_k). */
    w->tok = sched_suspend(L);
    return lua_yieldk(L, 0, (lua_KContext)(healed << 1 | (side != NULL)), heal_k);
}

/* net:churn{...}, net:mobility{...} and node:move{...}: the schedules
 * and the sequence of a move (cut, gap, move, up) are the Lua library's
 * (hiernet.churn); the faults and the link move are the engine's. The
 * library function may wait (a move sleeps through its gap): the call
 * continues in library_done once it is back. */
static int library_done(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    return 1;
}

int lnet_call_library(lua_State *L, const char *fn)
{
    lua_settop(L, 2);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "hiernet.churn");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, fn);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_callk(L, 2, 1, 0, library_done);
    return 1;
}

static int l_net_churn(lua_State *L)
{
    check_net(L, 1);
    return lnet_call_library(L, "churn");
}

static int l_net_mobility(lua_State *L)
{
    check_net(L, 1);
    return lnet_call_library(L, "mobility");
}

/* Raises a bad-input error (exit 2) about node's move. */
static int move_refused(lua_State *L, struct l_network *net, const char *node, const char *fmt,
                        const char *value)
{
    net->rt->bad_input = true;
    char why[256];
    snprintf(why, sizeof why, fmt, value);
    return luaL_error(L, "node '%s': move: %s", node, why);
}

/* The index of node's only link; refuses a node with several or none, or
 * one whose link ends at a switch (a segment's addresses are shared). */
static int uplink_of(lua_State *L, struct l_network *net, int node)
{
    const struct topo_network *t = net->topo;
    int found = -1, count = 0;
    for (size_t l = 0; l < t->n_links; l++)
        if (t->links[l].a == node || t->links[l].b == node) found = (int)l, count++;
    const char *name = t->nodes[node].name;
    if (count != 1)
        move_refused(L, net, name, "it has %s links; a terminal that moves has one, to its edge",
                     count ? "several" : "no");
    int edge = t->links[found].a == node ? t->links[found].b : t->links[found].a;
    if (t->nodes[edge].kind != TOPO_NODE_HOST)
        move_refused(L, net, name, "its link goes to switch '%s'; it moves between edge hosts only",
                     t->nodes[edge].name);
    return found;
}

/* `to` of net:_move_link (argument 3): a node of net or its name; -1. */
static int move_target(lua_State *L, struct l_network *net)
{
    struct l_node *tn = luaL_testudata(L, 3, NODE_MT);
    return tn && tn->net == net            ? tn->index
           : lua_type(L, 3) == LUA_TSTRING ? topo_node_find(net->topo, lua_tostring(L, 3))
                                           : -1;
}

/* ctx: the link; the node and `to` are still arguments 2 and 3 (checked
 * before the move was asked). Pushes the link. */
static int move_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    struct l_network *net = check_net(L, 1);
    const struct topo_network *t = net->topo;
    int node = lnet_check_node(L, 2)->index, l = (int)ctx, to = move_target(L, net);
    if (!lua_isnil(L, -1))
        return luaL_error(L, "node '%s': move to '%s': %s", t->nodes[node].name, t->nodes[to].name,
                          lua_tostring(L, -1));
    hn_logf(net->rt, "node '%s': moved to '%s'", t->nodes[node].name, t->nodes[to].name);
    lnet_push_link(L, 1, net, l);
    return 1;
}

/* The engine's move; over machines the task waits for every machine's
 * answer (move_k), on one the move is done on return. */
static int move_request(lua_State *L, struct l_network *net, int node, int l, int to)
{
    const struct topo_network *t = net->topo;
    lua_KContext ctx = (lua_KContext)l;
    struct cut_wait *w = malloc(sizeof *w);
    char err[1024];
    if (!w) return luaL_error(L, "node '%s': move: out of memory", t->nodes[node].name);
    w->sched = net->rt->sched;
    int rc = netlife_link_move(net->life, l, node, to, on_cut_done, w, err, sizeof err);
    if (rc <= 0) {
        free(w);
        if (rc < 0)
            return luaL_error(L, "node '%s': move to '%s': %s", t->nodes[node].name,
                              t->nodes[to].name, err);
        lua_pushnil(L);
        return move_k(L, LUA_OK, ctx);
    }
    w->tok = sched_suspend(L);
    return lua_yieldk(L, 0, ctx, move_k);
}

/* net:_move_link(node, to, now): checks that node can move to `to` (no
 * `to`: that it can move at all) and, with now, moves its link's far end
 * there (netlife_link_move); returns the link's handle. Library use only
 * (hiernet.churn's node:move). */
static int l_net_move_link(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    check_started(L, net, "move");
    struct l_node *n = lnet_check_node(L, 2);
    const struct topo_network *t = net->topo;
    const char *name = t->nodes[n->index].name;
    int l = uplink_of(L, net, n->index);
    if (lua_isnoneornil(L, 3) && !lua_toboolean(L, 4)) {
        lnet_push_link(L, 1, net, l); /* the node's link only, checked */
        return 1;
    }
    int to = move_target(L, net);
    if (to < 0)
        move_refused(L, net, name, "to %s is not a node of this network",
                     luaL_tolstring(L, 3, NULL));
    if (t->nodes[to].kind != TOPO_NODE_HOST || to == n->index)
        move_refused(L, net, name, "to '%s' is not an edge host it could attach to",
                     t->nodes[to].name);
    if (t->links[l].a == to || t->links[l].b == to)
        move_refused(L, net, name, "to '%s' is its edge already", t->nodes[to].name);
    char err[1024];
    if (netlife_link_move_check(net->life, l, n->index, to, err, sizeof err) < 0)
        return luaL_error(L, "node '%s': move to '%s': %s", name, t->nodes[to].name, err);
    if (lua_toboolean(L, 4)) return move_request(L, net, n->index, l, to);
    lnet_push_link(L, 1, net, l);
    return 1;
}

static int node_index_arg(lua_State *L, struct l_network *net, int i)
{
    struct l_node *node = luaL_testudata(L, i, NODE_MT);
    if (node && node->net == net) return node->index;
    int index = lua_type(L, i) == LUA_TSTRING ? topo_node_find(net->topo, lua_tostring(L, i)) : -1;
    if (index < 0)
        luaL_error(L, "network '%s': reachable: %s is not a node of this network", net->topo->name,
                   luaL_tolstring(L, i, NULL));
    return index;
}

/* net:reachable(a, b): both peers run and no partition separates them. */
static int l_net_reachable(lua_State *L)
{
    struct l_network *net = check_net(L, 1);
    int a = node_index_arg(L, net, 2), b = node_index_arg(L, net, 3);
    lua_pushboolean(L, netlife_reachable(net->life, a, b));
    return 1;
}

void lnet_faults_methods(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"on", l_net_on},
        {"partition", l_net_partition},
        {"heal", l_net_heal},
        {"reachable", l_net_reachable},
        {"churn", l_net_churn},
        {"mobility", l_net_mobility},
        {"_move_link", l_net_move_link},
        {NULL, NULL},
    };
    luaL_setfuncs(L, methods, 0);
}
