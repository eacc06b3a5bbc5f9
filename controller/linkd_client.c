/* linkd_client.c — requests to hiernet-linkd (see linkd_client.h). */
#include "controller/linkd_client.h"

#include "proto/msgmap.h"
#include "proto/protocol.h"
#include "proto/link_keys.h"
#include "proto/linkd_methods.h"
#include "topo/shape.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct linkd_client {
    struct peer_client *pc;
    msgpack_sbuffer buf;
    msgpack_packer pk;
};

/* HIERNET_LINKD_PRIORITY=1..99 runs linkd at SCHED_FIFO with that
 * priority (its --priority). One linkd carries every link of a small
 * network; on a loaded host CFS left it runnable and not running for up to
 * 1.2 s, past TCP's RTO, and every flow timed out at once; at SCHED_FIFO
 * it waited at most 164 ms under comparable load (docs/fidelity.md, "linkd
 * stalls and RTO episodes"). Off by default: a real-time linkd that polls
 * for its next release keeps a core from the run's peers and other
 * programs. *prio is "" when unset; -1 with err on a bad value. A run over
 * several machines passes it on to every agent (controller/agent_client.c). */
int linkd_client_priority(char prio[4], char *err, size_t errlen)
{
    const char *v = getenv("HIERNET_LINKD_PRIORITY");
    prio[0] = '\0';
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long p = strtol(v, &end, 10);
    if (errno || end == v || *end || p < 1 || p > 99) {
        snprintf(err, errlen, "HIERNET_LINKD_PRIORITY=%s: not a real-time priority (1..99)", v);
        return -1;
    }
    snprintf(prio, 4, "%ld", p);
    return 0;
}

struct linkd_client *linkd_client_start(struct ev_loop *loop, char *err, size_t errlen)
{
    char path[4096], prio[4];
    if (peer_client_sibling_path("hiernet-linkd", "HIERNET_LINKD", path, sizeof path) < 0) {
        snprintf(err, errlen, "cannot locate the hiernet-linkd executable");
        return NULL;
    }
    if (linkd_client_priority(prio, err, errlen) < 0) return NULL;
    struct linkd_client *lc = calloc(1, sizeof *lc);
    if (!lc) return snprintf(err, errlen, "out of memory"), NULL;
    msgpack_sbuffer_init(&lc->buf);
    msgpack_packer_init(&lc->pk, &lc->buf, msgpack_sbuffer_write);
    const char *args[] = {"--priority", prio, NULL};
    struct peer_spawn spec = {"@linkd", path, prio[0] ? args : NULL, -1, NULL};
    lc->pc = peer_client_spawn(loop, &spec, NULL, err, errlen);
    if (!lc->pc) {
        linkd_client_free(lc);
        return NULL;
    }
    return lc;
}

/* ---- encoding ---- */

/* bw (0 = unlimited), delay, jitter, loss, reorder, the queue, the
 * ECN threshold always (0 = off, so that l:set{} can turn marking off) and
 * the Gilbert-Elliott parameters if set. */
/* A struct field as its wire value, by unit (proto/link_keys.h). */
#define PACK_BPS(m, key, v) msgmap_u64(m, key, v)
#define PACK_TIME(m, key, v) msgmap_f64(m, key, (v) / LINK_WIRE_NS_PER_UNIT)
#define PACK_FRACTION(m, key, v) msgmap_f64(m, key, v)
#define PACK_KEY(key, field, unit, min, max) PACK_##unit(m, #key, p->field);

/* The queue in the one unit asked for, the other bound sent as 0 (linkd
 * keeps both, and its own default of packets would otherwise cap a queue
 * given in bytes). A shaped link without a queue gets the kernel backend's
 * default for its rate (topo/shape.h), so both backends queue alike; an
 * unshaped one never queues, and keeps linkd's. */
static void pack_queue(struct msgmap *m, const struct topo_link_params *p)
{
    uint64_t packets = p->queue.packets, bytes = p->queue.bytes;
    if (!packets && !bytes && !p->rate_bps) return;
    if (!packets && !bytes)
        bytes = topo_shape_default_queue_bytes(p->rate_bps, 2 * (p->delay_ns + p->jitter_ns),
                                               TOPO_SHAPE_DEFAULT_MTU + TOPO_SHAPE_ETH_HLEN);
    msgmap_u64(m, LINK_KEY(queue), packets);
    msgmap_u64(m, LINK_KEY(queue_bytes), bytes);
}

