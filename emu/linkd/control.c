/* control.c — MessagePack-RPC methods of hiernet-linkd (see control.h). */
#include "emu/linkd/control.h"
#include "common/container.h"
#include "proto/msgmap.h"
#include "common/privdrop.h"
#include "proto/link_keys.h"
#include "proto/linkd_methods.h"
#include "emu/linkd/tap.h"
#include "emu/linkd/underlay.h"

#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*control_handler)(struct linkd_control *c, struct proto_args *a, uint32_t msgid,
                               char *err, size_t errlen);

static void control_nested_error(char *err, size_t errlen, const char *outer, const char *inner);

/* ---- emulation parameters ---- */

/* Every numeric key of proto/link_keys.h: the shared ones, then linkd's own
 * whole numbers (a queue and an ECN threshold in packets or bytes, the
 * per-frame overhead). */
#define LINKD_NUMERIC_KEYS(X) LINK_WIRE_KEYS(X) LINK_WIRE_GILBERT_KEYS(X) LINK_WIRE_COUNT_KEYS(X)

enum control_field {
#define FIELD_ENUM(key, field, unit, min, max) F_##key,
    LINKD_NUMERIC_KEYS(FIELD_ENUM)
#undef FIELD_ENUM
};

struct control_param {
    const char *key;
    double min, max;
    enum control_field field;
};

/* Numeric keys with their accepted ranges (units: bit/s, µs, fraction, packets, bytes). */
static const struct control_param control_params[] = {
#define FIELD_ROW(key, field, unit, min, max) {#key, min, max, F_##key},
    LINKD_NUMERIC_KEYS(FIELD_ROW)
#undef FIELD_ROW
};

static void control_param_store(struct linkd_params *p, enum control_field f, double v)
{
    switch (f) {
#define FIELD_STORE(key, field, unit, min, max)                                                    \
    case F_##key:                                                                                  \
        p->field = LINK_WIRE_IN_##unit(v);                                                         \
        break;
        LINKD_NUMERIC_KEYS(FIELD_STORE)
#undef FIELD_STORE
    }
}

static int control_parse_jitter_dist(struct proto_args *a, struct linkd_params *p)
{
    char dist[16];
    int r = proto_arg_strcpy(a, LINK_KEY(jitter_dist), dist, sizeof dist);
    if (r <= 0) return r;
    if (strcmp(dist, "uniform") == 0)
        p->jitter_dist = LINKD_JITTER_UNIFORM;
    else if (strcmp(dist, "normal") == 0)
        p->jitter_dist = LINKD_JITTER_NORMAL;
    else {
        snprintf(a->err, sizeof a->err, "param 'jitter_dist': '%s' is neither uniform nor normal",
                 dist);
        return -1;
    }
    return 1;
}

/* Applies the emulation keys present in a to p; absent keys leave p alone. */
static int control_parse_params(struct proto_args *a, struct linkd_params *p)
{
    for (size_t i = 0; i < sizeof control_params / sizeof control_params[0]; i++) {
        const struct control_param *cp = &control_params[i];
        double v;
        int r = proto_arg_f64(a, cp->key, &v);
        if (r < 0) return -1;
        if (r == 0) continue;
        if (!(v >= cp->min && v <= cp->max)) {
            snprintf(a->err, sizeof a->err, "param '%s': %g is outside %g..%g", cp->key, v, cp->min,
                     cp->max);
            return -1;
        }
        control_param_store(p, cp->field, v);
    }
    if (proto_arg_bool(a, LINK_KEY(reorder), &p->reorder) < 0) return -1;
    return control_parse_jitter_dist(a, p) < 0 ? -1 : 0;
}

