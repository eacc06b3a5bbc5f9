/* l_network.c — networks, node handles and peer commands (see l_network.h).
 *
 * The binding stays thin: the topology model is topo/network.c, the control
 * channel controller/peer_client.c, the waiting lua/l_sched.c. */
#include "lua/l_network.h"

#include "controller/netrun.h"
#include "controller/peer_client.h"
#include "controller/proc.h"
#include "controller/record.h"
#include "controller/registry.h"
#include "lua/lmsgpack.h"
#include "lua/runtime.h"
#include "topo/dot.h"
#include "topo/network.h"
#include "topo/route.h"

#include <lauxlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define NETWORK_MT "hiernet.network"
#define NODE_MT "hiernet.node"
#define LINK_MT "hiernet.link"
#define PROC_MT "hiernet.proc"
/* Peers get this long to exit on EOF before they are SIGKILLed. */
#define STOP_DEADLINE_S 3.0

enum net_state { NET_DEFINED, NET_STARTING, NET_STARTED, NET_STOPPING, NET_STOPPED };

struct l_network {
    struct hn_runtime *rt;
    struct topo_network *topo;
    struct netrun *run; /* once started */
    enum net_state state;
    int self_ref;  /* anchors the network while peers run */
    int nodes_ref; /* table: name -> node handle, and 1..n -> node handle */
    struct l_network *next;
    /* start: pings outstanding and the first failure */
    int outstanding;
    task_token start_tok;
    char start_error[512];
    /* stop: tasks waiting for the peers to exit */
    task_token *stop_waiters;
    size_t n_stop_waiters;
    ev_timer stop_deadline;
    struct l_proc *procs; /* programs started in nodes, ended at stop */
};

struct l_node {
    struct l_network *net;
    int index;
};

/* A program started in a node; the handle outlives the process. */
struct l_proc {
    struct l_network *net;
    struct proc *proc; /* NULL once the network released it */
    char node[TOPO_NAME_MAX];
    int self_ref;      /* anchors the handle while the program runs */
    bool done;
    int status;
    int out_ref, err_ref;
    task_token *waiters;
    size_t n_waiters;
    struct l_proc *next;
};

struct l_link {
    struct l_network *net;
    int index;
};

struct call {
    struct sched *sched;
    task_token tok;
    const char *kind; /* "node" or "link": how error messages name the object */
    char node[2 * TOPO_NAME_MAX]; /* a node's name, or a link's "a-b" */
    char method[32];
};

struct reply {
    const char *error;
    const msgpack_object *result;
    const struct call *call;
};

static struct l_network *check_network(lua_State *L, int i)
{
    struct l_network **p = luaL_checkudata(L, i, NETWORK_MT);
    if (!*p) luaL_error(L, "network handle is closed");
    return *p;
}

static struct l_node *check_node(lua_State *L, int i)
{
    return luaL_checkudata(L, i, NODE_MT);
}

const char *l_node_name(lua_State *L, int i)
{
    struct l_node *n = luaL_testudata(L, i, NODE_MT);
    return n ? n->net->topo->nodes[n->index].name : NULL;
}

static const char *state_word(enum net_state s)
{
    static const char *const words[] = {"not started", "starting", "started", "stopping",
                                        "stopped"};
    return words[s];
}

/* ---- option tables ---- */

/* Raises an error for any key of the table at index i not in `allowed`. */
static void check_options(lua_State *L, int i, const char *const *allowed, const char *what)
{
    lua_pushnil(L);
    while (lua_next(L, i)) {
        lua_pop(L, 1);
        bool ok = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *a = allowed; *a && !ok; a++)
                ok = strcmp(*a, lua_tostring(L, -1)) == 0;
        if (!ok) {
            luaL_tolstring(L, -1, NULL);
            luaL_error(L, "%s: unknown option '%s'", what, lua_tostring(L, -1));
        }
    }
}

static const char *opt_string(lua_State *L, int i, const char *key, const char *dflt,
                              const char *what)
{
    lua_getfield(L, i, key);
    const char *v = dflt;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: option '%s' must be a string, got %s", what, key,
                       luaL_typename(L, -1));
        v = lua_tostring(L, -1);
    }
    lua_pop(L, 1); /* strings stay alive: they belong to the option table */
    return v;
}

