/* l_link.c — link handles: l:set{...}, l:down(), l:up(), l:stats(), l.a, l.b,
 * l.name. The kernel backend applies changes at once; the user backend sends
 * them to hiernet-linkd and the calling task waits for its reply
 * (controller/netrun_changes.c decides which). */
#include "lua/l_fields.h"
#include "lua/l_host.h"
#include "lua/l_net.h"

#include "controller/trace_player.h"
#include "lua/runtime.h"
#include "proto/link_keys.h"
#include "topo/shape.h"
#include "topo/trace.h"
#include "topo/units.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The text keys topo parses (proto/link_keys.h), then reorder and gilbert. */
#define TEXT_KEY(key, field, parse, unit) #key,
static const char *const link_options[] = {TOPO_LINK_TEXT_KEYS(TEXT_KEY) LINK_KEY(reorder),
                                           "gilbert", NULL};
static const char *const link_add_options[] = {TOPO_LINK_TEXT_KEYS(TEXT_KEY) LINK_KEY(reorder),
                                               "gilbert", "parallel", NULL};
#undef TEXT_KEY

/* gilbert = {p=, r=, h=1, k=0}: probabilities in [0, 1] (see topo/network.h). */
static void read_gilbert(lua_State *L, int i, struct topo_link_params *p, const char *what)
{
    static const char *const keys[] = {"p", "r", "h", "k", NULL};
    double *fields[] = {&p->ge_p, &p->ge_r, &p->ge_h, &p->ge_k};
    double defaults[] = {-1, -1, 0, 1}; /* a packet is lost in the bad state, kept in the good */
    if (!lua_istable(L, i)) luaL_error(L, "%s: gilbert must be a table {p=, r=, h=, k=}", what);
    lnet_check_options(L, i, keys, what);
    for (int f = 0; keys[f]; f++) {
        *fields[f] = lnet_opt_number(L, i, keys[f], defaults[f], what);
        if (*fields[f] < 0 || *fields[f] > 1)
            luaL_error(L, "%s: gilbert.%s must be a probability in [0, 1]%s", what, keys[f],
                       f < 2 ? " (p and r are required)" : "");
    }
    p->gilbert = true;
}

/* A queue of bandwidth-delay products becomes bytes from the link's rate
 * and round trip as they now are (so link:set{bw=} resizes it). */
static void resolve_bdp_queue(lua_State *L, struct topo_link_params *p, const char *what)
{
    if (!(p->queue.bdp > 0)) return;
    char asked[32];
    snprintf(asked, sizeof asked, "%gbdp", p->queue.bdp);
    if (!p->rate_bps)
        luaL_error(L,
                   "%s: queue '%s' needs the link's bw (an unlimited link has no "
                   "bandwidth-delay product)",
                   what, asked);
    uint64_t bytes =
        topo_shape_bdp_bytes(p->queue.bdp, p->rate_bps, 2 * (p->delay_ns + p->jitter_ns),
                             TOPO_SHAPE_DEFAULT_MTU + TOPO_SHAPE_ETH_HLEN);
    if (bytes > TOPO_UNITS_QUEUE_MAX)
        luaL_error(L, "%s: queue '%s' is %llu bytes, above the maximum of %llu", what, asked,
                   (unsigned long long)bytes, (unsigned long long)TOPO_UNITS_QUEUE_MAX);
    p->queue.bytes = bytes;
    p->queue.packets = 0;
}

/* Reads bw/delay/jitter/loss/queue/ecn_threshold (strings with units, or
 * numbers: bit/s, seconds, a fraction, packets), reorder and gilbert from
 * the table at index i. */
void lnet_read_link_params(lua_State *L, int i, struct topo_link_params *p, const char *what,
                           bool adding)
{
    lnet_check_options(L, i, adding ? link_add_options : link_options, what);
    char err[256];
    for (const char *const *key = link_options; *key; key++) {
        lua_getfield(L, i, *key);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        if (strcmp(*key, "gilbert") == 0) {
            read_gilbert(L, lua_gettop(L), p, what);
        } else if (strcmp(*key, LINK_KEY(reorder)) == 0) {
            if (!lua_isboolean(L, -1)) luaL_error(L, "%s: reorder must be true or false", what);
            p->reorder = lua_toboolean(L, -1);
        } else {
            if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
                luaL_error(L, "%s: %s must be a string with a unit or a number, got %s", what, *key,
                           luaL_typename(L, -1));
            if (topo_link_param_set(p, *key, lua_tostring(L, -1), err, sizeof err) < 0)
                luaL_error(L, "%s: %s: %s", what, *key, err);
        }
        lua_pop(L, 1);
    }
    resolve_bdp_queue(L, p, what);
}

