/* part_wire.c — a part's wire form (see part_wire.h). */
#include "topo/part_wire.h"

#include "common/quote.h"
#include "proto/msgmap.h"
#include "proto/protocol.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIRE_VERSION 1
#define ROUTE_FIELDS 6

/* ---- encoding ---- */

static void pack_queue(msgpack_packer *pk, const struct topo_units_queue *q)
{
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint64(pk, q->packets);
    msgpack_pack_uint64(pk, q->bytes);
    msgpack_pack_double(pk, q->bdp);
}

static bool pack_params(msgpack_packer *pk, const struct topo_link_params *p)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "rate", p->rate_bps);
    msgmap_u64(&m, "delay", p->delay_ns);
    msgmap_u64(&m, "jitter", p->jitter_ns);
    msgmap_f64(&m, "loss", p->loss);
    msgmap_key(&m, "queue");
    pack_queue(&m.pk, &p->queue);
    msgmap_key(&m, "ecn_threshold");
    pack_queue(&m.pk, &p->ecn_threshold);
    msgmap_bool(&m, "reorder", p->reorder);
    msgmap_bool(&m, "gilbert", p->gilbert);
    msgmap_key(&m, "ge");
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_double(&m.pk, p->ge_p);
    msgpack_pack_double(&m.pk, p->ge_r);
    msgpack_pack_double(&m.pk, p->ge_h);
    msgpack_pack_double(&m.pk, p->ge_k);
    return msgmap_end(&m, pk);
}

static bool pack_tcp(msgpack_packer *pk, const struct topo_tcp *t)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "cc", t->cc);
    msgmap_u64(&m, "rto_min", t->rto_min_ns);
    msgmap_u64(&m, "ecn", (uint64_t)t->ecn);
    msgmap_u64(&m, "init_cwnd", t->init_cwnd);
    return msgmap_end(&m, pk);
}

static bool pack_node(msgpack_packer *pk, const struct topo_node *n)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "name", n->name);
    msgmap_str(&m, "tier", n->tier);
    msgmap_str(&m, "kind", n->kind == TOPO_NODE_HOST ? "host" : "switch");
    msgmap_f64(&m, "cpu", n->cpu);
    msgmap_f64(&m, "speed", n->speed);
    msgmap_i64(&m, "threads", n->threads);
    msgmap_str(&m, "device", n->device);
    msgmap_str(&m, "profile", n->profile);
    msgmap_u64(&m, "addr", n->node_addr);
    msgmap_i64(&m, "segment", n->segment);
    msgmap_str(&m, "host", n->host);
    msgmap_bool(&m, "remote", n->remote);
    msgmap_key(&m, "tcp");
    bool ok = pack_tcp(&m.pk, &n->tcp);
    return msgmap_end(&m, pk) && ok;
}

static bool pack_link(msgpack_packer *pk, const struct topo_link *l)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, "a", l->a);
    msgmap_i64(&m, "b", l->b);
    msgmap_bool(&m, "up", l->up);
    msgmap_str(&m, "ifname_a", l->ifname_a);
    msgmap_str(&m, "ifname_b", l->ifname_b);
    msgmap_u64(&m, "addr_a", l->addr_a);
    msgmap_u64(&m, "addr_b", l->addr_b);
    msgmap_u64(&m, "prefix_len", l->prefix_len);
    msgmap_u64(&m, "vni", l->vni);
    msgmap_u64(&m, "underlay_remote", l->underlay_remote);
    msgmap_u64(&m, "underlay_delay_us", l->underlay_delay_us);
    msgmap_key(&m, "params");
    bool ok = pack_params(&m.pk, &l->params);
    return msgmap_end(&m, pk) && ok;
}

static void pack_routes(msgpack_packer *pk, const struct topo_node_routes *nr)
{
    msgpack_pack_array(pk, (uint32_t)nr->n_routes);
    for (size_t i = 0; i < nr->n_routes; i++) {
        const struct topo_route *r = &nr->routes[i];
        msgpack_pack_array(pk, ROUTE_FIELDS);
        msgpack_pack_uint32(pk, r->dst);
        msgpack_pack_uint8(pk, r->dst_len);
        msgpack_pack_int(pk, r->dst_node);
        msgpack_pack_int(pk, r->link);
        msgpack_pack_uint32(pk, r->gateway);
        msgpack_pack_int(pk, r->via);
    }
}