static double opt_number(lua_State *L, int i, const char *key, double dflt, const char *what)
{
    lua_getfield(L, i, key);
    double v = dflt;
    if (!lua_isnil(L, -1)) {
        if (!lua_isnumber(L, -1))
            luaL_error(L, "%s: option '%s' must be a number, got %s", what, key,
                       luaL_typename(L, -1));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* ---- hn.network ---- */

static const char *const network_options[] = {"name", "backend", "seed", "addr_base", NULL};

static int l_network_new(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    if (lua_isnoneornil(L, 1)) lua_newtable(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    check_options(L, 1, network_options, "hn.network");
    const char *name = opt_string(L, 1, "name", "net", "hn.network");
    const char *backend = opt_string(L, 1, "backend", "auto", "hn.network");
    double seed = opt_number(L, 1, "seed", 1, "hn.network");
    if (seed < 0 || seed != (double)(long long)seed)
        return luaL_error(L, "network '%s': seed must be a non-negative integer, got %f", name,
                          seed);
    if (rt->run->backend_override) backend = rt->run->backend_override;
    char err[256];
    enum topo_backend b;
    if (topo_backend_parse(backend, &b, err, sizeof err) < 0)
        return luaL_error(L, "network '%s': %s", name, err);
    struct l_network **handle = lua_newuserdatauv(L, sizeof *handle, 0);
    *handle = NULL;
    luaL_setmetatable(L, NETWORK_MT);
    struct l_network *net = calloc(1, sizeof *net);
    if (!net) return luaL_error(L, "network '%s': out of memory", name);
    net->topo = topo_network_new(name, b, (uint64_t)seed, err, sizeof err);
    if (!net->topo) {
        free(net);
        return luaL_error(L, "%s", err);
    }
    const char *addr_base = opt_string(L, 1, "addr_base", NULL, "hn.network");
    if (addr_base && topo_set_addr_base(net->topo, addr_base, err, sizeof err) < 0) {
        topo_network_free(net->topo);
        free(net);
        return luaL_error(L, "%s", err);
    }
    net->rt = rt;
    net->self_ref = LUA_NOREF;
    ev_timer_init(&net->stop_deadline, NULL, 0, 0);
    lua_newtable(L);
    net->nodes_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    net->next = rt->networks;
    rt->networks = net;
    *handle = net;
    if (!rt->run->has_seed) {
        rt->run->seed = (long long)seed;
        rt->run->has_seed = true;
    }
    return 1;
}

/* ---- net:node ---- */

static const char *const node_options[] = {"tier", "cpu", "speed", "threads", "device", NULL};

static void read_node_options(lua_State *L, int i, struct topo_node *n)
{
    char what[64];
    snprintf(what, sizeof what, "node '%s'", n->name);
    check_options(L, i, node_options, what);
    snprintf(n->tier, sizeof n->tier, "%s", opt_string(L, i, "tier", "", what));
    n->cpu = opt_number(L, i, "cpu", 0, what);
    n->speed = opt_number(L, i, "speed", 1, what);
    double threads = opt_number(L, i, "threads", 1, what);
    const char *device = opt_string(L, i, "device", "cpu", what);
    if (n->cpu < 0) luaL_error(L, "%s: cpu must be > 0 (a share of one core), got %f", what, n->cpu);
    if (!(n->speed > 0)) luaL_error(L, "%s: speed must be > 0, got %f", what, n->speed);
    if (threads < 1 || threads > 256 || threads != (int)threads)
        luaL_error(L, "%s: threads must be an integer from 1 to 256, got %f", what, threads);
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        luaL_error(L, "%s: device must be 'cpu' or 'cuda', got '%s'", what, device);
    n->threads = (int)threads;
    snprintf(n->device, sizeof n->device, "%s", device);
}

static void push_node_handle(lua_State *L, struct l_network *net, int index)
{
    struct l_node *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->net = net;
    h->index = index;
    luaL_setmetatable(L, NODE_MT);
    lua_pushvalue(L, 1); /* the network handle: keeps net alive while the node is */
    lua_setiuservalue(L, -2, 1);
}

static int add_node(lua_State *L, enum topo_node_kind kind)
{
    struct l_network *net = check_network(L, 1);
    const char *name = luaL_checkstring(L, 2);
    if (net->state != NET_DEFINED)
        return luaL_error(L, "network '%s': cannot add node '%s': network is %s", net->topo->name,
                          name, state_word(net->state));
    char err[256];
    int index = topo_node_add(net->topo, name, kind, err, sizeof err);
    if (index < 0) return luaL_error(L, "%s", err);
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        read_node_options(L, 3, &net->topo->nodes[index]);
    }
    lua_settop(L, 2);
    push_node_handle(L, net, index);
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, name);
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, index + 1);
    lua_pop(L, 1);
    return 1;
}

static int l_net_node(lua_State *L)
{
    return add_node(L, TOPO_NODE_HOST);
}