/* Top-level keys go to both directions, then "ab" / "ba" override one. */
static int control_parse_directions(struct proto_args *a, struct linkd_params p[2], char *err,
                                    size_t errlen)
{
    static const char *names[2] = {LINKD_DIR_AB, LINKD_DIR_BA};
    for (int i = 0; i < 2; i++) {
        if (control_parse_params(a, &p[i]) < 0) {
            snprintf(err, errlen, "%s", a->err);
            return -1;
        }
        const msgpack_object *sub = proto_args_get(a, names[i]);
        if (!sub || sub->type == MSGPACK_OBJECT_NIL) continue;
        struct proto_args sa;
        proto_args_init(&sa, sub);
        if (sub->type != MSGPACK_OBJECT_MAP) {
            snprintf(err, errlen, "param '%s': expected map, got %s", names[i],
                     proto_type_name(sub->type));
            return -1;
        }
        if (control_parse_params(&sa, &p[i]) < 0) {
            control_nested_error(err, errlen, names[i], sa.err);
            return -1;
        }
    }
    for (int i = 0; i < 2; i++)
        if (linkd_params_check(&p[i], err, errlen) < 0) return -1;
    return 0;
}

static int control_parse_offload(struct proto_args *a, enum linkd_offload *mode)
{
    bool on;
    int r = proto_arg_bool(a, "offload", &on);
    if (r == 1) *mode = on ? LINKD_OFFLOAD_ON : LINKD_OFFLOAD_OFF;
    if (r != -1) return r;
    char s[8];
    a->err[0] = '\0';
    r = proto_arg_strcpy(a, "offload", s, sizeof s);
    if (r <= 0) return r;
    if (strcmp(s, "auto") == 0)
        *mode = LINKD_OFFLOAD_AUTO;
    else if (strcmp(s, "on") == 0)
        *mode = LINKD_OFFLOAD_ON;
    else if (strcmp(s, "off") == 0)
        *mode = LINKD_OFFLOAD_OFF;
    else {
        snprintf(a->err, sizeof a->err, "param 'offload': '%s' is not auto, on or off", s);
        return -1;
    }
    return 1;
}

/* ---- common argument helpers ---- */

/* "param 'x': ..." of a nested map becomes "param 'a.x': ...". */
static void control_nested_error(char *err, size_t errlen, const char *outer, const char *inner)
{
    static const char tag[] = "param '";
    if (strncmp(inner, tag, sizeof tag - 1) == 0)
        snprintf(err, errlen, "%s%s.%s", tag, outer, inner + sizeof tag - 1);
    else
        snprintf(err, errlen, "param '%s': %s", outer, inner);
}

static int control_arg_fail(struct proto_args *a, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", a->err);
    return -1;
}

static int control_get_id(struct proto_args *a, int64_t *id, char *err, size_t errlen)
{
    int r = proto_arg_i64(a, LINKD_ARG_ID, id);
    if (r == 0) proto_args_missing(a, LINKD_ARG_ID);
    return r == 1 ? 0 : control_arg_fail(a, err, errlen);
}

static struct linkd_link *control_get_link(struct linkd_control *c, struct proto_args *a, char *err,
                                           size_t errlen)
{
    int64_t id;
    if (control_get_id(a, &id, err, errlen) < 0) return NULL;
    struct linkd_link *l = linkd_link_find(c->ld, id);
    if (!l) snprintf(err, errlen, "link %lld: no such link", (long long)id);
    return l;
}

/* ---- link ends ---- */

struct control_end {
    char netns_path[PATH_MAX];
    struct linkd_tap_config cfg;
    bool underlay; /* a cut link's far end: ucfg, not cfg */
    struct linkd_underlay_config ucfg;
};

/* An IPv4 address in dotted form, into host order. */
static int control_arg_ipv4(struct proto_args *ea, const char *key, uint32_t *out)
{
    char s[INET_ADDRSTRLEN];
    struct in_addr a;
    int r = proto_arg_strcpy(ea, key, s, sizeof s);
    if (r == 0) proto_args_missing(ea, key);
    if (r != 1) return -1;
    if (inet_pton(AF_INET, s, &a) != 1 || a.s_addr == 0)
        return snprintf(ea->err, sizeof ea->err, "param '%s': '%s' is not an IPv4 address", key, s),
               -1;
    *out = ntohl(a.s_addr);
    return 0;
}