static struct l_link *check_link(lua_State *L, int i)
{
    return luaL_checkudata(L, i, LINK_MT);
}

static const char *link_name(struct l_link *h, char *buf, size_t len)
{
    topo_link_describe(h->net->topo, &h->net->topo->links[h->index], buf, len);
    return buf;
}

static void check_link_running(lua_State *L, struct l_link *h, const char *method)
{
    char name[96];
    if (!netlife_running(h->net->life))
        luaL_error(L, "link %s: %s: network '%s' is %s", link_name(h, name, sizeof name), method,
                   h->net->topo->name, lnet_state_word(h->net));
}

/* A link request in flight: its task waits for the reply (the engine
 * updates the model once the change took effect, netlife_link_change). */
static void on_link_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct call *c = ctx;
    struct reply r = {error, result, c};
    sched_wake(c->sched, c->tok, lnet_push_reply, &r);
    free(c);
}

static int link_call_k(lua_State *L, int status, lua_KContext ctx)
{
    if (!lua_toboolean(L, -2)) return luaL_error(L, "%s", lua_tostring(L, -1));
    return ctx == NETLIFE_LINK_STATS ? 1 : 0;
}

/* Runs one link change, the task waiting for its end: off the loop on
 * the kernel backend, linkd's reply on the user backend (netrun.h). */
static int link_request(lua_State *L, struct l_link *h, enum netlife_link_op op,
                        const struct topo_link_params *params)
{
    static const char *const names[] = {"set", "down", "up", "stats"};
    char err[512];
    check_link_running(L, h, names[op]);
    struct call *c = calloc(1, sizeof *c);
    if (!c) return luaL_error(L, "link %d: out of memory", h->index);
    *c = (struct call){h->net->rt->sched, {0, 0}, "link", "", "", NULL, -1};
    link_name(h, c->node, sizeof c->node);
    snprintf(c->method, sizeof c->method, "%s", names[op]);
    int rc =
        netlife_link_change(h->net->life, h->index, op, params, on_link_reply, c, err, sizeof err);
    if (rc <= 0) {
        char what[sizeof c->node];
        snprintf(what, sizeof what, "%s", c->node);
        free(c);
        /* netrun, the kernel layer and linkd say the cause: named here, once. */
        if (rc < 0) return luaL_error(L, "link %s: %s: %s", what, names[op], err);
        return 0;
    }
    c->tok = sched_suspend(L);
    return lua_yieldk(L, 0, op, link_call_k);
}

/* link:set{bw=, delay=, jitter=, loss=, queue=}: unnamed parameters keep their values. */
static int l_link_set(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    char name[96], what[128];
    snprintf(what, sizeof what, "link %s", link_name(h, name, sizeof name));
    struct topo_link_params params = h->net->topo->links[h->index].params;
    lnet_read_link_params(L, 2, &params, what, false);
    /* The kernel backend's qdiscs cannot mark; net:start() refuses it the same way. */
    if (h->net->topo->backend_used == TOPO_BACKEND_KERNEL &&
        (params.ecn_threshold.packets || params.ecn_threshold.bytes))
        return luaL_error(L,
                          "%s: ecn_threshold needs backend 'user': the kernel backend does not "
                          "mark ECN",
                          what);
    return link_request(L, h, NETLIFE_LINK_SET, &params);
}

static int l_link_down(lua_State *L)
{
    return link_request(L, check_link(L, 1), NETLIFE_LINK_DOWN, NULL);
}

static int l_link_up(lua_State *L)
{
    return link_request(L, check_link(L, 1), NETLIFE_LINK_UP, NULL);
}