/* net:nodes() -> array of every node handle, in creation order. */
static int l_net_nodes(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    lua_createtable(L, (int)net->topo->n_nodes, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
    for (size_t i = 1; i <= net->topo->n_nodes; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        lua_rawseti(L, -3, (lua_Integer)i);
    }
    lua_pop(L, 1);
    return 1;
}

/* net:find(name) -> node handle or nil. */
static int l_net_find(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
    lua_getfield(L, -1, name);
    return 1;
}

/* ---- net:switch, net:link, net:route ---- */

static int l_net_switch(lua_State *L)
{
    return add_node(L, TOPO_NODE_SWITCH);
}

static struct l_node *check_node_of(lua_State *L, int i, struct l_network *net)
{
    struct l_node *n = luaL_testudata(L, i, NODE_MT);
    if (!n && lua_type(L, i) == LUA_TSTRING) {
        int index = topo_node_find(net->topo, lua_tostring(L, i));
        if (index < 0)
            luaL_error(L, "network '%s': no node named '%s'", net->topo->name, lua_tostring(L, i));
        lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
        lua_rawgeti(L, -1, index + 1);
        lua_replace(L, i);
        lua_pop(L, 1);
        return lua_touserdata(L, i);
    }
    if (!n) luaL_error(L, "expected a node or a node name, got %s", luaL_typename(L, i));
    if (n->net != net)
        luaL_error(L, "node '%s' belongs to another network than '%s'",
                   n->net->topo->nodes[n->index].name, net->topo->name);
    return n;
}

static const char *const link_options[] = {"bw", "delay", "jitter", "loss", "queue", "reorder",
                                           NULL};

/* Reads bw/delay/jitter/loss/queue (strings with units, or numbers: bit/s,
 * seconds, a fraction, packets) and reorder from the table at index i. */
static void read_link_params(lua_State *L, int i, struct topo_link_params *p, const char *what)
{
    check_options(L, i, link_options, what);
    char err[256];
    for (const char *const *key = link_options; *key; key++) {
        lua_getfield(L, i, *key);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        if (strcmp(*key, "reorder") == 0) {
            if (!lua_isboolean(L, -1)) luaL_error(L, "%s: reorder must be true or false", what);
            p->reorder = lua_toboolean(L, -1);
        } else {
            if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
                luaL_error(L, "%s: %s must be a string with a unit or a number, got %s", what,
                           *key, luaL_typename(L, -1));
            if (topo_link_param_set(p, *key, lua_tostring(L, -1), err, sizeof err) < 0)
                luaL_error(L, "%s: %s: %s", what, *key, err);
        }
        lua_pop(L, 1);
    }
}

static struct l_link *check_link(lua_State *L, int i)
{
    return luaL_checkudata(L, i, LINK_MT);
}

/* net:link(a, b, {bw=, delay=, jitter=, loss=, queue=, reorder=}) -> link */
static int l_net_link(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    struct l_node *a = check_node_of(L, 2, net), *b = check_node_of(L, 3, net);
    char what[96];
    snprintf(what, sizeof what, "link %s-%s", net->topo->nodes[a->index].name,
             net->topo->nodes[b->index].name);
    if (net->state != NET_DEFINED)
        return luaL_error(L, "network '%s': cannot add %s: network is %s", net->topo->name, what,
                          state_word(net->state));
    struct topo_link_params params = {0};
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        read_link_params(L, 4, &params, what);
    }
    char err[256];
    int index = topo_link_add(net->topo, a->index, b->index, &params, err, sizeof err);
    if (index < 0) return luaL_error(L, "network '%s': %s", net->topo->name, err);
    struct l_link *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->net = net;
    h->index = index;
    luaL_setmetatable(L, LINK_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* net:route(a, b) -> array of the node names packets from a to b cross. */
static int l_net_route(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    struct l_node *a = check_node_of(L, 2, net), *b = check_node_of(L, 3, net);
    char err[512];
    struct topo_routing routing;
    if (topo_routing_compute(net->topo, &routing, err, sizeof err) < 0)
        return luaL_error(L, "%s", err);
    size_t cap = net->topo->n_nodes + 1;
    int *path = malloc(cap * sizeof *path);
    int n = path ? topo_routing_path(net->topo, &routing, a->index, b->index, path, cap) : -1;
    topo_routing_free(&routing);
    if (n < 0) {
        free(path);
        return luaL_error(L, "network '%s': no path from '%s' to '%s'", net->topo->name,
                          net->topo->nodes[a->index].name, net->topo->nodes[b->index].name);
    }
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, net->topo->nodes[path[i]].name);
        lua_rawseti(L, -2, i + 1);
    }
    free(path);
    return 1;
}

static const char *link_name(struct l_link *h, char *buf, size_t len)
{
    topo_link_describe(h->net->topo, &h->net->topo->links[h->index], buf, len);
    return buf;
}

static void check_link_running(lua_State *L, struct l_link *h, const char *method)
{
    char name[96];
    if (h->net->state != NET_STARTED)
        luaL_error(L, "link %s: %s: network '%s' is %s", link_name(h, name, sizeof name), method,
                   h->net->topo->name, state_word(h->net->state));
}

static int push_reply(lua_State *co, void *ud);

enum link_change { LINK_SET, LINK_DOWN, LINK_UP, LINK_STATS };

/* A link request in flight to linkd; the model changes once it succeeded. */
struct link_call {
    struct call call; /* first: on_call_reply's machinery reads it */
    struct l_network *net;
    int link;
    enum link_change change;
    struct topo_link_params params;
};

static void apply_link_change(struct link_call *lc)
{
    struct topo_link *l = &lc->net->topo->links[lc->link];
    if (lc->change == LINK_SET) l->params = lc->params;
    if (lc->change == LINK_DOWN || lc->change == LINK_UP) l->up = lc->change == LINK_UP;
}

static void on_link_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct link_call *lc = ctx;
    if (!error) apply_link_change(lc);
    struct reply r = {error, result, &lc->call};
    sched_wake(lc->call.sched, lc->call.tok, push_reply, &r);
    free(lc);
}