/* {vni, local, remote, port}: the underlay end of a cut link (underlay.h). */
static int control_parse_underlay_end(struct proto_args *ea, struct control_end *e)
{
    int64_t vni = 0, port = 0;
    e->underlay = true;
    if (proto_arg_i64(ea, LINKD_ARG_VNI, &vni) != 1 || vni < 1 || vni > 0xffffff)
        return snprintf(ea->err, sizeof ea->err, "param 'vni': give 1..16777215"), -1;
    if (proto_arg_i64(ea, LINKD_ARG_PORT, &port) != 1 || port < 1 || port > 65535)
        return snprintf(ea->err, sizeof ea->err, "param 'port': give 1..65535"), -1;
    e->ucfg.vni = (uint32_t)vni;
    e->ucfg.port = (uint16_t)port;
    if (control_arg_ipv4(ea, LINKD_ARG_LOCAL, &e->ucfg.local) < 0) return -1;
    return control_arg_ipv4(ea, LINKD_ARG_REMOTE, &e->ucfg.remote);
}

static int control_parse_end_fields(struct proto_args *ea, struct control_end *e)
{
    char mac[24];
    int64_t mtu = 0;
    int r;
    if (proto_args_get(ea, LINKD_ARG_VNI)) return control_parse_underlay_end(ea, e);
    if (proto_arg_strcpy(ea, "netns_path", e->netns_path, sizeof e->netns_path) < 0) return -1;
    if (proto_arg_strcpy(ea, "ifname", e->cfg.ifname, sizeof e->cfg.ifname) < 0) return -1;
    if (proto_arg_bool(ea, "up", &e->cfg.up) < 0) return -1;
    if (proto_arg_bool(ea, "persist", &e->cfg.persist) < 0) return -1;
    if ((r = proto_arg_i64(ea, "mtu", &mtu)) < 0) return -1;
    if (r && (mtu < 68 || mtu > 65535)) {
        snprintf(ea->err, sizeof ea->err, "param 'mtu': %lld is outside 68..65535", (long long)mtu);
        return -1;
    }
    e->cfg.mtu = (int)mtu;
    if ((r = proto_arg_strcpy(ea, "mac", mac, sizeof mac)) < 0) return -1;
    if (r && !(e->cfg.has_mac = linkd_tap_parse_mac(mac, e->cfg.mac))) {
        snprintf(ea->err, sizeof ea->err, "param 'mac': '%s' is not a unicast MAC", mac);
        return -1;
    }
    return 0;
}

static int control_parse_end(struct proto_args *a, const char *key, struct control_end *e,
                             char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    e->cfg.netns_path = e->netns_path;
    const msgpack_object *o = proto_args_get(a, key);
    if (!o || o->type != MSGPACK_OBJECT_MAP) {
        snprintf(err, errlen, "param '%s': expected map {netns_path=, ifname=}, got %s", key,
                 o ? proto_type_name(o->type) : "nothing");
        return -1;
    }
    struct proto_args ea;
    proto_args_init(&ea, o);
    if (control_parse_end_fields(&ea, e) < 0) {
        control_nested_error(err, errlen, key, ea.err);
        return -1;
    }
    return 0;
}

static void control_pack_end(struct msgmap *m, const char *key, const char *ifname, int ifindex)
{
    struct msgmap end;
    msgmap_init(&end);
    msgmap_str(&end, "ifname", ifname);
    msgmap_i64(&end, "ifindex", ifindex);
    msgmap_key(m, key);
    if (!msgmap_end(&end, &m->pk)) m->buf.failed = true;
}

/* The response with result m (freed). */
static int control_reply(struct linkd_control *c, struct msgmap *m, uint32_t msgid, char *err,
                         size_t errlen)
{
    if (msgmap_response(m, &c->pk, msgid)) return 0;
    snprintf(err, errlen, "out of memory packing the result");
    return -1;
}

/* ---- methods ---- */

static int on_ping(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                   size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_bool(&m, "pong", true);
    msgmap_i64(&m, "pid", getpid());
    msgmap_i64(&m, "links", (int64_t)c->ld->n_links);
    return control_reply(c, &m, msgid, err, errlen);
}

/* Validates everything before creating a device, so a bad request leaves
 * nothing behind. */