/* link:stats() -> {up=, ab={packets=, bytes=, delivered=, drops_loss=, ...}, ba={...}} */
static int l_link_stats(lua_State *L)
{
    return link_request(L, check_link(L, 1), NETLIFE_LINK_STATS, NULL);
}

/* ---- link:trace{} ---- */

/* A time option ("100ms" or seconds) in seconds, dflt when absent. */
static double opt_seconds(lua_State *L, int i, const char *key, double dflt, const char *what)
{
    lua_getfield(L, i, key);
    if (lua_isnil(L, -1)) return lua_pop(L, 1), dflt;
    uint64_t ns = 0;
    char err[160];
    const char *text = lua_tostring(L, -1);
    if (!text || topo_units_parse_time(text, &ns, err, sizeof err) < 0 || ns == 0)
        luaL_error(L, "%s: trace: %s must be a positive time such as \"100ms\"", what, key);
    lua_pop(L, 1);
    return (double)ns / 1e9;
}

static int opt_choice(lua_State *L, int i, const char *key, const char *const *names, int dflt,
                      const char *what)
{
    const char *v = lnet_opt_string(L, i, key, NULL, what);
    if (!v) return dflt;
    for (int k = 0; names[k]; k++)
        if (strcmp(v, names[k]) == 0) return k;
    return luaL_error(L, "%s: trace: %s '%s' is not one of %s", what, key, v,
                      strcmp(key, "dir") == 0 ? "ab, ba, both" : "the documented values");
}

/* Whether option key of the table at idx is set. */
static bool has_option(lua_State *L, int idx, const char *key)
{
    bool set = lua_getfield(L, idx, key) != LUA_TNIL;
    lua_pop(L, 1);
    return set;
}

/* link:trace{file=, format="csv"|"mahimahi", interp="step"|"linear", loop=,
 * dir="both"|"ab"|"ba", step=, bin=}: the file is read and checked first
 * (a bad one is bad input, exit 2, on any backend), then played by the
 * engine (controller/trace_player.h) from now. */