static int link_call_k(lua_State *L, int status, lua_KContext ctx)
{
    if (!lua_toboolean(L, -2)) return luaL_error(L, "%s", lua_tostring(L, -1));
    return ctx == LINK_STATS ? 1 : 0;
}

/* Runs one link change: at once (kernel backend) or through linkd,
 * waiting for its reply (user backend). */
static int link_request(lua_State *L, struct l_link *h, enum link_change change,
                        const struct topo_link_params *params)
{
    static const char *const names[] = {"set", "down", "up", "stats"};
    char err[512];
    check_link_running(L, h, names[change]);
    struct link_call *lc = calloc(1, sizeof *lc);
    if (!lc) return luaL_error(L, "link %d: out of memory", h->index);
    *lc = (struct link_call){{h->net->rt->sched, {0, 0}, "link", "", ""}, h->net, h->index, change,
                             {0}};
    if (params) lc->params = *params;
    link_name(h, lc->call.node, sizeof lc->call.node);
    snprintf(lc->call.method, sizeof lc->call.method, "%s", names[change]);
    struct netrun *run = h->net->run;
    int rc = change == LINK_SET     ? netrun_link_set(run, h->index, params, on_link_reply, lc, err, sizeof err)
             : change == LINK_STATS ? netrun_link_stats(run, h->index, on_link_reply, lc, err, sizeof err)
                                    : netrun_link_updown(run, h->index, change == LINK_UP,
                                                         on_link_reply, lc, err, sizeof err);
    if (rc <= 0) {
        if (rc == 0) apply_link_change(lc);
        free(lc);
        if (rc < 0) return luaL_error(L, "%s", err);
        return 0;
    }
    lc->call.tok = sched_suspend(L);
    return lua_yieldk(L, 0, change, link_call_k);
}

/* link:set{bw=, delay=, jitter=, loss=, queue=}: unnamed parameters keep their values. */
static int l_link_set(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    char name[96], what[128];
    snprintf(what, sizeof what, "link %s", link_name(h, name, sizeof name));
    struct topo_link_params params = h->net->topo->links[h->index].params;
    read_link_params(L, 2, &params, what);
    return link_request(L, h, LINK_SET, &params);
}

static int l_link_down(lua_State *L)
{
    return link_request(L, check_link(L, 1), LINK_DOWN, NULL);
}

static int l_link_up(lua_State *L)
{
    return link_request(L, check_link(L, 1), LINK_UP, NULL);
}

/* link:stats() -> {up=, ab={packets=, bytes=, delivered=, drops_loss=, ...}, ba={...}} */
static int l_link_stats(lua_State *L)
{
    return link_request(L, check_link(L, 1), LINK_STATS, NULL);
}