static void pack_ints(msgpack_packer *pk, const int *v, size_t n)
{
    msgpack_pack_array(pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_int(pk, v[i]);
}

/* The part's scalars: run, machine, network and its settings. */
static void pack_header(struct msgmap *m, const struct topo_part *part)
{
    const struct topo_network *net = part->net;
    msgmap_u64(m, "v", WIRE_VERSION);
    msgmap_str(m, "run", part->run_id);
    msgmap_str(m, "machine", part->machine);
    msgmap_str(m, "network", net->name);
    msgmap_str(m, "backend", topo_backend_name(net->backend));
    msgmap_f64(m, "dilation", net->dilation);
    msgmap_u64(m, "seed", net->seed);
    msgmap_bin(m, "secret", part->secret, sizeof part->secret);
    msgmap_u64(m, "underlay", net->underlay_local);
    msgmap_u64(m, "addr_base", net->addr_base);
    msgmap_u64(m, "addr_prefix_len", net->addr_prefix_len);
    msgmap_u64(m, "node_block", net->node_block);
    msgmap_u64(m, "node_block_len", net->node_block_len);
    msgmap_u64(m, "segments", net->n_segments);
}

bool topo_part_encode(const struct topo_part *part, msgpack_packer *pk)
{
    const struct topo_network *net = part->net;
    struct msgmap m;
    bool ok = true;
    msgmap_init(&m);
    pack_header(&m, part);
    msgmap_key(&m, "nodes");
    msgpack_pack_array(&m.pk, (uint32_t)net->n_nodes);
    for (size_t i = 0; i < net->n_nodes; i++)
        ok = pack_node(&m.pk, &net->nodes[i]) && ok;
    msgmap_key(&m, "links");
    msgpack_pack_array(&m.pk, (uint32_t)net->n_links);
    for (size_t i = 0; i < net->n_links; i++)
        ok = pack_link(&m.pk, &net->links[i]) && ok;
    msgmap_key(&m, "routes");
    msgpack_pack_array(&m.pk, (uint32_t)part->routing.n_nodes);
    for (size_t i = 0; i < part->routing.n_nodes; i++)
        pack_routes(&m.pk, &part->routing.nodes[i]);
    msgmap_key(&m, "whole_node");
    pack_ints(&m.pk, part->whole_node, net->n_nodes);
    msgmap_key(&m, "whole_link");
    pack_ints(&m.pk, part->whole_link, net->n_links);
    return msgmap_end(&m, pk) && ok;
}

/* ---- decoding ---- */

struct dec {
    char *err;
    size_t errlen;
    char where[96]; /* "part", "node 3 'h1'", "link 2", ... */
};

static int fail(struct dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct dec *d, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(d->err, d->errlen, "part wire: %s: %s", d->where, what);
    return -1;
}

static const msgpack_object *field(const msgpack_object *map, const char *key, struct dec *d)
{
    struct proto_args a;
    proto_args_init(&a, map);
    const msgpack_object *o = proto_args_get(&a, key);
    if (!o) fail(d, "field '%s' is missing", key);
    return o;
}

static const msgpack_object *typed(const msgpack_object *map, const char *key,
                                   msgpack_object_type type, struct dec *d)
{
    const msgpack_object *o = field(map, key, d);
    if (o && o->type != type)
        return fail(d, "field '%s': expected %s, got %s", key, proto_type_name(type),
                    proto_type_name(o->type)),
               NULL;
    return o;
}

/* An unsigned integer o, named key, up to max. */
static int uint_value(const msgpack_object *o, const char *key, uint64_t max, uint64_t *out,
                      struct dec *d)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return fail(d, "field '%s': expected %s, got %s", key,
                    proto_type_name(MSGPACK_OBJECT_POSITIVE_INTEGER), proto_type_name(o->type));
    if (o->via.u64 > max)
        return fail(d, "field '%s': %llu is above %llu", key, (unsigned long long)o->via.u64,
                    (unsigned long long)max);
    *out = o->via.u64;
    return 0;
}

static int get_uint(const msgpack_object *map, const char *key, uint64_t max, uint64_t *out,
                    struct dec *d)
{
    const msgpack_object *o = field(map, key, d);
    return o ? uint_value(o, key, max, out, d) : -1;
}