static int control_link_add_parse(struct linkd_control *c, struct proto_args *a, int64_t *id,
                                  struct linkd_params p[2], enum linkd_offload *offload,
                                  int64_t *seed, char *err, size_t errlen)
{
    if (control_get_id(a, id, err, errlen) < 0) return -1;
    if (linkd_link_find(c->ld, *id)) {
        snprintf(err, errlen, "link %lld: already exists", (long long)*id);
        return -1;
    }
    linkd_params_default(&p[0]);
    linkd_params_default(&p[1]);
    if (control_parse_directions(a, p, err, errlen) < 0) return -1;
    *offload = LINKD_OFFLOAD_AUTO;
    *seed = *id;
    if (control_parse_offload(a, offload) < 0 || proto_arg_i64(a, "seed", seed) < 0)
        return control_arg_fail(a, err, errlen);
    return 0;
}

/* At most one end of a link is the underlay: linkd is no UDP relay. */
static int control_link_cut(const struct control_end end[2], struct linkd_cut *cut, char *err,
                            size_t errlen)
{
    if (end[0].underlay && end[1].underlay)
        return snprintf(err, errlen, "param 'b': a link needs a TAP end (both are the underlay)"),
               -1;
    cut->end = end[0].underlay ? 0 : end[1].underlay ? 1 : LINKD_CUT_NONE;
    cut->vni = end[0].underlay ? end[0].ucfg.vni : end[1].ucfg.vni;
    return 0;
}

/* A TAP, or the underlay socket (which has no name nor index: "", 0). */
static int control_open_end(struct control_end *e, char ifname[IFNAMSIZ], int *ifindex, char *err,
                            size_t errlen)
{
    if (!e->underlay) return linkd_tap_open(&e->cfg, ifname, ifindex, err, errlen);
    ifname[0] = '\0';
    *ifindex = 0;
    return linkd_underlay_open(&e->ucfg, err, errlen);
}

static int on_link_add(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                       size_t errlen)
{
    int64_t id, seed;
    struct linkd_params p[2];
    enum linkd_offload offload;
    struct control_end end[2];
    if (control_link_add_parse(c, a, &id, p, &offload, &seed, err, errlen) < 0 ||
        control_parse_end(a, "a", &end[0], err, errlen) < 0 ||
        control_parse_end(a, "b", &end[1], err, errlen) < 0)
        return -1;
    struct linkd_cut cut;
    if (control_link_cut(end, &cut, err, errlen) < 0) return -1;
    char ifname[2][IFNAMSIZ];
    int ifindex[2], fd[2];
    char why[256];
    fd[0] = control_open_end(&end[0], ifname[0], &ifindex[0], why, sizeof why);
    fd[1] = fd[0] < 0 ? -1 : control_open_end(&end[1], ifname[1], &ifindex[1], why, sizeof why);
    if (fd[1] < 0) {
        if (fd[0] >= 0) linkd_tap_remove(fd[0]);
        snprintf(err, errlen, "link %lld end %c: %s", (long long)id, fd[0] < 0 ? 'a' : 'b', why);
        return -1;
    }
    if (!linkd_link_add(c->ld, id, fd[0], fd[1], &p[0], &p[1], offload, &cut, (uint64_t)seed, why,
                        sizeof why)) {
        snprintf(err, errlen, "link %lld: %s", (long long)id, why);
        return -1;
    }
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    control_pack_end(&m, "a", ifname[0], ifindex[0]);
    control_pack_end(&m, "b", ifname[1], ifindex[1]);
    return control_reply(c, &m, msgid, err, errlen);
}

static int on_link_set(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                       size_t errlen)
{
    struct linkd_link *l = control_get_link(c, a, err, errlen);
    if (!l) return -1;
    struct linkd_params p[2] = {l->dir[0].p, l->dir[1].p};
    enum linkd_offload offload = l->offload;
    char why[256];
    int rc = control_parse_directions(a, p, why, sizeof why);
    if (rc == 0 && control_parse_offload(a, &offload) < 0) {
        snprintf(why, sizeof why, "%s", a->err);
        rc = -1;
    }
    if (rc < 0) {
        snprintf(err, errlen, "link %lld: %s", (long long)l->id, why);
        return -1;
    }
    l->offload = offload;
    for (int i = 0; i < 2; i++) {
        if (linkd_link_set(l, i, &p[i], why, sizeof why) < 0) {
            snprintf(err, errlen, "link %lld: %s", (long long)l->id, why);
            return -1;
        }
    }
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, l->id);
    return control_reply(c, &m, msgid, err, errlen);
}

