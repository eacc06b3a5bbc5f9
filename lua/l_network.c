/* l_network.c — network handles: hn.network{...}, net:node/switch/link,
 * net:route, net:start/stop, and the run's teardown of every network (see
 * l_network.h). Node, link and program handles are l_node.c, l_link.c and
 * l_proc.c.
 *
 * The binding stays thin: the topology model is topo/; a network's life
 * cycle (build, spawn, handshake, stop, deadlines, registry, links.csv),
 * its state and its run-time changes controller/netlife.c (and
 * netlife_ops.c), which this calls, asks and hears back from through
 * on_transition; a started network (backend, peers, cgroups)
 * controller/netrun*.c behind it; the waiting lua/l_sched.c. */
#include "lua/l_network.h"
#include "kernels/profile.h"

#include "common/number.h"
#include "controller/agent_group.h"
#include "controller/host_probe.h"
#include "controller/netlife.h"
#include "controller/peer_client.h"
#include "controller/tcp_counters.h"
#include "lua/l_net.h"
#include "lua/runtime.h"
#include "topo/network.h"
#include "topo/route.h"

#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Peers get this long to exit on EOF before they are SIGKILLed. */
#define STOP_DEADLINE_S 3.0
/* and this long to answer at start (a thousand peers take about a second);
 * HIERNET_START_TIMEOUT (seconds) overrides it, for tests and slow hosts. */
#define START_DEADLINE_S 30.0

static struct l_network *check_network(lua_State *L, int i)
{
    struct l_network **p = luaL_checkudata(L, i, NETWORK_MT);
    if (!*p) luaL_error(L, "network handle is closed");
    return *p;
}

const char *lnet_state_word(const struct l_network *net)
{
    return netlife_state_word(net->life);
}

/* ---- option tables ---- */

/* Raises an error for any key of the table at index i not in `allowed`. */
void lnet_check_options(lua_State *L, int i, const char *const *allowed, const char *what)
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

