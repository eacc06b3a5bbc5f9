/* l_node.c — node handles and the peer commands that are their methods:
 * n:tensor{...}, n:axpy{...}, ... each sends one MessagePack-RPC request to
 * the node's peer and suspends the calling task until the reply; plus
 * n:kill() and n:restart(), and the fields n.name, n.addr, n.tier, ... */
#include "lua/l_net.h"

#include "controller/netlife.h"
#include "controller/netrun.h"
#include "controller/overload.h"
#include "controller/peer_client.h"
#include "lua/l_network.h"
#include "lua/lmsgpack.h"
#include "proto/command_names.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

struct l_node *lnet_check_node(lua_State *L, int i)
{
    return luaL_checkudata(L, i, NODE_MT);
}

const char *l_node_name(lua_State *L, int i)
{
    struct l_node *n = luaL_testudata(L, i, NODE_MT);
    return n ? n->net->topo->nodes[n->index].name : NULL;
}

/* ---- peer commands ---- */

/* The peer, linkd and the peer client say the cause only; the node (or
 * link) and the method are named here, once. */
int lnet_push_reply(lua_State *co, void *ud)
{
    const struct reply *r = ud;
    if (r->error) {
        lua_pushboolean(co, 0);
        const struct call *c = r->call;
        if (c->kind[0] == 'n')
            lua_pushfstring(co, "node '%s': %s: %s", c->node, c->method, r->error);
        else
            lua_pushfstring(co, "link %s: %s: %s", c->node, c->method, r->error);
    } else {
        lua_pushboolean(co, 1);
        lmsgpack_push(co, r->result);
    }
    return 2;
}

static void on_call_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct call *c = ctx;
    if (!error && c->overload && strcmp(c->method, "batch") == 0)
        overload_note_batch(c->overload, c->overload_id, result);
    else if (!error && c->overload) /* send's ms is its transfer, not compute time */
        overload_note_reply(c->overload, c->overload_id, result, strcmp(c->method, "send") != 0);
    struct reply r = {error, result, c};
    sched_wake(c->sched, c->tok, lnet_push_reply, &r);
    free(c);
}

static int node_call_k(lua_State *L, int status, lua_KContext ctx)
{
    if (!lua_toboolean(L, -2)) return luaL_error(L, "%s", lua_tostring(L, -1));
    return 1;
}

static struct peer_client *node_client(lua_State *L, struct l_node *n, const char *method)
{
    struct l_network *net = n->net;
    const struct topo_node *tn = &net->topo->nodes[n->index];
    const char *word = lnet_state_word(net);
    bool starting = strcmp(word, "starting") == 0;
    if (!starting && !netlife_running(net->life))
        luaL_error(L, "node '%s': %s: network '%s' is %s", tn->name, method, net->topo->name, word);
    if (tn->kind != TOPO_NODE_HOST)
        luaL_error(L, "node '%s': %s: a switch runs no peer", tn->name, method);
    if (!netlife_peers_up(net->life))
        luaL_error(L, "node '%s': %s: network '%s' is still being built", tn->name, method,
                   net->topo->name);
    return netlife_peer(net->life, n->index);
}

/* ---- destinations named in params ---- */

/* The host names of net, for an error message: "a, b, c" (at most 12). */
static void host_names(const struct topo_network *net, char *buf, size_t cap)
{
    size_t len = 0, shown = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < net->n_nodes && len < cap; i++) {
        if (net->nodes[i].kind != TOPO_NODE_HOST) continue;
        if (shown++ == 12) {
            snprintf(buf + len, cap - len, ", ...");
            return;
        }
        int w = snprintf(buf + len, cap - len, "%s%s", shown > 1 ? ", " : "", net->nodes[i].name);
        len += w > 0 ? (size_t)w : 0;
    }
}

/* The value at idx names a host of node n's network (a name or a node
 * handle), else raises an error naming the value and listing the hosts: the
 * peer would only find "no address for node", in its own words. With tell,
 * a send's destination: the sender learns its address first (peers learn
 * addresses lazily, netrun.h). */