/* The opportunities of link_schedule: non-decreasing µs offsets, at most a
 * day, into ns. NULL with err (or *n = 0 and NULL for an empty list). */
static int64_t *control_parse_opportunities(const msgpack_object *o, size_t *n, char *err,
                                            size_t errlen)
{
    *n = 0;
    if (!o || o->type != MSGPACK_OBJECT_ARRAY)
        return snprintf(err, errlen, "param 'at_us': expected an array"), NULL;
    if (!o->via.array.size) return NULL;
    int64_t *at = malloc(o->via.array.size * sizeof *at);
    if (!at) return snprintf(err, errlen, "out of memory"), NULL;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *v = &o->via.array.ptr[i];
        int64_t ns = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= 86400000000ull
                         ? (int64_t)v->via.u64 * 1000
                         : -1;
        if (ns < 0 || (i && ns < at[i - 1])) {
            snprintf(err, errlen, "param 'at_us': entry %u is not a time after the one before", i);
            free(at);
            return NULL;
        }
        at[i] = ns;
    }
    *n = o->via.array.size;
    return at;
}

/* link_schedule {id, dir, at_us = [...], period_us}: a Mahimahi trace. */
static int on_link_schedule(struct linkd_control *c, struct proto_args *a, uint32_t msgid,
                            char *err, size_t errlen)
{
    struct linkd_link *l = control_get_link(c, a, err, errlen);
    if (!l) return -1;
    int64_t dir = -1, period_us = 0;
    if (proto_arg_i64(a, LINKD_ARG_DIR, &dir) != 1 || dir < 0 || dir > 1 ||
        proto_arg_i64(a, LINKD_ARG_PERIOD_US, &period_us) != 1 || period_us <= 0)
        return snprintf(err, errlen, "link %lld: link_schedule needs dir 0|1 and period_us > 0",
                        (long long)l->id),
               -1;
    size_t n;
    char why[160] = "";
    int64_t *at =
        control_parse_opportunities(proto_args_get(a, LINKD_ARG_AT_US), &n, why, sizeof why);
    if (!at && why[0]) return snprintf(err, errlen, "link %lld: %s", (long long)l->id, why), -1;
    linkd_link_schedule(l, (int)dir, at, n, period_us * 1000);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, l->id);
    return control_reply(c, &m, msgid, err, errlen);
}

static int control_link_updown(struct linkd_control *c, struct proto_args *a, uint32_t msgid,
                               bool up, char *err, size_t errlen)
{
    struct linkd_link *l = control_get_link(c, a, err, errlen);
    if (!l) return -1;
    linkd_link_set_up(l, up);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, l->id);
    msgmap_bool(&m, "up", up);
    return control_reply(c, &m, msgid, err, errlen);
}

static int on_link_down(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                        size_t errlen)
{
    return control_link_updown(c, a, msgid, false, err, errlen);
}

static int on_link_up(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                      size_t errlen)
{
    return control_link_updown(c, a, msgid, true, err, errlen);
}

static void control_pack_counters(struct msgmap *link, const char *key, struct linkd_dir *d,
                                  bool reset_peak)
{
    const struct linkd_counters *k = &d->c;
    struct msgmap m;
    msgmap_init(&m);
#define PACK_COUNTER(field) msgmap_i64(&m, #field, (int64_t)k->field);
    LINKD_STATS_COUNTERS(PACK_COUNTER)
#undef PACK_COUNTER
    msgmap_i64(&m, "queue_len", d->q_packets);
    msgmap_i64(&m, "queue_bytes", (int64_t)d->q_bytes);
    msgmap_i64(&m, "in_flight", linkd_dir_in_flight(d));
    msgmap_i64(&m, "tso", d->link->tso[d == &d->link->dir[0] ? 0 : 1]);
    msgmap_key(link, key);
    if (!msgmap_end(&m, &link->pk)) link->buf.failed = true;
    /* A peak that restarts at every sample gives per-interval peaks. */
    if (reset_peak) d->c.queue_peak = d->q_packets;
}