static void push_link_end(lua_State *L, struct l_link *h, int node)
{
    lua_getiuservalue(L, 1, 1);
    struct l_network *net = h->net;
    lua_rawgeti(L, LUA_REGISTRYINDEX, net->nodes_ref);
    lua_rawgeti(L, -1, node + 1);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

static int l_link_index(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    const struct topo_link *l = &h->net->topo->links[h->index];
    const char *key = luaL_checkstring(L, 2);
    char buf[96];
    if (strcmp(key, "a") == 0) {
        push_link_end(L, h, l->a);
    } else if (strcmp(key, "b") == 0) {
        push_link_end(L, h, l->b);
    } else if (strcmp(key, "name") == 0) {
        topo_link_describe(h->net->topo, l, buf, sizeof buf);
        lua_pushstring(L, buf);
    } else {
        lua_getfield(L, lua_upvalueindex(1), key);
        if (lua_isnil(L, -1)) {
            topo_link_describe(h->net->topo, l, buf, sizeof buf);
            return luaL_error(L, "link %s has no field or method '%s'", buf, key);
        }
    }
    return 1;
}

static int l_link_tostring(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    char buf[96];
    topo_link_describe(h->net->topo, &h->net->topo->links[h->index], buf, sizeof buf);
    lua_pushfstring(L, "link %s", buf);
    return 1;
}

static const luaL_Reg link_methods[] = {
    {"set", l_link_set}, {"down", l_link_down}, {"up", l_link_up}, {"stats", l_link_stats},
    {NULL, NULL},
};

static void create_link_meta(lua_State *L)
{
    luaL_newmetatable(L, LINK_MT);
    luaL_newlib(L, link_methods);
    lua_pushcclosure(L, l_link_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_link_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

/* ---- programs in nodes: node:run, node:spawn ---- */

static void on_proc_done(void *ctx, struct proc *p, int status, const char *out, size_t out_len,
                         const char *err, size_t err_len)
{
    struct l_proc *lp = ctx;
    lua_State *L = lp->net->rt->L;
    lp->done = true;
    lp->status = status;
    lua_pushlstring(L, out, out_len);
    lp->out_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushlstring(L, err, err_len);
    lp->err_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    task_token *waiters = lp->waiters;
    size_t n = lp->n_waiters;
    lp->waiters = NULL;
    lp->n_waiters = 0;
    int self = lp->self_ref;
    lp->self_ref = LUA_NOREF;
    for (size_t i = 0; i < n; i++) sched_wake(lp->net->rt->sched, waiters[i], NULL, NULL);
    free(waiters);
    luaL_unref(L, LUA_REGISTRYINDEX, self); /* may let the handle be collected */
}

static struct l_proc *check_proc(lua_State *L, int i)
{
    return luaL_checkudata(L, i, PROC_MT);
}

/* Collects argv from a string (run through /bin/sh -c) or an array of strings. */
static char **collect_argv(lua_State *L, int i, const char *node)
{
    if (lua_type(L, i) == LUA_TSTRING) {
        char **argv = lua_newuserdatauv(L, 4 * sizeof *argv, 0);
        argv[0] = "/bin/sh", argv[1] = "-c", argv[2] = (char *)lua_tostring(L, i), argv[3] = NULL;
        return argv;
    }
    if (!lua_istable(L, i) || luaL_len(L, i) < 1)
        luaL_error(L, "node '%s': expected a command string or a non-empty array of strings", node);
    lua_Integer n = luaL_len(L, i);
    char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "node '%s': argument %d is a %s, not a string", node, (int)k,
                       luaL_typename(L, -1));
        argv[k - 1] = (char *)lua_tostring(L, -1);
        lua_rawseti(L, i, k); /* keep the (possibly converted) string anchored in the table */
    }
    argv[n] = NULL;
    return argv;
}

/* Starts argv (at index 2) in node 1's namespace; pushes the proc handle. */
static struct l_proc *start_proc(lua_State *L)
{
    struct l_node *n = check_node(L, 1);
    struct l_network *net = n->net;
    const char *node = net->topo->nodes[n->index].name;
    if (net->state != NET_STARTED)
        luaL_error(L, "node '%s': network '%s' is %s", node, net->topo->name,
                   state_word(net->state));
    if (net->topo->nodes[n->index].kind != TOPO_NODE_HOST)
        luaL_error(L, "node '%s': programs run in host nodes, not switches", node);
    char **argv = collect_argv(L, 2, node);
    struct l_proc *lp = lua_newuserdatauv(L, sizeof *lp, 0);
    memset(lp, 0, sizeof *lp);
    lp->net = net;
    lp->self_ref = lp->out_ref = lp->err_ref = LUA_NOREF;
    snprintf(lp->node, sizeof lp->node, "%s", node);
    luaL_setmetatable(L, PROC_MT);
    char err[512];
    lp->proc = proc_spawn(net->rt->loop, netrun_node_ns(net->run, n->index), argv, on_proc_done,
                          lp, err, sizeof err);
    if (!lp->proc) luaL_error(L, "node '%s': %s", node, err);
    lua_pushvalue(L, -1);
    lp->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lp->next = net->procs;
    net->procs = lp;
    return lp;
}

/* Parks the running task until the program of lp ends. */
static void proc_add_waiter(lua_State *L, struct l_proc *lp)
{
    if (!lp->proc) luaL_error(L, "node '%s': the program was ended with its network", lp->node);
    task_token *grown = realloc(lp->waiters, (lp->n_waiters + 1) * sizeof *grown);
    if (!grown) luaL_error(L, "node '%s': out of memory", lp->node);
    lp->waiters = grown;
    lp->waiters[lp->n_waiters] = sched_suspend(L);
    lp->n_waiters++;
}

static struct l_proc *finished_proc(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    if (!lp->done) luaL_error(L, "node '%s': the program was ended with its network", lp->node);
    return lp;
}

static int proc_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_proc *lp = finished_proc(L);
    lua_pushinteger(L, lp->status);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->out_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->err_ref);
    return 3;
}

/* p:wait() -> status, out, err (status: exit code, or 128 + signal). */
static int proc_wait(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    lua_settop(L, 1);
    if (lp->done) return proc_wait_k(L, LUA_OK, 0);
    proc_add_waiter(L, lp);
    return lua_yieldk(L, 0, 0, proc_wait_k);
}

static int run_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_proc *lp = finished_proc(L);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, lp->status);
    lua_setfield(L, -2, "status");
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->out_ref);
    lua_setfield(L, -2, "out");
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->err_ref);
    lua_setfield(L, -2, "err");
    return 1;
}

/* node:run(cmd) -> {status=, out=, err=}: cmd is a shell command string or an argv array. */
static int l_node_run(lua_State *L)
{
    lua_settop(L, 2);
    struct l_proc *lp = start_proc(L);
    lua_replace(L, 1); /* the handle takes the node's place */
    lua_settop(L, 1);
    if (lp->done) return run_k(L, LUA_OK, 0);
    proc_add_waiter(L, lp);
    return lua_yieldk(L, 0, 0, run_k);
}

/* node:spawn(argv) -> handle with :wait() -> status, out, err; :kill([signal]); .pid */
static int l_node_spawn(lua_State *L)
{
    lua_settop(L, 2);
    start_proc(L);
    return 1;
}

static int l_proc_kill(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    int sig = (int)luaL_optinteger(L, 2, SIGTERM);
    if (sig < 1 || sig > 64) return luaL_error(L, "kill: bad signal number %d", sig);
    if (lp->proc && !lp->done) proc_kill(lp->proc, sig);
    return 0;
}