/* An index field: min (-2, -1 or 0) .. max - 1. */
static int get_index(const msgpack_object *o, const char *key, int min, size_t max, int *out,
                     struct dec *d)
{
    int64_t v;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 < max)
        v = (int64_t)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= min)
        v = o->via.i64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return fail(d, "field '%s': %llu is not an index from %d to %zu", key,
                    (unsigned long long)o->via.u64, min, max ? max - 1 : 0);
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return fail(d, "field '%s': %lld is not an index from %d to %zu", key,
                    (long long)o->via.i64, min, max ? max - 1 : 0);
    else
        return fail(d, "field '%s': expected an index from %d to %zu, got %s", key, min,
                    max ? max - 1 : 0, proto_type_name(o->type));
    *out = (int)v;
    return 0;
}

static int get_f64(const msgpack_object *map, const char *key, double min, double max, double *out,
                   struct dec *d)
{
    const msgpack_object *o = field(map, key, d);
    if (!o) return -1;
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        *out = o->via.f64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *out = (double)o->via.u64;
    else
        return fail(d, "field '%s': expected a number, got %s", key, proto_type_name(o->type));
    if (!(*out >= min && *out <= max))
        return fail(d, "field '%s': %g is not in %g..%g", key, *out, min, max);
    return 0;
}

static int get_str(const msgpack_object *map, const char *key, char *dst, size_t cap, struct dec *d)
{
    const msgpack_object *o = typed(map, key, MSGPACK_OBJECT_STR, d);
    if (!o) return -1;
    uint32_t len = o->via.str.size;
    if (len >= cap) return fail(d, "field '%s': longer than %zu bytes", key, cap - 1);
    for (uint32_t i = 0; i < len; i++) /* every string ends up in messages or argv */
        if ((unsigned char)o->via.str.ptr[i] < 0x20 || o->via.str.ptr[i] == 0x7f)
            return fail(d, "field '%s': holds a control character", key);
    if (len) memcpy(dst, o->via.str.ptr, len);
    dst[len] = '\0';
    return 0;
}

static int get_bool(const msgpack_object *map, const char *key, bool *out, struct dec *d)
{
    const msgpack_object *o = typed(map, key, MSGPACK_OBJECT_BOOLEAN, d);
    if (o) *out = o->via.boolean;
    return o ? 0 : -1;
}

static const msgpack_object *get_array(const msgpack_object *map, const char *key, size_t max,
                                       struct dec *d)
{
    const msgpack_object *o = typed(map, key, MSGPACK_OBJECT_ARRAY, d);
    if (o && o->via.array.size > max)
        return fail(d, "field '%s': %u entries, more than %zu", key, o->via.array.size, max), NULL;
    return o;
}