static void pack_emulation(struct msgmap *m, const struct topo_link_params *p)
{
    LINK_WIRE_KEYS(PACK_KEY)
    msgmap_bool(m, LINK_KEY(reorder), p->reorder);
    pack_queue(m, p);
    msgmap_u64(m, LINK_KEY(ecn_threshold), p->ecn_threshold.packets);
    msgmap_u64(m, LINK_KEY(ecn_threshold_bytes), p->ecn_threshold.bytes);
    if (p->gilbert) {
        LINK_WIRE_GILBERT_KEYS(PACK_KEY)
    }
}

static void pack_ipv4(struct msgmap *m, const char *key, uint32_t addr)
{
    struct in_addr a = {htonl(addr)};
    char s[INET_ADDRSTRLEN];
    msgmap_str(m, key, inet_ntop(AF_INET, &a, s, sizeof s) ? s : "");
}

/* A cut link's far end: linkd's socket on the underlay. */
static void pack_underlay_end(struct msgmap *m, const char *key, const struct linkd_client_end *e)
{
    struct msgmap end;
    msgmap_init(&end);
    msgmap_u64(&end, LINKD_ARG_VNI, e->vni);
    pack_ipv4(&end, LINKD_ARG_LOCAL, e->local);
    pack_ipv4(&end, LINKD_ARG_REMOTE, e->remote);
    msgmap_u64(&end, LINKD_ARG_PORT, LINKD_UNDERLAY_PORT(e->vni));
    msgmap_key(m, key);
    if (!msgmap_end(&end, &m->pk)) m->buf.failed = true;
}

static void pack_end(struct msgmap *m, const char *key, const struct linkd_client_end *e)
{
    if (e->vni) return pack_underlay_end(m, key, e);
    struct msgmap end;
    msgmap_init(&end);
    msgmap_str(&end, "netns_path", e->ns_path);
    msgmap_str(&end, "ifname", e->ifname);
    /* Down: the controller brings every end up itself, once IPv6 is off on
     * it (emu/tc_backend.c). */
    msgmap_bool(&end, "up", false);
    /* Our namespaces go when the run's processes do, and take their TAPs
     * along in one batch: far quicker than linkd's exit deleting them one
     * by one (emu/linkd/tap.h). */
    msgmap_bool(&end, "persist", true);
    msgmap_key(m, key);
    if (!msgmap_end(&end, &m->pk)) m->buf.failed = true;
}

/* The params of the next request, from m (freed), in lc->buf. */
static int set_params(struct linkd_client *lc, struct msgmap *m, char *err, size_t errlen)
{
    msgpack_sbuffer_clear(&lc->buf);
    if (!msgmap_end(m, &lc->pk)) return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

/* ---- set-up: link_add, drop_root (asynchronous, like the rest) ---- */

struct add_call {
    linkd_added_fn cb;
    void *ctx;
};

/* An underlay end has none: 0. */
static int end_ifindex(const msgpack_object *result, const char *key)
{
    struct proto_args args, end;
    int64_t ifindex = -1;
    proto_args_init(&args, result);
    const msgpack_object *o = proto_args_get(&args, key);
    if (!o) return -1;
    proto_args_init(&end, o);
    return proto_arg_i64(&end, "ifindex", &ifindex) == 1 ? (int)ifindex : -1;
}

static void on_add_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct add_call c = *(struct add_call *)ctx;
    free(ctx);
    if (error) return c.cb(c.ctx, -1, -1, error);
    int a = end_ifindex(result, "a"), b = end_ifindex(result, "b");
    if (a < 0 || b < 0 || (a == 0 && b == 0))
        return c.cb(c.ctx, -1, -1, "linkd: link_add reply lacks the ifindexes");
    c.cb(c.ctx, a, b, NULL);
}

int linkd_client_link_add(struct linkd_client *lc, int id, const struct linkd_client_end *a,
                          const struct linkd_client_end *b, const struct topo_link_params *params,
                          uint64_t seed, linkd_added_fn cb, void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    msgmap_u64(&m, "seed", seed);
    pack_end(&m, "a", a);
    pack_end(&m, "b", b);
    pack_emulation(&m, params);
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    struct add_call *c = malloc(sizeof *c);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    *c = (struct add_call){cb, ctx};
    if (peer_client_call(lc->pc, LINKD_METHOD_LINK_ADD, lc->buf.data, lc->buf.size, on_add_reply, c,
                         err, errlen) < 0) {
        free(c);
        return -1;
    }
    return 0;
}