/* {id, up, ab, ba} into m. */
static void control_pack_link_stats(struct msgmap *m, struct linkd_link *l, bool reset_peak)
{
    linkd_link_sync(l); /* counters as of now, not as of the last wake-up */
    msgmap_i64(m, LINKD_ARG_ID, l->id);
    msgmap_bool(m, LINKD_STATS_UP, l->up);
    control_pack_counters(m, LINKD_DIR_AB, &l->dir[0], reset_peak);
    control_pack_counters(m, LINKD_DIR_BA, &l->dir[1], reset_peak);
}

static int on_link_stats(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                         size_t errlen)
{
    bool reset_peak = false;
    struct linkd_link *l = control_get_link(c, a, err, errlen);
    if (!l) return -1;
    if (proto_arg_bool(a, "reset_peak", &reset_peak) < 0) return control_arg_fail(a, err, errlen);
    /* The result map is the link's stats map itself. */
    struct msgmap m;
    msgmap_init(&m);
    control_pack_link_stats(&m, l, reset_peak);
    return control_reply(c, &m, msgid, err, errlen);
}

static int on_link_stats_all(struct linkd_control *c, struct proto_args *a, uint32_t msgid,
                             char *err, size_t errlen)
{
    bool reset_peak = false;
    if (proto_arg_bool(a, "reset_peak", &reset_peak) < 0) return control_arg_fail(a, err, errlen);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_key(&m, "links");
    msgpack_pack_array(&m.pk, (uint32_t)c->ld->n_links);
    for (struct linkd_link *l = c->ld->links; l; l = l->next) {
        struct msgmap link;
        msgmap_init(&link);
        control_pack_link_stats(&link, l, reset_peak);
        if (!msgmap_end(&link, &m.pk)) m.buf.failed = true;
    }
    return control_reply(c, &m, msgid, err, errlen);
}

static int on_link_del(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                       size_t errlen)
{
    struct linkd_link *l = control_get_link(c, a, err, errlen);
    if (!l) return -1;
    int64_t id = l->id;
    linkd_link_del(l);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    return control_reply(c, &m, msgid, err, errlen);
}

/* The controller has made every link: the TAP fds and the timer stay
 * usable, nothing new can be opened. */
static int on_drop_root(struct linkd_control *c, struct proto_args *a, uint32_t msgid, char *err,
                        size_t errlen)
{
    int64_t uid = -1, gid = -1;
    if (proto_arg_i64(a, "uid", &uid) != 1 || proto_arg_i64(a, "gid", &gid) != 1 || uid <= 0 ||
        gid < 0 || uid > UINT32_MAX - 1 || gid > UINT32_MAX - 1) {
        snprintf(err, errlen, "drop_root: give uid (> 0) and gid");
        return -1;
    }
    struct privdrop_target t = {true, (uid_t)uid, (gid_t)gid};
    if (privdrop_apply(&t, c->parent, err, errlen) < 0) {
        /* Never run on as root after being told not to. */
        linkd_log("%s; exiting", err);
        _exit(3);
    }
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, "uid", (int64_t)getuid());
    return control_reply(c, &m, msgid, err, errlen);
}

static const struct control_method {
    const char *name;
    control_handler handler;
} control_methods[] = {
    {LINKD_METHOD_PING, on_ping},
    {LINKD_METHOD_LINK_ADD, on_link_add},
    {LINKD_METHOD_LINK_SET, on_link_set},
    {LINKD_METHOD_LINK_SCHEDULE, on_link_schedule},
    {LINKD_METHOD_LINK_DOWN, on_link_down},
    {LINKD_METHOD_LINK_UP, on_link_up},
    {LINKD_METHOD_LINK_STATS, on_link_stats},
    {LINKD_METHOD_LINK_STATS_ALL, on_link_stats_all},
    {LINKD_METHOD_LINK_DEL, on_link_del},
    {LINKD_METHOD_DROP_ROOT, on_drop_root},
};

static const struct control_method *control_method_find(const char *name, uint32_t len)
{
    for (size_t i = 0; i < sizeof control_methods / sizeof control_methods[0]; i++)
        if (proto_method_is(control_methods[i].name, name, len)) return &control_methods[i];
    return NULL;
}

/* ---- the channel ---- */

