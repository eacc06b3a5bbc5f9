/* l_dot.c — core._topology_dot(network): a network as run.json describes
 * it ({name=, nodes={{name=, kind=, tier=, cpu=, speed=}, ...}, links={{a=,
 * b=, bw_bps=, delay_us=, jitter_us=, loss=, queue_packets=, queue_bytes=},
 * ...}}) drawn as Graphviz DOT by the same code as `hiernet draw`
 * (topo/dot.c), for the run report. Returns the DOT text, or nil and a
 * message naming the node or link at fault. Owns the model it rebuilds
 * only for the duration of the call. */
#include "lua/l_host.h"

#include "topo/dot.h"
#include "topo/network.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A non-negative finite number field of the table on top, or 0 when absent. */
static int number_field(lua_State *L, const char *key, double *out)
{
    lua_getfield(L, -1, key);
    int ok = lua_isnil(L, -1) || lua_isnumber(L, -1);
    *out = ok ? lua_tonumber(L, -1) : 0;
    lua_pop(L, 1);
    return ok && isfinite(*out) && *out >= 0 && *out < 1e18 ? 0 : -1;
}

static const char *string_field(lua_State *L, const char *key)
{
    lua_getfield(L, -1, key);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1); /* the string stays alive in the table */
    return s;
}

/* The node table on top of the stack. */
static int add_node(lua_State *L, struct topo_network *net, char *err, size_t errlen)
{
    const char *name = string_field(L, "name"), *kind = string_field(L, "kind");
    const char *tier = string_field(L, "tier");
    double cpu, speed;
    if (!name) return snprintf(err, errlen, "a node has no name"), -1;
    bool sw = kind && strcmp(kind, "switch") == 0;
    int i = topo_node_add(net, name, sw ? TOPO_NODE_SWITCH : TOPO_NODE_HOST, err, errlen);
    if (i < 0) return -1;
    if (number_field(L, "cpu", &cpu) < 0 || number_field(L, "speed", &speed) < 0)
        return snprintf(err, errlen, "node '%s': bad cpu or speed", name), -1;
    struct topo_node *n = &net->nodes[i];
    snprintf(n->tier, sizeof n->tier, "%s", tier ? tier : "");
    n->cpu = cpu;
    if (speed > 0) n->speed = speed;
    return 0;
}

/* The link table on top of the stack. */
static int add_link(lua_State *L, struct topo_network *net, char *err, size_t errlen)
{
    const char *a = string_field(L, "a"), *b = string_field(L, "b");
    int ia = a ? topo_node_find(net, a) : -1, ib = b ? topo_node_find(net, b) : -1;
    if (ia < 0 || ib < 0)
        return snprintf(err, errlen, "link %s-%s: no such node", a ? a : "?", b ? b : "?"), -1;
    double bw, delay, jitter, loss, qp, qb;
    if (number_field(L, "bw_bps", &bw) < 0 || number_field(L, "delay_us", &delay) < 0 ||
        number_field(L, "jitter_us", &jitter) < 0 || number_field(L, "loss", &loss) < 0 ||
        number_field(L, "queue_packets", &qp) < 0 || number_field(L, "queue_bytes", &qb) < 0 ||
        loss > 1)
        return snprintf(err, errlen, "link %s-%s: a parameter is not a valid number", a, b), -1;
    struct topo_link_params p = {0};
    p.rate_bps = (uint64_t)bw;
    p.delay_ns = (uint64_t)llround(delay * 1e3);
    p.jitter_ns = (uint64_t)llround(jitter * 1e3);
    p.loss = loss;
    p.queue.packets = (uint64_t)qp;
    p.queue.bytes = (uint64_t)qb;
    /* A run's parallel links (run.json "parallel") come back as they were. */
    return topo_link_add_parallel(net, ia, ib, &p, err, errlen) < 0 ? -1 : 0;
}

/* Calls add for every element of the array field `key` of the table on top. */
static int each(lua_State *L, struct topo_network *net, const char *key,
                int (*add)(lua_State *, struct topo_network *, char *, size_t), char *err,
                size_t errlen)
{
    lua_getfield(L, -1, key);
    int rc = 0;
    if (lua_istable(L, -1)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n && rc == 0; i++) {
            lua_rawgeti(L, -1, i);
            rc = lua_istable(L, -1)
                     ? add(L, net, err, errlen)
                     : (snprintf(err, errlen, "%s[%d] is not an object", key, (int)i), -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    return rc;
}

static int l_topology_dot(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    char err[256];
    const char *name = string_field(L, "name");
    struct topo_network *net =
        topo_network_new(name ? name : "net", TOPO_BACKEND_NONE, 0, err, sizeof err);
    char *text = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int rc = -1;
    if (net && each(L, net, "nodes", add_node, err, sizeof err) == 0 &&
        each(L, net, "links", add_link, err, sizeof err) == 0) {
        f = open_memstream(&text, &len);
        if (f) {
            topo_network_write_dot(net, f);
            rc = fclose(f) == 0 ? 0 : -1;
        }
        if (rc < 0) snprintf(err, sizeof err, "out of memory");
    }
    topo_network_free(net);
    if (rc < 0) {
        free(text);
        lua_pushnil(L);
        lua_pushfstring(L, "network '%s': %s", name ? name : "?", err);
        return 2;
    }
    lua_pushlstring(L, text, len);
    free(text);
    return 1;
}

void l_dot_register(lua_State *L)
{
    lua_pushcfunction(L, l_topology_dot);
    lua_setfield(L, -2, "_topology_dot");
}