int linkd_client_drop_root(struct linkd_client *lc, uid_t uid, gid_t gid, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_u64(&m, "uid", (uint32_t)uid);
    msgmap_u64(&m, "gid", (uint32_t)gid);
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    return peer_client_call(lc->pc, LINKD_METHOD_DROP_ROOT, lc->buf.data, lc->buf.size, cb, ctx,
                            err, errlen);
}

/* ---- run-time requests ---- */

static int call(struct linkd_client *lc, const char *method, peer_reply_fn cb, void *ctx, char *err,
                size_t errlen)
{
    return peer_client_call(lc->pc, method, lc->buf.data, lc->buf.size, cb, ctx, err, errlen);
}

int linkd_client_link_set(struct linkd_client *lc, int id, const struct topo_link_params *params,
                          peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    return linkd_client_link_set_dir(lc, id, LINKD_CLIENT_BOTH, params, cb, ctx, err, errlen);
}

/* One direction's parameters go in its own map, which linkd applies over
 * the top-level keys (here none): the other direction keeps its own. */
int linkd_client_link_set_dir(struct linkd_client *lc, int id, int dir,
                              const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                              char *err, size_t errlen)
{
    static const char *const names[] = {LINKD_DIR_AB, LINKD_DIR_BA};
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    if (dir == LINKD_CLIENT_BOTH) {
        pack_emulation(&m, params);
    } else {
        struct msgmap one;
        msgmap_init(&one);
        pack_emulation(&one, params);
        msgmap_key(&m, names[dir]);
        if (!msgmap_end(&one, &m.pk)) m.buf.failed = true;
    }
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    return call(lc, LINKD_METHOD_LINK_SET, cb, ctx, err, errlen);
}

int linkd_client_link_schedule(struct linkd_client *lc, int id, int dir, const uint64_t *at_us,
                               size_t n, uint64_t period_us, peer_reply_fn cb, void *ctx, char *err,
                               size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    msgmap_i64(&m, LINKD_ARG_DIR, dir);
    msgmap_u64(&m, LINKD_ARG_PERIOD_US, period_us);
    msgmap_key(&m, LINKD_ARG_AT_US);
    msgpack_pack_array(&m.pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_uint64(&m.pk, at_us[i]);
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    return call(lc, LINKD_METHOD_LINK_SCHEDULE, cb, ctx, err, errlen);
}

static int call_with_id(struct linkd_client *lc, const char *method, int id, peer_reply_fn cb,
                        void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, LINKD_ARG_ID, id);
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    return call(lc, method, cb, ctx, err, errlen);
}

int linkd_client_link_updown(struct linkd_client *lc, int id, bool up, peer_reply_fn cb, void *ctx,
                             char *err, size_t errlen)
{
    return call_with_id(lc, up ? LINKD_METHOD_LINK_UP : LINKD_METHOD_LINK_DOWN, id, cb, ctx, err,
                        errlen);
}

int linkd_client_link_stats(struct linkd_client *lc, int id, peer_reply_fn cb, void *ctx, char *err,
                            size_t errlen)
{
    return call_with_id(lc, LINKD_METHOD_LINK_STATS, id, cb, ctx, err, errlen);
}

static int stats_all(struct linkd_client *lc, bool reset_peak, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_bool(&m, "reset_peak", reset_peak);
    if (set_params(lc, &m, err, errlen) < 0) return -1;
    return call(lc, LINKD_METHOD_LINK_STATS_ALL, cb, ctx, err, errlen);
}

int linkd_client_stats_all(struct linkd_client *lc, peer_reply_fn cb, void *ctx, char *err,
                           size_t errlen)
{
    return stats_all(lc, true, cb, ctx, err, errlen);
}

int linkd_client_stats_peek(struct linkd_client *lc, peer_reply_fn cb, void *ctx, char *err,
                            size_t errlen)
{
    return stats_all(lc, false, cb, ctx, err, errlen);
}

/* ---- lifecycle ---- */

pid_t linkd_client_pid(const struct linkd_client *lc)
{
    return peer_client_pid(lc->pc);
}

void linkd_client_close(struct linkd_client *lc)
{
    if (lc && lc->pc) peer_client_close(lc->pc);
}

bool linkd_client_exited(const struct linkd_client *lc)
{
    return !lc || !lc->pc || peer_client_exited(lc->pc);
}

void linkd_client_kill(struct linkd_client *lc, int sig)
{
    if (lc && lc->pc) peer_client_kill(lc->pc, sig);
}

void linkd_client_free(struct linkd_client *lc)
{
    if (!lc) return;
    peer_client_free(lc->pc);
    msgpack_sbuffer_destroy(&lc->buf);
    free(lc);
}