static int get_u32(const msgpack_object *map, const char *key, uint32_t *out, struct dec *d)
{
    uint64_t v;
    if (get_uint(map, key, UINT32_MAX, &v, d) < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int get_queue(const msgpack_object *map, const char *key, struct topo_units_queue *q,
                     struct dec *d)
{
    const msgpack_object *o = get_array(map, key, 3, d);
    if (!o) return -1;
    const msgpack_object *v = o->via.array.ptr;
    bool ok = o->via.array.size == 3 && v[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
              v[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
              (v[2].type == MSGPACK_OBJECT_FLOAT64 || v[2].type == MSGPACK_OBJECT_FLOAT32) &&
              v[2].via.f64 >= 0 && v[2].via.f64 <= 1e6;
    if (!ok) return fail(d, "field '%s': expected [packets, bytes, bdp multiple >= 0]", key);
    *q = (struct topo_units_queue){v[0].via.u64, v[1].via.u64, v[2].via.f64};
    return 0;
}

static int get_ge(const msgpack_object *map, struct topo_link_params *p, struct dec *d)
{
    const msgpack_object *o = get_array(map, "ge", 4, d);
    if (!o) return -1;
    double v[4];
    for (uint32_t i = 0; i < 4; i++) {
        const msgpack_object *x = i < o->via.array.size ? &o->via.array.ptr[i] : NULL;
        if (!x || (x->type != MSGPACK_OBJECT_FLOAT64 && x->type != MSGPACK_OBJECT_FLOAT32) ||
            !(x->via.f64 >= 0 && x->via.f64 <= 1))
            return fail(d, "field 'ge': expected 4 probabilities from 0 to 1");
        v[i] = x->via.f64;
    }
    p->ge_p = v[0], p->ge_r = v[1], p->ge_h = v[2], p->ge_k = v[3];
    return 0;
}

static int get_params_map(const msgpack_object *map, struct topo_link_params *p, struct dec *d)
{
    uint64_t max_ns = UINT64_MAX / 1024; /* dilated (times the dilation) without overflow */
    if (get_uint(map, "rate", UINT64_MAX / 2, &p->rate_bps, d) < 0 ||
        get_uint(map, "delay", max_ns, &p->delay_ns, d) < 0 ||
        get_uint(map, "jitter", max_ns, &p->jitter_ns, d) < 0 ||
        get_f64(map, "loss", 0, 1, &p->loss, d) < 0 || get_queue(map, "queue", &p->queue, d) < 0 ||
        get_queue(map, "ecn_threshold", &p->ecn_threshold, d) < 0 ||
        get_bool(map, "reorder", &p->reorder, d) < 0 ||
        get_bool(map, "gilbert", &p->gilbert, d) < 0)
        return -1;
    return get_ge(map, p, d);
}

static int get_params(const msgpack_object *link, struct topo_link_params *p, struct dec *d)
{
    const msgpack_object *map = typed(link, "params", MSGPACK_OBJECT_MAP, d);
    return map ? get_params_map(map, p, d) : -1;
}

bool topo_part_params_pack(msgpack_packer *pk, const struct topo_link_params *p)
{
    return pack_params(pk, p);
}

int topo_part_params_read(const msgpack_object *map, struct topo_link_params *out, char *err,
                          size_t errlen)
{
    struct dec d = {err, errlen, "link params"};
    memset(out, 0, sizeof *out);
    if (!map || map->type != MSGPACK_OBJECT_MAP) return fail(&d, "not a map");
    return get_params_map(map, out, &d);
}

static int get_tcp(const msgpack_object *node, struct topo_tcp *t, struct dec *d)
{
    const msgpack_object *map = typed(node, "tcp", MSGPACK_OBJECT_MAP, d);
    uint64_t ecn, cwnd;
    if (!map || get_str(map, "cc", t->cc, sizeof t->cc, d) < 0 ||
        get_uint(map, "rto_min", UINT64_MAX / 1024, &t->rto_min_ns, d) < 0 ||
        get_uint(map, "ecn", TOPO_TCP_ECN_ON, &ecn, d) < 0 ||
        get_uint(map, "init_cwnd", TOPO_TCP_INIT_CWND_MAX, &cwnd, d) < 0)
        return -1;
    t->ecn = (enum topo_tcp_ecn)ecn;
    t->init_cwnd = (unsigned)cwnd;
    return 0;
}

static int get_kind(const msgpack_object *map, enum topo_node_kind *kind, struct dec *d)
{
    char text[8];
    if (get_str(map, "kind", text, sizeof text, d) < 0) return -1;
    char quoted[40];
    if (strcmp(text, "host") && strcmp(text, "switch"))
        return fail(d, "field 'kind': '%s' is neither host nor switch",
                    quote_printable(text, quoted, sizeof quoted));
    *kind = text[0] == 'h' ? TOPO_NODE_HOST : TOPO_NODE_SWITCH;
    return 0;
}

/* A node's settings after its name and kind (topo_node_add's defaults go). */
static int get_node_fields(const msgpack_object *map, struct topo_node *n, struct dec *d)
{
    const msgpack_object *seg = field(map, "segment", d);
    double threads;
    if (get_str(map, "tier", n->tier, sizeof n->tier, d) < 0 ||
        get_f64(map, "cpu", 0, 1e6, &n->cpu, d) < 0 ||
        get_f64(map, "speed", 1e-6, 1e6, &n->speed, d) < 0 ||
        get_f64(map, "threads", 1, 4096, &threads, d) < 0 ||
        get_str(map, "device", n->device, sizeof n->device, d) < 0 ||
        get_str(map, "profile", n->profile, sizeof n->profile, d) < 0 ||
        get_u32(map, "addr", &n->node_addr, d) < 0 || !seg ||
        get_index(seg, "segment", -1, INT32_MAX, &n->segment, d) < 0 ||
        get_str(map, "host", n->host, sizeof n->host, d) < 0 ||
        get_bool(map, "remote", &n->remote, d) < 0 || get_tcp(map, &n->tcp, d) < 0)
        return -1;
    if (threads != (int)threads) return fail(d, "field 'threads': %g is not whole", threads);
    n->threads = (int)threads;
    if (n->node_addr) topo_addr_format(n->node_addr, n->addr, sizeof n->addr); /* switches: none */
    return 0;
}

static int decode_node(struct topo_part *part, const msgpack_object *map, size_t i, struct dec *d)
{
    char name[TOPO_NAME_MAX];
    enum topo_node_kind kind = TOPO_NODE_HOST; /* set by get_kind (gcc cannot tell) */
    snprintf(d->where, sizeof d->where, "node %zu", i);
    if (map->type != MSGPACK_OBJECT_MAP) return fail(d, "not a map");
    if (get_str(map, "name", name, sizeof name, d) < 0 || get_kind(map, &kind, d) < 0) return -1;
    char why[256];
    if (topo_node_add(part->net, name, kind, why, sizeof why) < 0) return fail(d, "%s", why);
    snprintf(d->where, sizeof d->where, "node '%s'", name); /* a valid name now */
    struct topo_node *n = &part->net->nodes[i];
    if (get_node_fields(map, n, d) < 0) return -1;
    if (i > 0 && part->net->nodes[i - 1].remote && !n->remote)
        return fail(d, "a node of this machine after a remote node (topo/part.h: remote last)");
    return 0;
}

static int get_ifname(const msgpack_object *map, const char *key, char *dst, struct dec *d)
{
    if (get_str(map, key, dst, TOPO_IFNAME_MAX, d) < 0) return -1;
    for (const char *c = dst; *c; c++)
        if (*c == '/' || *c <= ' ' || *c == ':') return fail(d, "field '%s': bad name", key);
    return dst[0] ? 0 : fail(d, "field '%s': empty", key);
}

/* The VXLAN fields: both or neither, and then exactly one end remote. */
static int check_remote_end(const struct topo_network *net, const struct topo_link *l,
                            struct dec *d)
{
    bool ra = net->nodes[l->a].remote, rb = net->nodes[l->b].remote;
    if (ra && rb) return fail(d, "both ends are remote nodes");
    if ((ra || rb) != (l->vni != 0) || (l->vni != 0) != (l->underlay_remote != 0))
        return fail(d,
                    "a link to a remote node needs a VNI (1..%d) and an underlay address, "
                    "and only such a link has them (vni %u)",
                    TOPO_PART_VNI_MAX, l->vni);
    if (!l->vni && l->underlay_delay_us)
        return fail(d, "field 'underlay_delay_us': %u on a link of one machine",
                    l->underlay_delay_us);
    return 0;
}

static int get_link_fields(const msgpack_object *map, struct topo_link *l, struct dec *d)
{
    uint64_t prefix, vni, underlay_delay;
    if (get_bool(map, "up", &l->up, d) < 0 || get_ifname(map, "ifname_a", l->ifname_a, d) < 0 ||
        get_ifname(map, "ifname_b", l->ifname_b, d) < 0 ||
        get_u32(map, "addr_a", &l->addr_a, d) < 0 || get_u32(map, "addr_b", &l->addr_b, d) < 0 ||
        get_uint(map, "prefix_len", 32, &prefix, d) < 0 ||
        get_uint(map, "vni", TOPO_PART_VNI_MAX, &vni, d) < 0 ||
        get_u32(map, "underlay_remote", &l->underlay_remote, d) < 0 ||
        get_uint(map, "underlay_delay_us", TOPO_PART_UNDERLAY_DELAY_MAX_US, &underlay_delay, d) < 0)
        return -1;
    l->underlay_delay_us = (uint32_t)underlay_delay;
    l->prefix_len = (uint8_t)prefix;
    l->vni = (uint32_t)vni;
    return 0;
}

static int decode_link(struct topo_part *part, const msgpack_object *map, size_t i, struct dec *d)
{
    struct topo_network *net = part->net;
    struct topo_link_params params = {0};
    const msgpack_object *a, *b;
    int ia = 0, ib = 0; /* set by get_index (gcc cannot tell) */
    snprintf(d->where, sizeof d->where, "link %zu", i);
    if (map->type != MSGPACK_OBJECT_MAP) return fail(d, "not a map");
    if (!(a = field(map, "a", d)) || get_index(a, "a", 0, net->n_nodes, &ia, d) < 0 ||
        !(b = field(map, "b", d)) || get_index(b, "b", 0, net->n_nodes, &ib, d) < 0)
        return -1;
    char what[80];
    topo_link_describe(net, &(struct topo_link){.a = ia, .b = ib}, what, sizeof what);
    snprintf(d->where, sizeof d->where, "link %s", what);
    char why[256];
    if (get_params(map, &params, d) < 0) return -1;
    int l = topo_link_add_parallel(net, ia, ib, &params, why, sizeof why);
    if (l < 0) return fail(d, "%s", why);
    if (get_link_fields(map, &net->links[l], d) < 0) return -1;
    return check_remote_end(net, &net->links[l], d);
}

/* Route `index` of node `node`: it leaves by one of the node's links. */
static int decode_route(const struct topo_network *net, int node, uint32_t index,
                        const msgpack_object *o, struct topo_route *r, struct dec *d)
{
    snprintf(d->where, sizeof d->where, "route %u of node '%s'", index, net->nodes[node].name);
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != ROUTE_FIELDS)
        return fail(d, "not an array of %d", ROUTE_FIELDS);
    const msgpack_object *v = o->via.array.ptr;
    uint64_t dst, dst_len, gateway;
    if (uint_value(&v[0], "dst", UINT32_MAX, &dst, d) < 0 ||
        uint_value(&v[1], "dst_len", 32, &dst_len, d) < 0 ||
        uint_value(&v[4], "gateway", UINT32_MAX, &gateway, d) < 0)
        return -1;
    r->dst = (uint32_t)dst;
    r->dst_len = (uint8_t)dst_len;
    r->gateway = (uint32_t)gateway;
    if (get_index(&v[2], "dst_node", -1, net->n_nodes, &r->dst_node, d) < 0 ||
        get_index(&v[3], "link", 0, net->n_links, &r->link, d) < 0 ||
        get_index(&v[5], "via", TOPO_ROUTE_DIRECT, net->n_nodes, &r->via, d) < 0)
        return -1;
    const struct topo_link *l = &net->links[r->link];
    if (l->a != node && l->b != node)
        return fail(d, "field 'link': %d is a link of other nodes", r->link);
    return 0;
}

static int decode_node_routes(struct topo_part *part, size_t i, const msgpack_object *list,
                              struct dec *d)
{
    const struct topo_network *net = part->net;
    struct topo_node_routes *nr = &part->routing.nodes[i];
    snprintf(d->where, sizeof d->where, "routes of node '%s'", net->nodes[i].name);
    if (list->type != MSGPACK_OBJECT_ARRAY) return fail(d, "not an array");
    uint32_t n = list->via.array.size;
    if (n && (net->nodes[i].kind != TOPO_NODE_HOST || net->nodes[i].remote))
        return fail(d, "only this machine's hosts have routes");
    if (n > TOPO_PART_WIRE_ROUTES_MAX) return fail(d, "%u routes", n);
    if (!n) return 0;
    if (!(nr->routes = calloc(n, sizeof *nr->routes))) return fail(d, "out of memory");
    for (uint32_t r = 0; r < n; r++, nr->n_routes++)
        if (decode_route(net, (int)i, r, &list->via.array.ptr[r], &nr->routes[r], d) < 0) return -1;
    part->routing.total_routes += n;
    return 0;
}

static int decode_routing(struct topo_part *part, const msgpack_object *top, struct dec *d)
{
    size_t n = part->net->n_nodes;
    const msgpack_object *o = get_array(top, "routes", n, d);
    if (!o) return -1;
    if (o->via.array.size != n)
        return fail(d, "%u route lists for %zu nodes", o->via.array.size, n);
    part->routing.nodes = calloc(n ? n : 1, sizeof *part->routing.nodes);
    if (!part->routing.nodes) return fail(d, "out of memory");
    part->routing.n_nodes = n;
    for (size_t i = 0; i < n; i++)
        if (decode_node_routes(part, i, &o->via.array.ptr[i], d) < 0) return -1;
    return 0;
}

/* An index list of n entries, each >= 0 (whole network indices). */
static int decode_ints(const msgpack_object *top, const char *key, size_t n, int **out,
                       struct dec *d)
{
    snprintf(d->where, sizeof d->where, "part");
    const msgpack_object *o = get_array(top, key, n, d);
    if (!o) return -1;
    if (o->via.array.size != n)
        return fail(d, "field '%s': %u entries for %zu", key, o->via.array.size, n);
    if (!(*out = calloc(n ? n : 1, sizeof **out))) return fail(d, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (get_index(&o->via.array.ptr[i], key, 0, INT32_MAX, &(*out)[i], d) < 0) return -1;
    return 0;
}

static int decode_secret(const msgpack_object *top, uint8_t *secret, struct dec *d)
{
    const msgpack_object *o = typed(top, "secret", MSGPACK_OBJECT_BIN, d);
    if (!o) return -1;
    if (o->via.bin.size != TOPO_PART_SECRET_SIZE)
        return fail(d, "field 'secret': %u bytes, not %d", o->via.bin.size, TOPO_PART_SECRET_SIZE);
    memcpy(secret, o->via.bin.ptr, TOPO_PART_SECRET_SIZE);
    return 0;
}

/* The network's settings (its name and backend made it). */
static int decode_settings(struct topo_network *net, const msgpack_object *top, struct dec *d)
{
    uint64_t seed, prefix, block_len, segments;
    if (get_f64(top, "dilation", 1, 1e6, &net->dilation, d) < 0 ||
        get_uint(top, "seed", UINT64_MAX, &seed, d) < 0 ||
        get_u32(top, "underlay", &net->underlay_local, d) < 0 ||
        get_u32(top, "addr_base", &net->addr_base, d) < 0 ||
        get_uint(top, "addr_prefix_len", 32, &prefix, d) < 0 ||
        get_u32(top, "node_block", &net->node_block, d) < 0 ||
        get_uint(top, "node_block_len", 32, &block_len, d) < 0 ||
        get_uint(top, "segments", INT32_MAX, &segments, d) < 0)
        return -1;
    net->seed = seed;
    net->addr_prefix_len = (uint8_t)prefix;
    net->node_block_len = (uint8_t)block_len;
    net->n_segments = segments;
    if (!net->underlay_local) return fail(d, "field 'underlay': no address");
    return 0;
}

/* The run id and the machine name name files, cgroups and messages:
 * [A-Za-z0-9_.-], not empty. */
static int check_id(const char *text, const char *key, struct dec *d)
{
    size_t n = strlen(text);
    bool ok = n > 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = (text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') ||
             (text[i] >= '0' && text[i] <= '9') || strchr("_.-", text[i]);
    char quoted[160];
    if (!ok)
        return fail(d, "field '%s': '%s' is not 1 or more of [A-Za-z0-9_.-]", key,
                    quote_printable(text, quoted, sizeof quoted));
    return 0;
}

static int decode_header(struct topo_part *out, const msgpack_object *top, struct dec *d)
{
    char name[TOPO_NAME_MAX], backend[16], why[256];
    enum topo_backend b;
    uint64_t version;
    if (get_uint(top, "v", UINT32_MAX, &version, d) < 0) return -1;
    if (version != WIRE_VERSION)
        return fail(d, "version %llu, this hiernet reads %d", (unsigned long long)version,
                    WIRE_VERSION);
    if (get_str(top, "run", out->run_id, sizeof out->run_id, d) < 0 ||
        get_str(top, "machine", out->machine, sizeof out->machine, d) < 0 ||
        get_str(top, "network", name, sizeof name, d) < 0 ||
        get_str(top, "backend", backend, sizeof backend, d) < 0 ||
        decode_secret(top, out->secret, d) < 0)
        return -1;
    char quoted[80];
    if (topo_backend_parse(backend, &b, why, sizeof why) < 0 || b == TOPO_BACKEND_NONE)
        return fail(d, "backend '%s': a part needs an emulating backend",
                    quote_printable(backend, quoted, sizeof quoted));
    if (check_id(out->run_id, "run", d) < 0 || check_id(out->machine, "machine", d) < 0) return -1;
    if (topo_part_init(out, name, b, why, sizeof why) < 0) return fail(d, "%s", why);
    return decode_settings(out->net, top, d);
}

struct vni_use {
    uint32_t vni;
    size_t link;
};

static int vni_use_compare(const void *x, const void *y)
{
    const struct vni_use *a = x, *b = y;
    if (a->vni != b->vni) return a->vni < b->vni ? -1 : 1;
    return a->link < b->link ? -1 : a->link > b->link;
}

/* Two links with one VNI would meet in the machine's VXLAN table: the
 * build would fail with EEXIST, which reads as another run's VNI. */
static int check_vnis_unique(const struct topo_network *net, struct dec *d)
{
    struct vni_use *use = malloc((net->n_links ? net->n_links : 1) * sizeof *use);
    size_t n = 0;
    if (!use) return fail(d, "out of memory");
    for (size_t l = 0; l < net->n_links; l++)
        if (net->links[l].vni) use[n++] = (struct vni_use){net->links[l].vni, l};
    qsort(use, n, sizeof *use, vni_use_compare);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++) {
        if (use[i].vni != use[i - 1].vni) continue;
        char first[80], second[80];
        topo_link_describe(net, &net->links[use[i - 1].link], first, sizeof first);
        topo_link_describe(net, &net->links[use[i].link], second, sizeof second);
        snprintf(d->where, sizeof d->where, "link %s", second);
        rc = fail(d, "VNI %u is link %s's too", use[i].vni, first);
    }
    free(use);
    return rc;
}

/* topo_part_own_node binary-searches this machine's nodes by whole node:
 * they must come in strictly ascending order (topo_part_make adds them so). */
static int check_local_order(const struct topo_part *part, struct dec *d)
{
    size_t local = topo_part_local_nodes(part);
    for (size_t i = 1; i < local; i++)
        if (part->whole_node[i] <= part->whole_node[i - 1]) {
            snprintf(d->where, sizeof d->where, "node '%s'", part->net->nodes[i].name);
            return fail(d, "field 'whole_node': %d after %d (this machine's nodes ascend)",
                        part->whole_node[i], part->whole_node[i - 1]);
        }
    return 0;
}

static int decode_top(struct topo_part *out, const msgpack_object *top, struct dec *d)
{
    if (top->type != MSGPACK_OBJECT_MAP) return fail(d, "not a map");
    if (decode_header(out, top, d) < 0) return -1;
    const msgpack_object *nodes = get_array(top, "nodes", TOPO_PART_WIRE_NODES_MAX, d);
    const msgpack_object *links =
        nodes ? get_array(top, "links", 8 * TOPO_PART_WIRE_NODES_MAX, d) : NULL;
    if (!links) return -1;
    for (uint32_t i = 0; i < nodes->via.array.size; i++)
        if (decode_node(out, &nodes->via.array.ptr[i], i, d) < 0) return -1;
    for (uint32_t i = 0; i < links->via.array.size; i++)
        if (decode_link(out, &links->via.array.ptr[i], i, d) < 0) return -1;
    if (check_vnis_unique(out->net, d) < 0) return -1;
    snprintf(d->where, sizeof d->where, "part");
    if (decode_routing(out, top, d) < 0 ||
        decode_ints(top, "whole_node", out->net->n_nodes, &out->whole_node, d) < 0 ||
        check_local_order(out, d) < 0)
        return -1;
    return decode_ints(top, "whole_link", out->net->n_links, &out->whole_link, d);
}

int topo_part_decode(const void *bytes, size_t len, struct topo_part *out, char *err, size_t errlen)
{
    struct dec d = {err, errlen, "part"};
    memset(out, 0, sizeof *out);
    if (len > TOPO_PART_WIRE_MAX)
        return fail(&d, "%zu bytes, more than %u", len, TOPO_PART_WIRE_MAX);
    msgpack_unpacked u;
    size_t off = 0;
    msgpack_unpacked_init(&u);
    int rc;
    size_t scanned = 0;
    if (proto_object_scan(bytes, len, &scanned) != 1 ||
        msgpack_unpack_next(&u, bytes, len, &off) != MSGPACK_UNPACK_SUCCESS)
        rc = fail(&d, "not one MessagePack object");
    else if (off != len)
        rc = fail(&d, "%zu bytes after the part", len - off);
    else
        rc = decode_top(out, &u.data, &d);
    msgpack_unpacked_destroy(&u);
    return rc;
}