static int l_proc_index(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "pid") == 0) {
        lua_pushinteger(L, lp->proc ? proc_pid(lp->proc) : 0);
        return 1;
    }
    if (strcmp(key, "done") == 0) {
        lua_pushboolean(L, lp->done);
        return 1;
    }
    lua_getfield(L, lua_upvalueindex(1), key);
    return 1;
}

static int l_proc_gc(lua_State *L)
{
    struct l_proc *lp = check_proc(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, lp->out_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lp->err_ref);
    lp->out_ref = lp->err_ref = LUA_NOREF;
    free(lp->waiters);
    lp->waiters = NULL;
    return 0;
}

static const luaL_Reg proc_methods[] = {
    {"wait", proc_wait}, {"kill", l_proc_kill}, {NULL, NULL},
};

static void create_proc_meta(lua_State *L)
{
    luaL_newmetatable(L, PROC_MT);
    luaL_newlib(L, proc_methods);
    lua_pushcclosure(L, l_proc_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_proc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
}

/* Stop: every program still running in the network gets SIGTERM. */
static void procs_terminate(struct l_network *net)
{
    for (struct l_proc *lp = net->procs; lp; lp = lp->next)
        if (lp->proc && !lp->done) proc_kill(lp->proc, SIGTERM);
}

/* Release: SIGKILL and reap what is left; handles stay valid but detached. */
static void procs_release(struct l_network *net)
{
    while (net->procs) {
        struct l_proc *lp = net->procs;
        net->procs = lp->next;
        proc_free(lp->proc);
        lp->proc = NULL;
        if (!lp->done) luaL_unref(net->rt->L, LUA_REGISTRYINDEX, lp->self_ref);
        lp->self_ref = LUA_NOREF;
    }
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

static int push_reply(lua_State *co, void *ud)
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
    sched_wake(c->sched, c->tok, push_reply, &r);
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
                   state_word(net->state));
    if (tn->kind != TOPO_NODE_HOST)
        luaL_error(L, "node '%s': %s: a switch runs no peer", tn->name, method);
    return netrun_peer(net->run, n->index);
}

/* Sends method with params (a table or nil) and yields until the reply. */
static int node_request(lua_State *L, struct l_node *n, const char *method, int params)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *node = n->net->topo->nodes[n->index].name;
    struct peer_client *pc = node_client(L, n, method);
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
    struct l_node *n = check_node(L, 1);
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
    struct l_node *n = check_node(L, 1);
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
    struct l_node *n = check_node(L, 1);
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
    struct l_node *n = check_node(L, 1);
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
    else {
        lua_getfield(L, lua_upvalueindex(1), key); /* methods */
        if (lua_isnil(L, -1))
            return luaL_error(L, "node '%s' has no field or command '%s'", tn->name, key);
    }
    return 1;
}

static int l_node_tostring(lua_State *L)
{
    struct l_node *n = check_node(L, 1);
    lua_pushfstring(L, "node '%s'", n->net->topo->nodes[n->index].name);
    return 1;
}

static int l_node_eq(lua_State *L)
{
    struct l_node *a = luaL_testudata(L, 1, NODE_MT), *b = luaL_testudata(L, 2, NODE_MT);
    lua_pushboolean(L, a && b && a->net == b->net && a->index == b->index);
    return 1;
}

static void create_node_meta(lua_State *L)
{
    luaL_newmetatable(L, NODE_MT);
    lua_newtable(L); /* methods */
    for (const char *const *c = peer_commands; *c; c++) {
        lua_pushstring(L, *c);
        lua_pushcclosure(L, l_node_command, 1);
        lua_setfield(L, -2, *c);
    }
    lua_pushcfunction(L, l_node_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, l_node_spawn);
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

/* ---- start ---- */

static void publish_topology(struct hn_runtime *rt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    fputc('[', f);
    int k = 0;
    for (struct l_network *net = rt->networks; net; net = net->next) {
        if (net->state == NET_DEFINED) continue;
        if (k++) fputs(", ", f);
        topo_network_write_json(net->topo, f);
    }
    fputc(']', f);
    if (fclose(f) == 0) run_set_topology(rt->run, buf);
    free(buf);
    char err[256];
    if (run_write_json(rt->run, err, sizeof err) < 0) hn_logf(rt, "warning: %s", err);
}

static void finish_stop(struct l_network *net)
{
    ev_timer_stop(net->rt->loop, &net->stop_deadline);
    net->state = NET_STOPPED;
    task_token *waiters = net->stop_waiters;
    size_t n = net->n_stop_waiters;
    net->stop_waiters = NULL;
    net->n_stop_waiters = 0;
    for (size_t i = 0; i < n; i++) sched_wake(net->rt->sched, waiters[i], NULL, NULL);
    free(waiters);
}

static void on_peer_exit(void *ctx, int node, int status)
{
    struct l_network *net = ctx;
    if (net->state == NET_STARTED && WIFSIGNALED(status))
        hn_logf(net->rt, "node '%s': peer killed by signal %d", net->topo->nodes[node].name,
                WTERMSIG(status));
    else if (net->state == NET_STARTED)
        hn_logf(net->rt, "node '%s': peer exited with status %d", net->topo->nodes[node].name,
                WEXITSTATUS(status));
    if (net->state == NET_STOPPING && netrun_peers_exited(net->run)) finish_stop(net);
}

static void on_start_ping(void *ctx, const char *error, const msgpack_object *result)
{
    struct l_network *net = ctx;
    if (error && !net->start_error[0])
        snprintf(net->start_error, sizeof net->start_error, "%s", error);
    if (--net->outstanding == 0) sched_wake(net->rt->sched, net->start_tok, NULL, NULL);
}

static void close_peers(struct l_network *net)
{
    if (net->run) netrun_close_peers(net->run);
}

static int start_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_network *net = check_network(L, 1);
    if (net->start_error[0]) {
        net->state = NET_STOPPING;
        close_peers(net);
        return luaL_error(L, "network '%s': start failed: %s", net->topo->name, net->start_error);
    }
    net->state = NET_STARTED;
    publish_topology(net->rt);
    return 0;
}

