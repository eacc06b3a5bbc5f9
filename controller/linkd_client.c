/* linkd_client.c — requests to hiernet-linkd (see linkd_client.h). */
#include "controller/linkd_client.h"

#include "proto/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct linkd_client {
    struct peer_client *pc;
    msgpack_sbuffer buf;
    msgpack_packer pk;
};

struct linkd_client *linkd_client_start(struct ev_loop *loop, char *err, size_t errlen)
{
    char path[4096];
    if (peer_client_sibling_path("hiernet-linkd", "HIERNET_LINKD", path, sizeof path) < 0) {
        snprintf(err, errlen, "cannot locate the hiernet-linkd executable");
        return NULL;
    }
    struct linkd_client *lc = calloc(1, sizeof *lc);
    if (!lc) return snprintf(err, errlen, "out of memory"), NULL;
    msgpack_sbuffer_init(&lc->buf);
    msgpack_packer_init(&lc->pk, &lc->buf, msgpack_sbuffer_write);
    struct peer_spawn spec = {"@linkd", path, NULL, -1, NULL};
    lc->pc = peer_client_spawn(loop, &spec, NULL, err, errlen);
    if (!lc->pc) {
        linkd_client_free(lc);
        return NULL;
    }
    return lc;
}

/* ---- encoding ---- */

static void pack_key(msgpack_packer *pk, const char *key)
{
    proto_pack_str(pk, key);
}

static unsigned emulation_entries(const struct topo_link_params *p)
{
    return 5 + (p->queue.packets || p->queue.bytes ? 1 : 0) + (p->gilbert ? 4 : 0);
}

/* bw (0 = unlimited), delay, jitter, loss, reorder and the queue if set. */
static void pack_emulation(msgpack_packer *pk, const struct topo_link_params *p)
{
    pack_key(pk, "bw");
    msgpack_pack_uint64(pk, p->rate_bps);
    pack_key(pk, "delay");
    msgpack_pack_double(pk, p->delay_ns / 1e3);
    pack_key(pk, "jitter");
    msgpack_pack_double(pk, p->jitter_ns / 1e3);
    pack_key(pk, "loss");
    msgpack_pack_double(pk, p->loss);
    pack_key(pk, "reorder");
    p->reorder ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    if (p->queue.packets) {
        pack_key(pk, "queue");
        msgpack_pack_uint64(pk, p->queue.packets);
    } else if (p->queue.bytes) {
        pack_key(pk, "queue_bytes");
        msgpack_pack_uint64(pk, p->queue.bytes);
    }
    if (p->gilbert) {
        proto_pack_kv_f64(pk, "ge_p", p->ge_p);
        proto_pack_kv_f64(pk, "ge_r", p->ge_r);
        proto_pack_kv_f64(pk, "ge_h", p->ge_h);
        proto_pack_kv_f64(pk, "ge_k", p->ge_k);
    }
}

static void pack_end(msgpack_packer *pk, const char *key, const char *ns_path, const char *ifname)
{
    pack_key(pk, key);
    msgpack_pack_map(pk, 4);
    proto_pack_kv_str(pk, "netns_path", ns_path);
    proto_pack_kv_str(pk, "ifname", ifname);
    /* Down: the controller brings every end up itself, once IPv6 is off on
     * it (topo/kernel.c). */
    pack_key(pk, "up");
    msgpack_pack_false(pk);
    /* Our namespaces go when the run's processes do, and take their TAPs
     * along in one batch: far quicker than linkd's exit deleting them one
     * by one (topo/linkd/tap.h). */
    pack_key(pk, "persist");
    msgpack_pack_true(pk);
}

static msgpack_packer *begin(struct linkd_client *lc)
{
    msgpack_sbuffer_clear(&lc->buf);
    return &lc->pk;
}

/* ---- set-up: link_add, drop_root (asynchronous, like the rest) ---- */

struct add_call {
    linkd_added_fn cb;
    void *ctx;
};

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
    if (a <= 0 || b <= 0) return c.cb(c.ctx, -1, -1, "linkd: link_add reply lacks the ifindexes");
    c.cb(c.ctx, a, b, NULL);
}

int linkd_client_link_add(struct linkd_client *lc, int id, const char *ns_path_a,
                          const char *ifname_a, const char *ns_path_b, const char *ifname_b,
                          const struct topo_link_params *params, uint64_t seed, linkd_added_fn cb,
                          void *ctx, char *err, size_t errlen)
{
    msgpack_packer *pk = begin(lc);
    msgpack_pack_map(pk, 4 + emulation_entries(params));
    pack_key(pk, "id");
    msgpack_pack_int(pk, id);
    pack_key(pk, "seed");
    msgpack_pack_uint64(pk, seed);
    pack_end(pk, "a", ns_path_a, ifname_a);
    pack_end(pk, "b", ns_path_b, ifname_b);
    pack_emulation(pk, params);
    struct add_call *c = malloc(sizeof *c);
    if (!c) return snprintf(err, errlen, "out of memory"), -1;
    *c = (struct add_call){cb, ctx};
    if (peer_client_call(lc->pc, "link_add", lc->buf.data, lc->buf.size, on_add_reply, c, err,
                         errlen) < 0) {
        free(c);
        return -1;
    }
    return 0;
}

int linkd_client_drop_root(struct linkd_client *lc, uid_t uid, gid_t gid, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen)
{
    msgpack_packer *pk = begin(lc);
    msgpack_pack_map(pk, 2);
    pack_key(pk, "uid");
    msgpack_pack_uint32(pk, (uint32_t)uid);
    pack_key(pk, "gid");
    msgpack_pack_uint32(pk, (uint32_t)gid);
    return peer_client_call(lc->pc, "drop_root", lc->buf.data, lc->buf.size, cb, ctx, err, errlen);
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
    msgpack_packer *pk = begin(lc);
    msgpack_pack_map(pk, 1 + emulation_entries(params));
    pack_key(pk, "id");
    msgpack_pack_int(pk, id);
    pack_emulation(pk, params);
    return call(lc, "link_set", cb, ctx, err, errlen);
}

static int call_with_id(struct linkd_client *lc, const char *method, int id, peer_reply_fn cb,
                        void *ctx, char *err, size_t errlen)
{
    msgpack_packer *pk = begin(lc);
    msgpack_pack_map(pk, 1);
    pack_key(pk, "id");
    msgpack_pack_int(pk, id);
    return call(lc, method, cb, ctx, err, errlen);
}

int linkd_client_link_updown(struct linkd_client *lc, int id, bool up, peer_reply_fn cb, void *ctx,
                             char *err, size_t errlen)
{
    return call_with_id(lc, up ? "link_up" : "link_down", id, cb, ctx, err, errlen);
}

int linkd_client_link_stats(struct linkd_client *lc, int id, peer_reply_fn cb, void *ctx, char *err,
                            size_t errlen)
{
    return call_with_id(lc, "link_stats", id, cb, ctx, err, errlen);
}

int linkd_client_stats_all(struct linkd_client *lc, peer_reply_fn cb, void *ctx, char *err,
                           size_t errlen)
{
    msgpack_packer *pk = begin(lc);
    msgpack_pack_map(pk, 1);
    pack_key(pk, "reset_peak");
    msgpack_pack_true(pk);
    return call(lc, "link_stats_all", cb, ctx, err, errlen);
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