static void control_close(struct linkd_control *c)
{
    if (c->closed) return;
    c->closed = true;
    ev_io_stop(c->ld->loop, &c->read_io);
    ev_io_stop(c->ld->loop, &c->write_io);
    /* Without a controller there is nobody to serve: linkd exits. */
    ev_break(c->ld->loop, EVBREAK_ALL);
}

static void control_dispatch(struct linkd_control *c, const struct proto_msg *msg)
{
    const struct control_method *m = control_method_find(msg->method, msg->method_len);
    char err[512];
    if (!m) {
        snprintf(err, sizeof err, "unknown method '%.*s'", (int)msg->method_len, msg->method);
        proto_pack_error(&c->pk, msg->msgid, err);
        return;
    }
    struct proto_args a;
    proto_args_init(&a, msg->params);
    size_t mark = c->out.size;
    if (m->handler(c, &a, msg->msgid, err, sizeof err) < 0) {
        c->out.size = mark; /* drop anything a failing handler packed */
        proto_pack_error(&c->pk, msg->msgid, err);
    }
}

static void control_drain(struct linkd_control *c)
{
    while (!c->closed) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        enum proto_next r = proto_reader_next(&c->reader, &msg, &has_msgid, err, sizeof err);
        if (r == PROTO_NEXT_MORE) return;
        if (r == PROTO_NEXT_FATAL) {
            linkd_log("control channel: %s; exiting", err);
            control_close(c);
            return;
        }
        if (r == PROTO_NEXT_INVALID) {
            if (has_msgid) proto_pack_error(&c->pk, msg.msgid, err);
            continue;
        }
        if (msg.kind == PROTO_REQUEST) control_dispatch(c, &msg);
        /* Notifications and responses carry nothing linkd acts on. */
    }
}

static void control_flush(struct linkd_control *c)
{
    while (!c->closed && c->out_sent < c->out.size) {
        ssize_t n = write(c->fd, c->out.data + c->out_sent, c->out.size - c->out_sent);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            ev_io_start(c->ld->loop, &c->write_io);
            return;
        }
        if (n < 0) {
            linkd_log("control channel write: %s; exiting", strerror(errno));
            control_close(c);
            return;
        }
        c->out_sent += (size_t)n;
    }
    msgpack_sbuffer_clear(&c->out);
    c->out_sent = 0;
    ev_io_stop(c->ld->loop, &c->write_io);
}

static void on_control_writable(EV_P_ ev_io *w, int revents)
{
    control_flush(container_of(w, struct linkd_control, write_io));
}

static void on_control_readable(EV_P_ ev_io *w, int revents)
{
    struct linkd_control *c = container_of(w, struct linkd_control, read_io);
    size_t avail;
    char *buf = proto_reader_buffer(&c->reader, 64 * 1024, &avail);
    if (!buf) {
        linkd_log("control channel: out of memory; exiting");
        control_close(c);
        return;
    }
    ssize_t n = read(c->fd, buf, avail);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        if (n < 0) linkd_log("control channel read: %s; exiting", strerror(errno));
        control_close(c);
        return;
    }
    proto_reader_consumed(&c->reader, (size_t)n);
    control_drain(c);
    control_flush(c);
}

int linkd_control_start(struct linkd_control *c, struct linkd *ld, int fd, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->ld = ld;
    c->fd = fd;
    c->parent = getppid();
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        snprintf(err, errlen, "control fd %d: %s", fd, strerror(errno));
        return -1;
    }
    if (proto_reader_init(&c->reader, 0) < 0) {
        snprintf(err, errlen, "control channel: out of memory");
        return -1;
    }
    msgpack_sbuffer_init(&c->out);
    msgpack_packer_init(&c->pk, &c->out, msgpack_sbuffer_write);
    ev_io_init(&c->read_io, on_control_readable, fd, EV_READ);
    ev_io_init(&c->write_io, on_control_writable, fd, EV_WRITE);
    ev_io_start(ld->loop, &c->read_io);
    return 0;
}

void linkd_control_stop(struct linkd_control *c)
{
    ev_io_stop(c->ld->loop, &c->read_io);
    ev_io_stop(c->ld->loop, &c->write_io);
    close(c->fd);
    proto_reader_destroy(&c->reader);
    msgpack_sbuffer_destroy(&c->out);
}