static int l_link_trace(lua_State *L)
{
    static const char *const keys[] = {"file", "format", "interp", "loop",
                                       "dir",  "step",   "bin",    NULL};
    static const char *const formats[] = {"csv", "mahimahi", NULL};
    static const char *const interps[] = {"step", "linear", NULL};
    static const char *const dirs[] = {"ab", "ba", "both", NULL};
    struct l_link *h = check_link(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    char name[96], what[128], err[512];
    snprintf(what, sizeof what, "link %s", link_name(h, name, sizeof name));
    lnet_check_options(L, 2, keys, what);
    const char *file = lnet_opt_string(L, 2, "file", NULL, what);
    if (!file) return luaL_error(L, "%s: trace: file is required", what);
    int format = opt_choice(L, 2, "format", formats, 0, what);
    struct trace_player_opts o = {
        (enum topo_trace_interp)opt_choice(L, 2, "interp", interps, 0, what), false,
        opt_seconds(L, 2, "step", 0.1, what), 1};
    lua_getfield(L, 2, "loop");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
        return luaL_error(L, "%s: trace: loop must be true or false", what);
    o.loop = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int dir = opt_choice(L, 2, "dir", dirs, 2, what);
    double bin = opt_seconds(L, 2, "bin", 0.1, what);
    /* Each goes with one kind of trace: elsewhere it would be ignored. */
    if (o.interp != TOPO_TRACE_LINEAR && has_option(L, 2, "step"))
        return luaL_error(L, "%s: trace: step goes with interp = \"linear\"", what);
    if (strcmp(formats[format], "mahimahi") != 0 && has_option(L, 2, "bin"))
        return luaL_error(L, "%s: trace: bin goes with format = \"mahimahi\"", what);
    struct topo_trace trace;
    file = l_files_find(L, file);
    if (topo_trace_load(file, formats[format], bin, &trace, err, sizeof err) < 0) {
        hn_runtime(L)->bad_input = true;
        return luaL_error(L, "%s: trace: %s", what, err);
    }
    if (!netlife_running(h->net->life)) {
        topo_trace_free(&trace);
        check_link_running(L, h, "trace");
    }
    if (netlife_link_trace(h->net->life, h->index, dir, &trace, &o, err, sizeof err) < 0)
        return luaL_error(L, "%s: trace: %s", what, err);
    return 0;
}

/* link:trace_changes([dir]) -> {{t=, bw=, delay=, loss=}, ...}: what the
 * trace of direction "ab" (default) or "ba" applied so far, in trace time. */
static int l_link_trace_changes(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    const char *d = luaL_optstring(L, 2, "ab");
    if (strcmp(d, "ab") != 0 && strcmp(d, "ba") != 0)
        return luaL_error(L, "link:trace_changes: direction '%s' is neither ab nor ba", d);
    const struct topo_trace_sample *c = NULL;
    size_t n = netlife_link_trace_changes(h->net->life, h->index, d[0] == 'b', &c);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 0, 4);
        set_number(L, "t", c[i].t_s);
        set_integer(L, "bw", (lua_Integer)c[i].rate_bps);
        set_number(L, "delay", (double)c[i].delay_ns / 1e9);
        set_number(L, "loss", c[i].loss);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* A text key's field in base units, by its unit (proto/link_keys.h); a queue
 * only when one was set, under the key of its unit. */
#define PARAM_BPS(key, v) set_integer(L, key, v)
#define PARAM_TIME(key, v) set_number(L, key, (double)(v) / 1e9)
#define PARAM_FRACTION(key, v) set_number(L, key, v)
#define PARAM_QUEUE(key, q)                                                                        \
    do {                                                                                           \
        if ((q).packets) set_integer(L, key, (q).packets);                                         \
        if ((q).bytes) set_integer(L, LINK_KEY(queue_bytes), (q).bytes);                           \
        if ((q).bdp > 0) set_number(L, "queue_bdp", (q).bdp);                                      \
    } while (0)
#define PARAM_THRESHOLD(key, t)                                                                    \
    do {                                                                                           \
        if ((t).packets) set_integer(L, key, (t).packets);                                         \
        if ((t).bytes) set_integer(L, LINK_KEY(ecn_threshold_bytes), (t).bytes);                   \
    } while (0)
#define PARAM_FIELD(key, field, parse, unit) PARAM_##unit(#key, p->field);

/* link:params() -> {bw=bit/s, delay=s, jitter=s, loss=fraction, queue=packets |
 * queue_bytes=bytes, ecn_threshold=packets | ecn_threshold_bytes=bytes,
 * reorder=, gilbert={p=, r=, h=, k=}}: what the link emulates, in base
 * units (0 = not limited / none); the queue and threshold fields only when
 * one was set. */
static int l_link_params(lua_State *L)
{
    struct l_link *h = check_link(L, 1);
    const struct topo_link_params *p = &h->net->topo->links[h->index].params;
    lua_createtable(L, 0, 7);
    TOPO_LINK_TEXT_KEYS(PARAM_FIELD)
    lua_pushboolean(L, p->reorder);
    lua_setfield(L, -2, LINK_KEY(reorder));
    if (p->gilbert) {
        lua_createtable(L, 0, 4);
        set_number(L, "p", p->ge_p);
        set_number(L, "r", p->ge_r);
        set_number(L, "h", p->ge_h);
        set_number(L, "k", p->ge_k);
        lua_setfield(L, -2, "gilbert");
    }
    return 1;
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
    {"set", l_link_set},
    {"down", l_link_down},
    {"up", l_link_up},
    {"stats", l_link_stats},
    {"params", l_link_params},
    {"trace", l_link_trace},
    {"trace_changes", l_link_trace_changes},
    {NULL, NULL},
};

void lnet_create_link_meta(lua_State *L)
{
    luaL_newmetatable(L, LINK_MT);
    luaL_newlib(L, link_methods);
    lua_pushcclosure(L, l_link_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_link_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

void lnet_push_link(lua_State *L, int net_index, struct l_network *net, int index)
{
    struct l_link *h = lua_newuserdatauv(L, sizeof *h, 1);
    h->net = net;
    h->index = index;
    luaL_setmetatable(L, LINK_MT);
    lua_pushvalue(L, net_index); /* keeps the network alive while the link is */
    lua_setiuservalue(L, -2, 1);
}