static void check_destination(lua_State *L, struct l_node *n, const char *method, const char *key,
                              int idx, bool tell)
{
    const struct topo_network *net = n->net->topo;
    const char *self = net->nodes[n->index].name;
    struct l_node *other = luaL_testudata(L, idx, NODE_MT);
    int target = -1;
    if (other) {
        if (other->net != n->net)
            luaL_error(L, "node '%s': %s: param '%s': node '%s' belongs to network '%s', not '%s'",
                       self, method, key, other->net->topo->nodes[other->index].name,
                       other->net->topo->name, net->name);
        target = other->index;
    } else if (lua_type(L, idx) == LUA_TSTRING) {
        const char *name = lua_tostring(L, idx);
        target = topo_node_find(net, name);
        if (target < 0 || net->nodes[target].kind != TOPO_NODE_HOST) {
            char hosts[512];
            host_names(net, hosts, sizeof hosts);
            luaL_error(
                L, "node '%s': %s: param '%s': '%s' is not a %s of network '%s' (its hosts: %s)",
                self, method, key, name, target >= 0 ? "host (a switch runs no peer)" : "node",
                net->name, hosts);
        }
    } /* anything else: the peer says what it expects */
    char err[256];
    if (tell && target >= 0 &&
        netlife_tell_address(n->net->life, n->index, target, err, sizeof err) < 0)
        luaL_error(L, "node '%s': %s: %s", self, method, err);
}

/* Checks params[key] (a destination or a list of them). */
static void check_destinations(lua_State *L, struct l_node *n, const char *method, int params,
                               const char *key)
{
    bool tell = strcmp(key, "to") == 0;
    lua_getfield(L, params, key);
    int v = lua_gettop(L);
    if (lua_istable(L, v)) {
        lua_Integer len = luaL_len(L, v);
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, v, i);
            check_destination(L, n, method, key, lua_gettop(L), tell);
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, v)) {
        check_destination(L, n, method, key, v, tell);
    }
    lua_pop(L, 1);
}

/* The node names in params of send (to), wait (from), and of the sends and
 * waits inside a batch ({ {"send", {...}}, ... }). label: the method as the
 * error says it ("send", or "batch: command 2 (send)"). */
static void check_params_nodes(lua_State *L, struct l_node *n, const char *method,
                               const char *label, int params)
{
    if (!lua_istable(L, params)) return;
    if (strcmp(method, "send") == 0) check_destinations(L, n, label, params, "to");
    if (strcmp(method, "wait") == 0) check_destinations(L, n, label, params, "from");
    if (strcmp(method, "batch") != 0) return;
    lua_getfield(L, params, "commands"); /* the list travels as params.commands */
    params = lua_gettop(L);
    if (!lua_istable(L, params)) {
        lua_pop(L, 1);
        return;
    }
    lua_Integer len = luaL_len(L, params);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, params, i);
        int entry = lua_gettop(L);
        if (lua_istable(L, entry)) {
            lua_rawgeti(L, entry, 1);
            lua_rawgeti(L, entry, 2);
            const char *sub = lua_tostring(L, -2);
            char sub_label[96];
            snprintf(sub_label, sizeof sub_label, "batch: command %lld (%s)", (long long)i,
                     sub ? sub : "?");
            if (sub && strcmp(sub, "batch") != 0)
                check_params_nodes(L, n, sub, sub_label, lua_gettop(L));
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* Sends method with params (a table or nil) and yields until the reply. */
static int node_request(lua_State *L, struct l_node *n, const char *method, int params)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *node = n->net->topo->nodes[n->index].name;
    struct peer_client *pc = node_client(L, n, method);
    check_params_nodes(L, n, method, method, params);
    char err[512];
    msgpack_sbuffer_clear(&rt->scratch);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &rt->scratch, msgpack_sbuffer_write);
    if (lmsgpack_pack_params(L, params, &pk, err, sizeof err) < 0)
        return luaL_error(L, "node '%s': %s: %s", node, method, err);
    struct call *c = malloc(sizeof *c);
    if (!c) return luaL_error(L, "node '%s': %s: out of memory", node, method);
    c->sched = rt->sched;
    c->kind = "node";
    snprintf(c->node, sizeof c->node, "%s", node);
    snprintf(c->method, sizeof c->method, "%s", method);
    c->overload_id = n->net->life ? netlife_overload_id(n->net->life, n->index) : -1;
    c->overload = c->overload_id >= 0 ? rt->overload : NULL;
    if (peer_client_call(pc, method, rt->scratch.data, rt->scratch.size, on_call_reply, c, err,
                         sizeof err) < 0) {
        free(c);
        return luaL_error(L, "node '%s': %s: %s", node, method, err);
    }
    /* The reply cannot arrive before we yield: callbacks run from the loop. */
    c->tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, node_call_k);
}