const char *lnet_opt_string(lua_State *L, int i, const char *key, const char *dflt,
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

double lnet_opt_number(lua_State *L, int i, const char *key, double dflt, const char *what)
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

/* ---- tcp = {cc =, rto_min =, ecn =, init_cwnd =} ---- */

static const char *const tcp_options[] = {"cc", "rto_min", "ecn", "init_cwnd", NULL};

/* The value of key in the table at i as text (a string, or a number of
 * seconds for rto_min), or NULL when absent. The value stays pushed (the
 * caller's lua_settop drops it): a number's text is a new string that
 * nothing else holds, which a collection could free once popped. */
static const char *tcp_opt_text(lua_State *L, int i, const char *key, const char *what)
{
    lua_getfield(L, i, key);
    int type = lua_type(L, -1);
    if (type != LUA_TNIL && type != LUA_TSTRING && type != LUA_TNUMBER)
        luaL_error(L, "%s: tcp %s must be a string, got %s", what, key, luaL_typename(L, -1));
    return type == LUA_TNIL ? NULL : lua_tostring(L, -1);
}

/* Reads the tcp table of the options at i (if any) over t: what it names
 * replaces t's, the rest stays (a node's over its network's). */
static void read_tcp_options(lua_State *L, int i, struct topo_tcp *t, const char *what)
{
    if (lua_getfield(L, i, "tcp") == LUA_TNIL) return (void)lua_pop(L, 1);
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: option 'tcp' must be a table, got %s", what, luaL_typename(L, -1));
    int top = lua_gettop(L);
    char label[96], err[512];
    snprintf(label, sizeof label, "%s: tcp", what);
    lnet_check_options(L, top, tcp_options, label);
    const char *cc = tcp_opt_text(L, top, "cc", what);
    const char *rto_min = tcp_opt_text(L, top, "rto_min", what);
    if ((cc && topo_tcp_set_cc(t, cc, err, sizeof err) < 0) ||
        (rto_min && topo_tcp_set_rto_min(t, rto_min, err, sizeof err) < 0))
        luaL_error(L, "%s: %s", what, err);
    if (lua_getfield(L, top, "init_cwnd") != LUA_TNIL) {
        if (!lua_isnumber(L, -1)) luaL_error(L, "%s: tcp init_cwnd must be a number", what);
        if (topo_tcp_set_init_cwnd(t, lua_tonumber(L, -1), err, sizeof err) < 0)
            luaL_error(L, "%s: %s", what, err);
    }
    if (lua_getfield(L, top, "ecn") != LUA_TNIL) {
        if (!lua_isboolean(L, -1)) luaL_error(L, "%s: tcp ecn must be true or false", what);
        t->ecn = lua_toboolean(L, -1) ? TOPO_TCP_ECN_ON : TOPO_TCP_ECN_OFF;
    }
    lua_settop(L, top - 1);
}

/* ---- hn.network ---- */

static const char *const network_options[] = {
    "name", "backend", "seed", "addr_base", "dilation", "tcp", "dilation_max", "hosts", NULL};

static bool any_network_started(const struct hn_runtime *rt)
{
    for (const struct l_network *n = rt->networks; n; n = n->next)
        if (!netlife_defined(n->life)) return true;
    return false;
}

static void report_dilation(lua_State *L, struct hn_runtime *rt, enum run_dilation_outcome outcome,
                            const char *msg)
{
    switch (outcome) {
    case RUN_DILATION_SET:
        sched_set_dilation(rt->sched, rt->run->dilation);
        break;
    case RUN_DILATION_CLI_WINS:
        hn_logf(rt, "%s", msg);
        break;
    case RUN_DILATION_CONFLICT:
        luaL_error(L, "%s", msg);
    }
}

/* dilation = "auto": the run's dilation comes from a probe of its first
 * compute commands (app/scenario.c); a rerun at the chosen dilation keeps
 * the scenario's "auto" without a note. */
static void apply_auto_dilation(lua_State *L, struct hn_runtime *rt, const char *name)
{
    char msg[512];
    enum run_dilation_outcome outcome =
        run_name_dilation_auto(rt->run, any_network_started(rt), name, msg, sizeof msg);
    if (outcome == RUN_DILATION_SET && !rt->run->dilation_reason)
        overload_probe_arm(rt->overload, rt->dilation_probe, rt->dilation_probe_ctx);
    report_dilation(L, rt, outcome, msg);
}

/* Option `field` of the table at 1 as a dilation, 1..HN_DILATION_MAX;
 * raises naming the network and the value otherwise. */
static double dilation_option(lua_State *L, const char *field, const char *name)
{
    double d = lnet_opt_number(L, 1, field, 1, "hn.network");
    char asked[32]; /* luaL_error has no %g */
    snprintf(asked, sizeof asked, "%g", d);
    if (!(d >= 1 && d <= HN_DILATION_MAX))
        luaL_error(L, "network '%s': %s must be a number from 1 to %d, got %s", name, field,
                   HN_DILATION_MAX, asked);
    return d;
}

/* dilation_max = M: the most an "auto" dilation may choose (app/scenario.c
 * cuts a larger need to it); --dilation-max wins. */
static void apply_dilation_max(lua_State *L, struct hn_runtime *rt, const char *name)
{
    int type = lua_getfield(L, 1, "dilation_max");
    lua_pop(L, 1);
    if (type == LUA_TNIL) return;
    double m = dilation_option(L, "dilation_max", name);
    char msg[512];
    enum run_dilation_outcome outcome =
        run_name_dilation_max(rt->run, m, any_network_started(rt), name, msg, sizeof msg);
    if (outcome == RUN_DILATION_CLI_WINS) hn_logf(rt, "%s", msg);
    if (outcome == RUN_DILATION_CONFLICT) luaL_error(L, "%s", msg);
}

/* dilation = D: the run's clock, shared by every network. --dilation wins;
 * otherwise the first network that names one sets it, before any starts. */
static void apply_dilation(lua_State *L, struct hn_runtime *rt, const char *name)
{
    int type = lua_getfield(L, 1, "dilation");
    bool is_auto = type == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0;
    lua_pop(L, 1);
    if (type == LUA_TNIL) return;
    if (is_auto) {
        apply_auto_dilation(L, rt, name);
        return;
    }
    double d = dilation_option(L, "dilation", name);
    char msg[512];
    report_dilation(
        L, rt, run_name_dilation(rt->run, d, any_network_started(rt), name, msg, sizeof msg), msg);
}

static int l_network_new(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    if (lua_isnoneornil(L, 1)) lua_newtable(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lnet_check_options(L, 1, network_options, "hn.network");
    const char *name = lnet_opt_string(L, 1, "name", "net", "hn.network");
    const char *backend = lnet_opt_string(L, 1, "backend", "auto", "hn.network");
    double seed = lnet_opt_number(L, 1, "seed", 1, "hn.network");
    if (seed < 0 || seed != (double)(long long)seed)
        return luaL_error(L, "network '%s': seed must be a non-negative integer, got %f", name,
                          seed);
    if (rt->run->backend_override) backend = rt->run->backend_override;
    apply_dilation(L, rt, name);
    apply_dilation_max(L, rt, name);
    char err[256];
    enum topo_backend b;
    if (topo_backend_parse(backend, &b, err, sizeof err) < 0)
        return luaL_error(L, "network '%s': %s", name, err);
    struct topo_tcp tcp = {0};
    char what[64];
    snprintf(what, sizeof what, "network '%s'", name);
    read_tcp_options(L, 1, &tcp, what); /* before anything is allocated: it may raise */
    struct topo_machines machines = {0};
    const char *hosts = rt->run->hosts_override;
    if (!hosts) hosts = lnet_opt_string(L, 1, "hosts", NULL, "hn.network");
    lnet_load_hosts(L, rt, name, hosts, &machines); /* the last that may raise before allocating */
    struct l_network **handle = lua_newuserdatauv(L, sizeof *handle, 0);
    *handle = NULL;
    luaL_setmetatable(L, NETWORK_MT);
    struct l_network *net = calloc(1, sizeof *net);
    if (!net) {
        topo_machines_free(&machines);
        return luaL_error(L, "network '%s': out of memory", name);
    }
    net->machines = machines; /* owned by net from here */
    net->topo = topo_network_new(name, b, (uint64_t)seed, err, sizeof err);
    if (!net->topo) {
        topo_machines_free(&net->machines);
        free(net);
        return luaL_error(L, "%s", err);
    }
    const char *addr_base = lnet_opt_string(L, 1, "addr_base", NULL, "hn.network");
    if (addr_base && b == TOPO_BACKEND_NONE) /* said, not silently dropped */
        hn_logf(rt,
                "network '%s': addr_base '%s' is not used by backend none (its peers get "
                "loopback addresses)",
                name, addr_base);
    if (addr_base && topo_set_addr_base(net->topo, addr_base, err, sizeof err) < 0) {
        topo_machines_free(&net->machines);
        topo_network_free(net->topo);
        free(net);
        return luaL_error(L, "%s", err);
    }
    /* The kernel's probe, off the loop, while the scenario describes the
     * network: its start then finds it done (controller/host_probe.h). */
    if (b != TOPO_BACKEND_NONE && !rt->draw) host_probe_begin(rt->loop, HOST_PROBE_KERNEL);
    net->tcp = tcp;
    net->rt = rt;
    net->self_ref = LUA_NOREF;
    net->listeners_ref = LUA_NOREF;
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

static const char *const node_options[] = {"tier", "cpu",     "speed", "threads", "device",
                                           "tcp",  "profile", "host",  NULL};

/* profile = a built-in name or a .profile file: read now, so that a bad one
 * is an error at the node's line naming the node and the profile. */
static void read_node_profile(lua_State *L, int i, struct topo_node *n, const char *what)
{
    const char *name = lnet_opt_string(L, i, "profile", "", what);
    if (!name[0]) return;
    struct device_profile *p;
    char err[512];
    if (strlen(name) >= sizeof n->profile)
        luaL_error(L, "%s: profile '%.40s...' is too long a name", what, name);
    if (profile_lookup(name, &p, err, sizeof err) != 0)
        luaL_error(L, "%s: profile '%s': %s", what, name, err);
    profile_free(p);
    snprintf(n->profile, sizeof n->profile, "%s", name);
}

static void read_node_options(lua_State *L, int i, struct topo_node *n)
{
    char what[64];
    snprintf(what, sizeof what, "node '%s'", n->name);
    lnet_check_options(L, i, node_options, what);
    snprintf(n->tier, sizeof n->tier, "%s", lnet_opt_string(L, i, "tier", "", what));
    n->cpu = lnet_opt_number(L, i, "cpu", 0, what);
    n->speed = lnet_opt_number(L, i, "speed", 1, what);
    double threads = lnet_opt_number(L, i, "threads", 1, what);
    const char *device = lnet_opt_string(L, i, "device", "cpu", what);
    if (!(n->cpu >= 0 && n->cpu <= 4096)) /* 0: no limit; emu/cgroup.c's range */
        luaL_error(L, "%s: cpu must be > 0 (a share of one core) and at most 4096, got %f", what,
                   n->cpu);
    if (!(n->speed > 0)) luaL_error(L, "%s: speed must be > 0, got %f", what, n->speed);
    if (threads < 1 || threads > 256 || threads != (int)threads)
        luaL_error(L, "%s: threads must be an integer from 1 to 256, got %f", what, threads);
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        luaL_error(L, "%s: device must be 'cpu' or 'cuda', got '%s'", what, device);
    n->threads = (int)threads;
    snprintf(n->device, sizeof n->device, "%s", device);
    if (n->kind == TOPO_NODE_SWITCH) {
        lua_getfield(L, i, "tcp");
        bool has_tcp = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (has_tcp) luaL_error(L, "%s: a switch has no TCP: tcp is for hosts", what);
    }
    read_tcp_options(L, i, &n->tcp, what);
    read_node_profile(L, i, n, what);
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
    if (!netlife_defined(net->life))
        return luaL_error(L, "network '%s': cannot add node '%s': network is %s", net->topo->name,
                          name, lnet_state_word(net));
    char err[256];
    int index = topo_node_add(net->topo, name, kind, err, sizeof err);
    if (index < 0) return luaL_error(L, "%s", err);
    if (kind == TOPO_NODE_HOST) net->topo->nodes[index].tcp = net->tcp;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        read_node_options(L, 3, &net->topo->nodes[index]);
        char what[64];
        snprintf(what, sizeof what, "node '%s'", name);
        lnet_pin_node(L, net, &net->topo->nodes[index], lnet_opt_string(L, 3, "host", NULL, what));
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

/* net:link(a, b, {bw=, delay=, jitter=, loss=, queue=, reorder=, parallel=}) -> link */
static int l_net_link(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    struct l_node *a = check_node_of(L, 2, net), *b = check_node_of(L, 3, net);
    char what[96];
    snprintf(what, sizeof what, "link %s-%s", net->topo->nodes[a->index].name,
             net->topo->nodes[b->index].name);
    if (!netlife_defined(net->life))
        return luaL_error(L, "network '%s': cannot add %s: network is %s", net->topo->name, what,
                          lnet_state_word(net));
    struct topo_link_params params = {0};
    bool parallel = false;
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lnet_read_link_params(L, 4, &params, what, true);
        lua_getfield(L, 4, "parallel");
        if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
            return luaL_error(L, "%s: parallel must be true or false", what);
        parallel = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    char err[256];
    int index =
        parallel ? topo_link_add_parallel(net->topo, a->index, b->index, &params, err, sizeof err)
                 : topo_link_add(net->topo, a->index, b->index, &params, err, sizeof err);
    if (index < 0) return luaL_error(L, "network '%s': %s", net->topo->name, err);
    lnet_push_link(L, 1, net, index);
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
    if (n < 0 || (size_t)n > cap) {
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

/* ---- start ---- */

static void wake_stop_waiters(struct l_network *net)
{
    task_token *waiters = net->stop_waiters;
    size_t n = net->n_stop_waiters;
    net->stop_waiters = NULL;
    net->n_stop_waiters = 0;
    for (size_t i = 0; i < n; i++)
        sched_wake(net->rt->sched, waiters[i], NULL, NULL);
    free(waiters);
}

/* The engine's report (controller/netlife.h): the tasks waiting on the
 * network wake (the state and any error stay the engine's to say). */
static void on_transition(void *ctx, enum netlife_state from, enum netlife_state to,
                          const struct net_error *error)
{
    (void)from;
    struct l_network *net = ctx;
    struct hn_runtime *rt = net->rt;
    if (error && error->code == NET_ERR_ENVIRONMENT) rt->env_failure = true;
    if (net->start_waiting && (to == NETLIFE_RUNNING || error)) {
        net->start_waiting = false;
        sched_wake(rt->sched, net->start_tok, NULL, NULL);
    }
    if (to == NETLIFE_STOPPED) wake_stop_waiters(net);
}

/* A peer that ends while the network runs: a node of this machine ends by
 * node:kill() (which tells the listeners itself) or by a fault of its own,
 * which its next call reports. A node of another machine not killed from
 * here (node:kill() asks its agent, and tells the listeners itself) ends
 * by its machine's doing (the agent lost, or the peer died there): the
 * algorithms hear of it as of a killed node, with the cause naming the
 * machine, so an asynchronous one goes on without it. */
static void on_peer_exit(void *ctx, int node, int wait_status)
{
    (void)wait_status;
    struct l_network *net = ctx;
    char here[256];
    if (!netlife_running(net->life)) return;
    struct netrun *nr = netlife_netrun(net->life);
    if (!nr || netrun_peer_killed(nr, node) ||
        netrun_node_here(nr, node, "", here, sizeof here) == 0)
        return;
    struct peer_client *pc = netlife_peer(net->life, node);
    const char *why = pc ? peer_client_gone_reason(pc) : "";
    hn_logf(net->rt, "node '%s': lost: %s", net->topo->nodes[node].name,
            why[0] ? why : "its peer ended on its machine");
    lnet_fire_lost(net, node, why[0] ? why : "its peer ended on its machine");
}

static int start_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status, (void)ctx;
    struct l_network *net = check_network(L, 1);
    const struct net_error *e = netlife_start_error(net->life);
    if (!e) return 0;
    if (netlife_defined(net->life)) { /* the build failed: nothing is left */
        luaL_unref(L, LUA_REGISTRYINDEX, net->self_ref);
        net->self_ref = LUA_NOREF;
        return luaL_error(L, "%s", e->message);
    }
    if (e->code == NET_ERR_SCENARIO || e->code == NET_ERR_ENVIRONMENT)
        return luaL_error(L, "%s", e->message);
    return luaL_error(L, "network '%s': start failed: %s", net->topo->name, e->message);
}

/* hiernet draw: the network is drawn instead of started, and the scenario
 * ends there (its task stays parked; the runner sees rt->drawn). */
static int draw_instead(lua_State *L, struct l_network *net)
{
    struct hn_runtime *rt = net->rt;
    char err[512];
    if (lnet_place_or_draw(net, err, sizeof err) < 0) return luaL_error(L, "%s", err);
    rt->drawn = true;
    ev_break(rt->loop, EVBREAK_ALL);
    sched_suspend(L);
    return lua_yield(L, 0);
}

/* The seconds of environment variable name, fallback when unset or empty,
 * -1 when it is not a positive number (check_env_seconds refuses that). */
static double env_seconds(const char *name, double fallback)
{
    const char *env = getenv(name);
    double v;
    if (!env || !*env) return fallback;
    return number_parse_positive(env, &v) == 0 ? v : -1;
}

/* A deadline variable that is set must be a number of seconds > 0: a typo
 * is refused at the start, not silently replaced by the default. */
static void check_env_seconds(lua_State *L, const struct l_network *net, const char *name)
{
    if (env_seconds(name, 1) < 0)
        luaL_error(L, "network '%s': start: %s='%s' is not a number of seconds above 0",
                   net->topo->name, name, getenv(name));
}

static double start_timeout_s(void)
{
    return env_seconds("HIERNET_START_TIMEOUT", START_DEADLINE_S);
}

static struct netlife *network_life(struct l_network *net)
{
    if (!net->life) {
        struct netlife_hooks hooks = {on_transition, on_peer_exit, net};
        net->life = netlife_new(&net->rt->life, net->topo, &hooks);
    }
    return net->life;
}

/* The engine builds (over the machines of spread, which it takes, when
 * not NULL); the task waits for the start's end. Network at index 1. */
static int start_engine(lua_State *L, struct l_network *net, const struct netrun_spread *spread)
{
    struct hn_runtime *rt = net->rt;
    net->topo->dilation = rt->run->dilation;
    if (!network_life(net)) return luaL_error(L, "network '%s': out of memory", net->topo->name);
    struct netlife_options opts = {
        .start_timeout_s = start_timeout_s(), .stop_timeout_s = STOP_DEADLINE_S, .spread = spread};
    struct net_error error;
    if (netlife_start(net->life, &opts, &error) < 0) {
        rt->env_failure |= error.code == NET_ERR_ENVIRONMENT;
        return luaL_error(L, "%s", error.message);
    }
    lua_pushvalue(L, 1);
    net->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    net->start_waiting = true;
    net->start_tok = sched_suspend(L);
    return lua_yieldk(L, 0, 0, start_k);
}

/* A network over machines starts once: its agents, placement and run.json
 * records are made for one start (a second would need them again). The
 * line says so, and why the first start ended. */
static int refuse_second_spread_start(lua_State *L, struct l_network *net)
{
    const struct net_error *e = net->life ? netlife_start_error(net->life) : NULL;
    if (e)
        return luaL_error(L,
                          "network '%s': start: a network over machines starts once, and its "
                          "first start failed (%s): starting it again is not available yet; run "
                          "the scenario again once that is fixed",
                          net->topo->name, e->message);
    return luaL_error(L,
                      "network '%s': start: a network over machines starts once, and it was "
                      "started and stopped: starting it again is not available yet",
                      net->topo->name);
}

/* net:start(): the engine builds, spawns and shakes hands from the loop;
 * this task waits (other tasks run) and raises its error, once. */
static int l_net_start(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    struct hn_runtime *rt = net->rt;
    lua_settop(L, 1);
    check_env_seconds(L, net, "HIERNET_START_TIMEOUT");
    check_env_seconds(L, net, "HIERNET_BUILD_TIMEOUT");
    if (!netlife_defined(net->life))
        return luaL_error(L, "network '%s': start: network is %s", net->topo->name,
                          lnet_state_word(net));
    if (net->topo->n_nodes == 0)
        return luaL_error(L, "network '%s': start: the network has no nodes", net->topo->name);
    if (rt->draw) return draw_instead(L, net);
    char err[512];
    if (net->spread) return refuse_second_spread_start(L, net);
    int placed = net->life ? 0 : lnet_place_or_draw(net, err, sizeof err); /* first start only */
    if (placed < 0) return luaL_error(L, "%s", err);
    if (placed > 0) return lnet_start_placed(L, net, err);
    return start_engine(L, net, NULL);
}

int lnet_start_spread(lua_State *L, struct l_network *net, const struct agent_client_options *o,
                      const char *why)
{
    /* HIERNET_BUILD_TIMEOUT (seconds) overrides the parts' build deadline */
    struct netrun_spread spread = {
        &net->machines,     o,  why, env_seconds("HIERNET_BUILD_TIMEOUT", NETRUN_BUILD_TIMEOUT_S),
        lnet_agents_record, net};
    net->spread = true;
    return start_engine(L, net, &spread);
}

/* ---- stop ---- */

/* The engine stops the network (its programs first). True once stopped. */
static bool stop_begin(struct l_network *net)
{
    if (!net->life) return true;
    return netlife_stop(net->life);
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
    lua_pushstring(L, lnet_state_word(check_network(L, 1)));
    return 1;
}

static int l_net_index(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    const char *key = luaL_checkstring(L, 2);
    bool built = net->life && netlife_netrun(net->life); /* backend_used and dilation are set */
    if (strcmp(key, "name") == 0) {
        lua_pushstring(L, net->topo->name);
    } else if (strcmp(key, "backend") == 0) {
        /* the backend start chose once started (auto resolves), else the one asked for */
        lua_pushstring(L, topo_backend_name(built ? net->topo->backend_used : net->topo->backend));
    } else if (strcmp(key, "seed") == 0) {
        lua_pushinteger(L, (lua_Integer)net->topo->seed);
    } else if (strcmp(key, "dilation") == 0) {
        lua_pushnumber(L, built ? net->topo->dilation : net->rt->run->dilation);
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

/* The kernel's minimum RTO (TCP_RTO_MIN), real time. */
#define KERNEL_RTO_MIN_S 0.2

/* net:tcp() -> {node name = {retrans=, rtos=, fast_retrans=, lost_retrans=,
 * recoveries=, rto_min_s=}}: every running host's TCP counters now,
 * cumulative since its namespace was made (controller/tcp_counters.h), and
 * the shortest stall an RTO costs it in emulated seconds (its rto_min, or
 * the kernel's 200 ms of real time). */
static int l_net_tcp(lua_State *L)
{
    struct l_network *net = check_network(L, 1);
    if (!netlife_running(net->life))
        return luaL_error(L, "network '%s': tcp: network is %s", net->topo->name,
                          lnet_state_word(net));
    if (net->topo->backend_used == TOPO_BACKEND_NONE)
        return luaL_error(L,
                          "network '%s': tcp: backend none has no per-node TCP counters (its "
                          "peers share the host's stack)",
                          net->topo->name);
    static const char *const names[] = {TCP_COUNTER_NAMES};
    lua_newtable(L);
    for (size_t i = 0; i < net->topo->n_nodes; i++) {
        struct tcp_counters c;
        char err[256];
        if (net->topo->nodes[i].kind != TOPO_NODE_HOST) continue;
        int rc = netlife_tcp_counters(net->life, (int)i, &c, err, sizeof err);
        if (rc == -1)
            return luaL_error(L, "network '%s': tcp: node '%s': %s", net->topo->name,
                              net->topo->nodes[i].name, err);
        if (rc < 0) continue; /* its peer is not running this moment */
        uint64_t v[TCP_COUNTERS];
        tcp_counters_values(&c, v);
        lua_createtable(L, 0, TCP_COUNTERS + 1);
        for (size_t k = 0; k < TCP_COUNTERS; k++) {
            lua_pushinteger(L, (lua_Integer)v[k]);
            lua_setfield(L, -2, names[k]);
        }
        uint64_t rto_min_ns = net->topo->nodes[i].tcp.rto_min_ns;
        double d = net->topo->dilation >= 1 ? net->topo->dilation : 1;
        lua_pushnumber(L, rto_min_ns ? (double)rto_min_ns / 1e9 : KERNEL_RTO_MIN_S / d);
        lua_setfield(L, -2, "rto_min_s");
        lua_setfield(L, -2, net->topo->nodes[i].name);
    }
    return 1;
}

static const luaL_Reg network_methods[] = {
    {"tcp", l_net_tcp},     {"node", l_net_node},   {"switch", l_net_switch},
    {"link", l_net_link},   {"route", l_net_route}, {"nodes", l_net_nodes},
    {"find", l_net_find},   {"start", l_net_start}, {"stop", l_net_stop},
    {"state", l_net_state}, {NULL, NULL},
};

static void create_network_meta(lua_State *L)
{
    luaL_newmetatable(L, NETWORK_MT);
    luaL_newlib(L, network_methods);
    lnet_faults_methods(L);
    lnet_traffic_methods(L);
    lua_pushcclosure(L, l_net_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_net_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

void l_network_register(lua_State *L)
{
    create_network_meta(L);
    lnet_create_node_meta(L);
    lnet_create_link_meta(L);
    lnet_create_proc_meta(L);
    lua_pushcfunction(L, l_network_new);
    lua_setfield(L, -2, "network");
}

/* ---- teardown (outside tasks) ---- */

void l_network_draw_all(struct hn_runtime *rt)
{
    char err[512];
    for (struct l_network *net = rt->networks; net; net = net->next)
        if (lnet_place_or_draw(net, err, sizeof err) < 0) fprintf(stderr, "hiernet: %s\n", err);
}

void l_network_stop_all(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next)
        stop_begin(net);
}

bool l_network_all_exited(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next)
        if (net->life && !netlife_exited(net->life)) return false;
    return true;
}

void l_network_release_begin(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next) {
        if (net->life) netlife_release(net->life);
    }
}

bool l_network_all_released(struct hn_runtime *rt)
{
    for (struct l_network *net = rt->networks; net; net = net->next)
        if (net->life && !netlife_released(net->life)) return false;
    return true;
}

void l_network_release_all(struct hn_runtime *rt)
{
    while (rt->networks) {
        struct l_network *net = rt->networks;
        rt->networks = net->next;
        netlife_free(net->life); /* kills survivors and programs, releases the topology */
        net->life = NULL;
        free(net->stop_waiters);
        lnet_agents_free(net);
        luaL_unref(rt->L, LUA_REGISTRYINDEX, net->self_ref);
        luaL_unref(rt->L, LUA_REGISTRYINDEX, net->nodes_ref);
        luaL_unref(rt->L, LUA_REGISTRYINDEX, net->listeners_ref);
        topo_network_free(net->topo);
        topo_machines_free(&net->machines);
        net->topo = NULL;
        free(net);
    }
}
