/* l_node.c — node handles and the peer commands that are their methods:
 * n:tensor{...}, n:axpy{...}, ... each sends one MessagePack-RPC request to
 * the node's peer and suspends the calling task until the reply; plus
 * n:kill() and n:restart(), and the fields n.name, n.addr, n.tier, ... */
#include "lua/l_net.h"

#include "controller/netrun.h"
#include "controller/peer_client.h"
#include "controller/proc.h"
#include "lua/l_network.h"
#include "lua/lmsgpack.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>

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

/* Drops a leading "node 'x': " and "method: " so the message is said once. */
static const char *strip_prefixes(const char *msg, const char *node, const char *method)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "node '%s': ", node);
    if (strncmp(msg, prefix, strlen(prefix)) == 0) msg += strlen(prefix);
    size_t mlen = strlen(method);
    if (strncmp(msg, method, mlen) == 0 && msg[mlen] == ':' && msg[mlen + 1] == ' ')
        msg += mlen + 2;
    return msg;
}

int lnet_push_reply(lua_State *co, void *ud)
{
    const struct reply *r = ud;
    if (r->error) {
        lua_pushboolean(co, 0);
        const struct call *c = r->call;
        const char *msg = strip_prefixes(r->error, c->node, c->method);
        if (c->kind[0] == 'n')
            lua_pushfstring(co, "node '%s': %s: %s", c->node, c->method, msg);
        else
            lua_pushfstring(co, "link %s: %s: %s", c->node, c->method, msg);
    } else {
        lua_pushboolean(co, 1);
        lmsgpack_push(co, r->result);
    }
    return 2;
}

static void on_call_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct call *c = ctx;
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
    if (net->state != NET_STARTED && net->state != NET_STARTING)
        luaL_error(L, "node '%s': %s: network '%s' is %s", tn->name, method, net->topo->name,
                   lnet_state_word(net->state));
    if (tn->kind != TOPO_NODE_HOST)
        luaL_error(L, "node '%s': %s: a switch runs no peer", tn->name, method);
    return netrun_peer(net->run, n->index);
}

/* A node handle among the params must be of n's network: a peer knows the
 * addresses (and the data secret) of its own network only, and a node of
 * another one of the same name would be the wrong node. */
static void check_same_network(lua_State *L, struct l_node *n, const char *method, int params)
{
    if (!lua_istable(L, params)) return;
    lua_pushnil(L);
    while (lua_next(L, params)) {
        struct l_node *other = luaL_testudata(L, -1, NODE_MT);
        if (other && other->net != n->net)
            luaL_error(L,
                       "node '%s': %s: param '%s' is node '%s' of network '%s', not of "
                       "network '%s'",
                       n->net->topo->nodes[n->index].name, method,
                       lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?",
                       other->net->topo->nodes[other->index].name, other->net->topo->name,
                       n->net->topo->name);
        lua_pop(L, 1);
    }
}

/* Sends method with params (a table or nil) and yields until the reply. */
static int node_request(lua_State *L, struct l_node *n, const char *method, int params)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *node = n->net->topo->nodes[n->index].name;
    struct peer_client *pc = node_client(L, n, method);
    check_same_network(L, n, method, params);
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
    if (peer_client_call(pc, method, rt->scratch.data, rt->scratch.size, on_call_reply, c, err,
                         sizeof err) < 0) {
        free(c);
        return luaL_error(L, "node '%s': %s: %s", node, method, strip_prefixes(err, node, method));
    }
    /* The reply cannot arrive before we yield: callbacks run from the loop. */
    c->tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, node_call_k);
}

/* ---- node failures ---- */

/* node:kill(): the node crashes: its peer is SIGKILLed and its programs
 * too; calls to it fail until node:restart(). */
static int l_node_kill(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    const char *name = n->net->topo->nodes[n->index].name;
    node_client(L, n, "kill");
    netrun_peer_kill(n->net->run, n->index);
    for (struct l_proc *lp = n->net->procs; lp; lp = lp->next)
        if (lp->proc && !lp->done && strcmp(lp->node, name) == 0) proc_kill(lp->proc, SIGKILL);
    return 0;
}

/* node:restart(): a fresh peer (no tensors) in the same node; returns once it answers. */
static int l_node_restart(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    char err[512];
    node_client(L, n, "restart");
    if (netrun_peer_restart(n->net->run, n->index, err, sizeof err) < 0)
        return luaL_error(L, "node '%s': restart: %s", n->net->topo->nodes[n->index].name, err);
    lua_settop(L, 1);
    return node_request(L, n, "ping", 2);
}

/* node:<command>(params): the command name is the closure's upvalue. */
static int l_node_command(lua_State *L)
{
    struct l_node *n = lnet_check_node(L, 1);
    if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
        return luaL_error(L, "node '%s': %s: expected a table of parameters, got %s",
                          n->net->topo->nodes[n->index].name,
                          lua_tostring(L, lua_upvalueindex(1)), luaL_typename(L, 2));
    return node_request(L, n, lua_tostring(L, lua_upvalueindex(1)), 2);
}

/* Peer commands of DESIGN.md; the peer answers "unknown method" for the ones
 * this build's peer does not implement yet. */
static const char *const peer_commands[] = {
    "ping",   "stats",   "tensor", "copy",     "drop",       "axpy", "scale",
    "sum",    "norm",    "dot",    "read",     "dataset",    "model", "grad",
    "optim",  "eval",    "send",   "compress", "decompress", NULL,
};

/* ---- node handle ---- */

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
    for (const char *const *c = peer_commands; *c; c++) {
        lua_pushstring(L, *c);
        lua_pushcclosure(L, l_node_command, 1);
        lua_setfield(L, -2, *c);
    }
    lua_pushcfunction(L, lnet_node_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, lnet_node_spawn);
    lua_setfield(L, -2, "spawn");
    lua_pushcfunction(L, l_node_kill);
    lua_setfield(L, -2, "kill");
    lua_pushcfunction(L, l_node_restart);
    lua_setfield(L, -2, "restart");
    lua_pushcclosure(L, l_node_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_node_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, l_node_eq);
    lua_setfield(L, -2, "__eq");
    lua_pop(L, 1);
}