/* ---- node failures ---- */

/* The kill done: logged, and the "kill" listeners run (node at 1). */
static int node_killed(lua_State *L, struct l_node *n)
{
    hn_logf(n->net->rt, "node '%s': killed", n->net->topo->nodes[n->index].name);
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, 1); /* the network */
    lua_pushvalue(L, 1);
    lnet_fire(L, n->net, 2, "kill", 1);
    return 0;
}

static int kill_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    if (!lua_toboolean(L, -2)) return luaL_error(L, "%s", lua_tostring(L, -1));
    return node_killed(L, lnet_check_node(L, 1));
}

/* node:kill(): the node crashes: its peer is SIGKILLed and its programs
 * too; calls to it fail until node:restart(). A node of another machine:
 * the task waits for its agent's answer, and its refusal is an error
 * naming the node and the machine (as link:set's is). */
static int l_node_kill(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    node_client(L, n, "kill");
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return luaL_error(L, "node '%s': kill: out of memory", n->net->topo->nodes[n->index].name);
    *c = (struct call){n->net->rt->sched, {0, 0}, "node", "", "kill", NULL, -1};
    snprintf(c->node, sizeof c->node, "%s", n->net->topo->nodes[n->index].name);
    lua_settop(L, 1);
    if (netlife_node_kill(n->net->life, n->index, on_call_reply, c) == 0) {
        free(c);
        return node_killed(L, n);
    }
    c->tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, kill_k);
}

/* node:restart(): a fresh peer (no tensors) in the same node; returns once it answers. */
static int l_node_restart(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    char err[512];
    node_client(L, n, "restart");
    if (netlife_node_restart(n->net->life, n->index, err, sizeof err) < 0)
        return luaL_error(L, "node '%s': restart: %s", n->net->topo->nodes[n->index].name, err);
    hn_logf(n->net->rt, "node '%s': restarted", n->net->topo->nodes[n->index].name);
    /* Listeners start when this task waits for the ping below: their
     * commands to the node queue behind it. */
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 1);
    lnet_fire(L, n->net, 2, "restart", 1);
    lua_settop(L, 1);
    return node_request(L, n, "ping", 2);
}

/* node:<command>(params): the command name is the closure's upvalue. */
static int l_node_command(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
        return luaL_error(L, "node '%s': %s: expected a table of parameters, got %s",
                          n->net->topo->nodes[n->index].name, lua_tostring(L, lua_upvalueindex(1)),
                          luaL_typename(L, 2));
    return node_request(L, n, lua_tostring(L, lua_upvalueindex(1)), 2);
}

/* node:batch{{"grad", {...}}, {"send", {...}}, ...}: the list of commands
 * travels as the param `commands` (a request's params are a map). A table
 * that already has `commands` is sent as it is. */
static int l_node_batch(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    if (!lua_istable(L, 2))
        return luaL_error(L, "node '%s': batch: expected a list of {command, params}, got %s",
                          n->net->topo->nodes[n->index].name, luaL_typename(L, 2));
    lua_settop(L, 2);
    if (lua_getfield(L, 2, "commands") != LUA_TNIL) return node_request(L, n, "batch", 2);
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "commands");
    return node_request(L, n, "batch", 3);
}