static void check_devices(lua_State *L, struct l_network *net)
{
    for (size_t i = 0; i < net->topo->n_nodes; i++)
        if (strcmp(net->topo->nodes[i].device, "cuda") == 0)
            luaL_error(L, "node '%s': device 'cuda' is not available: this build has no CUDA kernels",
                       net->topo->nodes[i].name);
}

/* Pings every peer concurrently: start returns once all answer. */
static int ping_all(lua_State *L, struct l_network *net)
{
    char err[512];
    net->outstanding = 0;
    for (size_t i = 0; i < net->topo->n_nodes; i++) {
        struct peer_client *pc = netrun_peer(net->run, (int)i);
        if (!pc) continue;
        if (peer_client_call(pc, "ping", NULL, 0, on_start_ping, net, err, sizeof err) < 0) {
            snprintf(net->start_error, sizeof net->start_error, "%s", err);
            break;
        }
        net->outstanding++;
    }
    if (net->outstanding == 0) return start_k(L, LUA_OK, 0);
    /* Replies only arrive from the loop, after this task has yielded. */
    net->start_tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, start_k);
}

/* The run's registry entry, made at the first network start. */
static struct registry *run_registry(struct hn_runtime *rt)
{
    if (rt->registry || !rt->run->dir) return rt->registry;
    char err[512];
    struct registry_sweep_counts counts;
    if (registry_sweep_stale(NULL, NULL, &counts, err, sizeof err) == 0 && counts.runs)
        hn_logf(rt, "removed what %u crashed run(s) left behind", counts.runs);
    const char *base = strrchr(rt->run->dir, '/');
    rt->registry = registry_open(base ? base + 1 : rt->run->dir, rt->run->dir, err, sizeof err);
    if (!rt->registry) hn_logf(rt, "warning: no run registry: %s", err);
    return rt->registry;
}

/* hiernet draw: the network is drawn instead of started, and the scenario
 * ends there (its task stays parked; the runner sees rt->drawn). */
static int draw_instead(lua_State *L, struct l_network *net)
{
    struct hn_runtime *rt = net->rt;
    topo_network_write_dot(net->topo, rt->draw);
    rt->drawn = true;
    ev_break(rt->loop, EVBREAK_ALL);
    sched_suspend(L);
    return lua_yield(L, 0);
}