/* The peer commands a node method sends as they are (proto/command_names.h:
 * the peer's own table; batch has its own method above, peers is the
 * controller's). */
#define NODE_COMMAND(name, definition, face) face == PEER_FACE_METHOD ? #name : NULL,
static const char *const peer_commands[] = {PEER_COMMANDS(NODE_COMMAND)};
#undef NODE_COMMAND

/* ---- node handle ---- */

/* n.incarnation: the restarts of its peer so far (0 before the start), what
 * an abort{incarnations=} names to spare a later peer's connections. */
static void push_incarnation(lua_State *L, const struct l_node *n)
{
    struct netrun *nr = netlife_netrun(n->net->life);
    lua_pushinteger(L, nr ? (lua_Integer)netrun_peer_incarnation(nr, n->index) : 0);
}

static int l_node_index(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    const struct topo_node *tn = &n->net->topo->nodes[n->index];
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "name") == 0)
        lua_pushstring(L, tn->name);
    else if (strcmp(key, "addr") == 0)
        tn->addr[0] ? (void)lua_pushstring(L, tn->addr) : lua_pushnil(L);
    else if (strcmp(key, "tier") == 0)
        lua_pushstring(L, tn->tier);
    else if (strcmp(key, "index") == 0)
        lua_pushinteger(L, n->index + 1);
    else if (strcmp(key, "kind") == 0)
        lua_pushstring(L, tn->kind == TOPO_NODE_HOST ? "host" : "switch");
    else if (strcmp(key, "network") == 0)
        lua_getiuservalue(L, 1, 1);
    else if (strcmp(key, "cpu") == 0)
        lua_pushnumber(L, tn->cpu);
    else if (strcmp(key, "speed") == 0)
        lua_pushnumber(L, tn->speed);
    else if (strcmp(key, "profile") == 0)
        tn->profile[0] ? (void)lua_pushstring(L, tn->profile) : lua_pushnil(L);
    else if (strcmp(key, "incarnation") == 0)
        push_incarnation(L, n);
    else {
        lua_getfield(L, lua_upvalueindex(1), key); /* methods */
        if (lua_isnil(L, -1))
            return luaL_error(L, "node '%s' has no field or command '%s'", tn->name, key);
    }
    return 1;
}

static int l_node_tostring(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    lua_pushfstring(L, "node '%s'", n->net->topo->nodes[n->index].name);
    return 1;
}

/* node:move{ to =, link =, gap = }: a handover, hiernet.churn's sequence
 * over the engine's link move (l_faults.c). */
static int l_node_move(lua_State *L)
{
    lnet_check_node(L, 1);
    return lnet_call_library(L, "move");
}

static int l_node_eq(lua_State *L)
{
    struct l_node *a = luaL_testudata(L, 1, NODE_MT), *b = luaL_testudata(L, 2, NODE_MT);
    lua_pushboolean(L, a && b && a->net == b->net && a->index == b->index);
    return 1;
}

void lnet_create_node_meta(lua_State *L)
{
    luaL_newmetatable(L, NODE_MT);
    lua_newtable(L); /* methods */
    for (size_t i = 0; i < sizeof peer_commands / sizeof peer_commands[0]; i++) {
        if (!peer_commands[i]) continue; /* not a plain node method */
        lua_pushstring(L, peer_commands[i]);
        lua_pushcclosure(L, l_node_command, 1);
        lua_setfield(L, -2, peer_commands[i]);
    }
    lua_pushcfunction(L, l_node_batch);
    lua_setfield(L, -2, "batch");
    lua_pushcfunction(L, lnet_node_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, lnet_node_spawn);
    lua_setfield(L, -2, "spawn");
    lua_pushcfunction(L, l_node_kill);
    lua_setfield(L, -2, "kill");
    lua_pushcfunction(L, l_node_restart);
    lua_setfield(L, -2, "restart");
    lua_pushcfunction(L, l_node_move);
    lua_setfield(L, -2, "move");
    lua_pushcclosure(L, l_node_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_node_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, l_node_eq);
    lua_setfield(L, -2, "__eq");
    lua_pop(L, 1);
}