/* links.csv, shared by every network of the run that has counters (user backend). */
static void sample_links(struct hn_runtime *rt, struct netrun *run)
{
    if (strcmp(netrun_backend(run), "user") != 0) return;
    if (!rt->links_record) {
        size_t n;
        const char *const *columns = netrun_link_columns(&n);
        char err[512];
        struct record **grown = realloc(rt->records, (rt->n_records + 1) * sizeof *grown);
        if (!grown) return;
        rt->records = grown;
        rt->links_record = record_open(rt->run->dir, "links", columns, n, err, sizeof err);
        if (!rt->links_record) {
            hn_logf(rt, "warning: no links.csv: %s", err);
            return;
        }
        rt->records[rt->n_records++] = rt->links_record; /* closed with the others */
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t0 = (double)now.tv_sec + now.tv_nsec / 1e9 - sched_now(rt->sched);
    netrun_sample_links(run, rt->links_record, t0);
}

static int l_net_start(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    struct hn_runtime *rt = net->rt;
    lua_settop(L, 1);
    if (net->state != NET_DEFINED)
        return luaL_error(L, "network '%s': start: network is %s", net->topo->name,
                          state_word(net->state));
    if (net->topo->n_nodes == 0)
        return luaL_error(L, "network '%s': start: the network has no nodes", net->topo->name);
    if (rt->draw) return draw_instead(L, net);
    check_devices(L, net);
    struct registry *reg = run_registry(rt);
    struct netrun_config cfg = {reg ? registry_run_id(reg) : "run", reg};
    char err[1024];
    bool env_error = false;
    if (netrun_start(rt->loop, net->topo, &cfg, on_peer_exit, net, &net->run, &env_error, err,
                     sizeof err) < 0) {
        rt->env_failure |= env_error;
        return luaL_error(L, "%s", err);
    }
    if (net->topo->backend == TOPO_BACKEND_NONE && net->topo->n_links)
        hn_logf(rt, "network '%s': backend none: %zu links recorded but not emulated",
                net->topo->name, net->topo->n_links);
    else if (net->topo->backend != TOPO_BACKEND_NONE)
        hn_logf(rt, "network '%s': backend %s (%s)", net->topo->name, netrun_backend(net->run),
                netrun_backend_reason(net->run));
    sample_links(rt, net->run);
    lua_pushvalue(L, 1);
    net->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    net->state = NET_STARTING;
    return ping_all(L, net);
}

/* ---- stop ---- */

static void on_stop_deadline(EV_P_ ev_timer *w, int revents)
{
    struct l_network *net =
        (struct l_network *)((char *)w - offsetof(struct l_network, stop_deadline));
    hn_logf(net->rt, "network '%s': peers did not exit within %.0f s; killing them",
            net->topo->name, STOP_DEADLINE_S);
    netrun_kill_peers(net->run, SIGKILL);
}

/* Closes every channel; the peers exit on EOF. Returns true when all have exited. */
static bool stop_begin(struct l_network *net)
{
    if (net->state == NET_DEFINED || net->state == NET_STOPPED) return true;
    if (net->state != NET_STOPPING) {
        net->state = NET_STOPPING;
        procs_terminate(net);
        close_peers(net);
        ev_timer_init(&net->stop_deadline, on_stop_deadline, STOP_DEADLINE_S, 0);
        ev_timer_start(net->rt->loop, &net->stop_deadline);
    }
    if (net->run && !netrun_peers_exited(net->run)) return false;
    ev_timer_stop(net->rt->loop, &net->stop_deadline);
    net->state = NET_STOPPED;
    return true;
}

static int stop_k(lua_State *L, int status, lua_KContext ctx)
{
    return 0;
}

/* net:stop(): waits until every peer has exited. Stopping twice is fine. */
static int l_net_stop(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    if (stop_begin(net)) return 0;
    task_token *grown = realloc(net->stop_waiters, (net->n_stop_waiters + 1) * sizeof *grown);
    if (!grown) return luaL_error(L, "network '%s': out of memory", net->topo->name);
    net->stop_waiters = grown;
    net->stop_waiters[net->n_stop_waiters++] = sched_suspend(L);
    return lua_yieldk(L, 0, 0, stop_k);
}

static int l_net_state(lua_State *L)
{
    lua_pushstring(L, state_word(check_network(L, 1)->state));
    return 1;
}

static int l_net_index(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "name") == 0) {
        lua_pushstring(L, net->topo->name);
    } else if (strcmp(key, "backend") == 0) {
        lua_pushstring(L, topo_backend_name(net->topo->backend));
    } else if (strcmp(key, "seed") == 0) {
        lua_pushinteger(L, (lua_Integer)net->topo->seed);
    } else {
        lua_getfield(L, lua_upvalueindex(1), key);
        if (lua_isnil(L, -1))
            return luaL_error(L, "network '%s' has no field or method '%s'", net->topo->name, key);
    }
    return 1;
}

static int l_net_tostring(lua_State *L)
{
    lua_pushfstring(L, "network '%s'", check_network(L, 1)->topo->name);
    return 1;
}

static const luaL_Reg network_methods[] = {
    {"node", l_net_node},   {"switch", l_net_switch}, {"link", l_net_link},
    {"route", l_net_route}, {"nodes", l_net_nodes},   {"find", l_net_find},
    {"start", l_net_start}, {"stop", l_net_stop},     {"state", l_net_state},
    {NULL, NULL},
};

static void create_network_meta(lua_State *L)
{
    luaL_newmetatable(L, NETWORK_MT);
    luaL_newlib(L, network_methods);
    lua_pushcclosure(L, l_net_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_net_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

void l_network_register(lua_State *L)
{
    create_network_meta(L);
    create_node_meta(L);
    create_link_meta(L);
    create_proc_meta(L);
    lua_pushcfunction(L, l_network_new);
    lua_setfield(L, -2, "network");
}

/* ---- teardown (outside tasks) ---- */

void l_network_draw_all(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next)
        topo_network_write_dot(net->topo, rt->draw);
}

void l_network_stop_all(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next) stop_begin(net);
}

bool l_network_all_exited(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next)
        if (net->run && !netrun_peers_exited(net->run)) return false;
    return true;
}

void l_network_release_all(struct hn_runtime *rt)
{
    while (rt->networks) {
        struct l_network *net = rt->networks;
        rt->networks = net->next;
        ev_timer_stop(rt->loop, &net->stop_deadline);
        procs_release(net);
        netrun_free(net->run); /* kills and reaps survivors, releases the topology */
        net->run = NULL;
        free(net->stop_waiters);
        luaL_unref(rt->L, LUA_REGISTRYINDEX, net->self_ref);
        luaL_unref(rt->L, LUA_REGISTRYINDEX, net->nodes_ref);
        topo_network_free(net->topo);
        net->topo = NULL;
        free(net);
    }
}
