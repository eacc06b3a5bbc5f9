/* netrun_peers.c — the peers of the host nodes: their command lines, their
 * start (through the peer template, or exec'd), kill and restart, and the
 * address book they learn one entry at a time. */
#include "controller/netrun_internal.h"

#include "controller/log.h"
#include "controller/peer_template.h"
#include "controller/registry.h"
#include "kernels/dataset.h"
#include "emu/netns.h"
#include "proto/msgmap.h"

#include <errno.h>
#include <signal.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- peers ---- */

/* The identity peers and linkd drop to, and the network's data secret. */
int netrun_prepare_helpers(struct netrun *nr, bool *env_error, char *err, size_t errlen)
{
    if (!nr->secret_given &&
        getrandom(nr->data_secret, sizeof nr->data_secret, 0) != (ssize_t)sizeof nr->data_secret) {
        *env_error = true;
        return snprintf(err, errlen, "network '%s': getrandom: %s", nr->net->name, strerror(errno)),
               -1;
    }
    if (privilege_helper_identity(&nr->helper, err, errlen) < 0) {
        *env_error = true;
        return -1;
    }
    char why[256];
    if (nr->helper.drop && dataset_cache_grant(nr->helper.uid, nr->helper.gid, why, sizeof why) < 0)
        ctl_log("warning: %s; peers decompress datasets into memory", why);
    return 0;
}

static void restart_exec(struct netrun_peer *p);

/* The last thing the exiting peer's client does (peer_client.h): a
 * restart's old client may be freed here. */
static void on_peer_exit(void *ctx, int status)
{
    struct netrun_peer *p = ctx;
    if (p->nr->on_exit) p->nr->on_exit(p->nr->ctx, p->node, status);
    if (p->old && peer_client_exited(p->old)) restart_exec(p);
}

/* A peer's command line (after the executable) and environment. */
struct peer_argv {
    char threads[16], speed[32], dilation[32], blas[48];
    const char *args[22];
    const char *env[2];
};

static void peer_argv_build(const struct netrun *nr, const struct topo_node *n, struct peer_argv *a)
{
    snprintf(a->threads, sizeof a->threads, "%d", n->threads > 0 ? n->threads : 1);
    snprintf(a->speed, sizeof a->speed, "%.17g", n->speed > 0 ? n->speed : 1.0);
    double dilation = nr->net->dilation;
    snprintf(a->dilation, sizeof a->dilation, "%.17g", dilation > 1 ? dilation : 1.0);
    snprintf(a->blas, sizeof a->blas, "OPENBLAS_NUM_THREADS=%s", a->threads);
    /* --data-auth: the secret follows on the control channel (peers). */
    const char *args[] = {"--node",   n->name,   "--addr",      n->addr,      "--threads",
                          a->threads, "--speed", a->speed,      "--dilation", a->dilation,
                          "--device", n->device, "--data-auth", NULL,         NULL,
                          NULL,       NULL,      NULL};
    int next = 13;
    if (nr->helper.drop) { /* a root controller's peers give up root once set up */
        args[next++] = "--user";
        args[next++] = nr->helper.arg;
    }
    if (n->profile[0]) { /* profiled compute (kernels/profile.h) */
        args[next++] = "--profile";
        args[next++] = n->profile;
    }
    memcpy(a->args, args, sizeof args);
    a->env[0] = a->blas;
    a->env[1] = NULL;
}

/* The peer of `node` runs as pid: limit it, register it. */
static int register_peer(struct netrun *nr, int node, pid_t pid, char *err, size_t errlen)
{
    if (netrun_limit_cpu(nr, node, pid, err, errlen) < 0) return -1;
    if (!nr->registry) return 0;
    unsigned long inode = nr->kernel ? emu_netns_inode(netrun_node_ns(nr, node)) : 0;
    return registry_add_node(nr->registry, nr->net->name, nr->net->nodes[node].name, pid, inode,
                             err, errlen);
}

/* One peer by exec: for a restart, when no template runs. */
static int spawn_peer(struct netrun *nr, const char *peer_path, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    struct netrun_peer *p = &nr->peers[node];
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    struct peer_spawn spec = {n->name, peer_path, a.args, netrun_node_ns(nr, node), a.env};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    p->client = peer_client_spawn(nr->loop, &spec, &hooks, err, errlen);
    if (!p->client) return -1;
    return register_peer(nr, node, peer_client_pid(p->client), err, errlen);
}

/* One host's peer: exec'd, or asked of the template. */
static int request_peer(struct netrun *nr, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    struct netrun_peer *p = &nr->peers[node];
    if (!nr->template) return spawn_peer(nr, nr->peer_path, node, err, errlen);
    struct peer_spawn spec = {.node = n->name};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    int child_end;
    p->client = peer_client_open(nr->loop, &spec, &hooks, &child_end, err, errlen);
    if (!p->client) return -1;
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    p->template_id = peer_template_request(nr->template, a.args, child_end,
                                           netrun_node_ns(nr, node), err, errlen);
    close(child_end);
    return p->template_id < 0 ? -1 : 0;
}

/* Every host's peer, asked of a template (controller/peer_template.h): the
 * forks run on another core while the links are made; netrun_adopt_peers then
 * collects them. With HIERNET_PEER set, each peer is exec'd instead, so a
 * wrapper there (valgrind, strace, a test's fake peer) sees every peer.
 * A failure for one node names it, and *node is its index. */

int netrun_request_peers(struct netrun *nr, int *node, char *err, size_t errlen)
{
    if (!nr->peer_path[0] && peer_client_sibling_path("hiernet-peer", "HIERNET_PEER", nr->peer_path,
                                                      sizeof nr->peer_path) < 0)
        return snprintf(err, errlen, "cannot locate the hiernet-peer executable"), -1;
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        nr->peers[i] = (struct netrun_peer){nr, (int)i, NULL, -1, NULL};
    const char *wrapper = getenv("HIERNET_PEER");
    if (!(wrapper && *wrapper) || nr->peer_path_given) {
        nr->template = peer_template_start(nr->loop, nr->peer_path, err, errlen);
        if (!nr->template) return -1;
        peer_template_on_settled(nr->template, netrun_on_template_settled, nr);
    }
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        if (!topo_node_local_host(&nr->net->nodes[i])) continue;
        char why[512];
        if (request_peer(nr, (int)i, why, sizeof why) < 0) {
            *node = (int)i;
            return snprintf(err, errlen, "node '%s': %s", nr->net->nodes[i].name, why), -1;
        }
    }
    return 0;
}

/* Collects the peers the template started; runs after a failed start too,
 * so every started peer is known (and killed) when the network is freed.
 * The first failure names its node (*node). */
int netrun_adopt_peers(struct netrun *nr, int *node, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; nr->template && i < nr->net->n_nodes; i++) {
        struct netrun_peer *p = &nr->peers[i];
        if (!p->client || p->template_id < 0) continue;
        char why[512];
        /* Settled (collect_peers): nothing is waited for here. */
        pid_t pid = peer_template_pid(nr->template, p->template_id, 0, why, sizeof why);
        p->template_id = -1;
        if (pid > 0) peer_client_adopt(p->client, pid);
        if ((pid < 0 || register_peer(nr, (int)i, pid, why, sizeof why) < 0) && rc == 0) {
            *node = (int)i;
            snprintf(err, errlen, "node '%s': %s", nr->net->nodes[i].name, why);
            rc = -1;
        }
    }
    /* The template stays until the peers are gone (peer_template.h). */
    if (rc == 0 && nr->registry) rc = registry_commit(nr->registry, err, errlen);
    return rc;
}

bool netrun_peer_killed(const struct netrun *nr, int node)
{
    return nr->peers[node].killed;
}

bool netrun_peer_alive(const struct netrun *nr, int node)
{
    const struct peer_client *pc = nr->peers[node].client;
    return pc && !nr->peers[node].killed && !peer_client_exited(pc);
}

int netrun_peer_kill_then(struct netrun *nr, int node, peer_reply_fn done, void *ctx)
{
    int rc = 0;
    if (nr->parts) {
        char err[512];
        int n = netrun_parts_node(nr, node, "killing", err, sizeof err);
        if (n >= 0)
            netrun_peer_kill(netrun_parts_inner(nr), n);
        else if (netrun_parts_kill_remote(nr, node, done, ctx, err, sizeof err) < 0)
            /* the agent is gone: its loss ended the node's relayed client */
            ctl_log("node '%s': kill: %s", nr->net->nodes[node].name, err);
        else
            rc = 1;
    }
    nr->peers[node].killed = true;
    if (nr->peers[node].client) peer_client_kill(nr->peers[node].client, SIGKILL);
    return rc;
}

static void on_kill_answered(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    const char *node = ctx;
    if (error) ctl_log("node '%s': kill: %s", node, error);
}

void netrun_peer_kill(struct netrun *nr, int node)
{
    netrun_peer_kill_then(nr, node, on_kill_answered, nr->net->nodes[node].name);
}

static void on_restart_peers(void *ctx, const char *error, const msgpack_object *result)
{
    if (error) ctl_log("a restarted peer refused its data secret: %s", error);
}

/* The old peer of a restart has exited: the new one starts on the channel
 * opened for it, which its calls have been queued on. A failure is logged
 * and closes the channel: those calls fail ("peer stopped"). */
static void restart_exec(struct netrun_peer *p)
{
    struct netrun *nr = p->nr;
    const struct topo_node *n = &nr->net->nodes[p->node];
    peer_client_free(p->old);
    p->old = NULL;
    if (p->killed) { /* node:kill() again meanwhile: it stays down */
        close(p->child_end);
        peer_client_close(p->client);
        return;
    }
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    struct peer_spawn spec = {n->name, nr->peer_path, a.args, netrun_node_ns(nr, p->node), a.env};
    char err[512];
    int rc = peer_client_exec(p->client, &spec, p->child_end, err, sizeof err);
    if (rc == 0) rc = register_peer(nr, p->node, peer_client_pid(p->client), err, sizeof err);
    if (rc == 0 && nr->registry) rc = registry_commit(nr->registry, err, sizeof err);
    if (rc < 0) {
        ctl_log("node '%s': restart: %s", n->name, err);
        peer_client_close(p->client);
    }
}

/* The old peer still runs: SIGKILLed, and the new one waits for its exit
 * on the loop (it frees its memory first: tens of ms for half a GiB), so
 * that it finds the node's data port free. */
static int restart_after_exit(struct netrun *nr, struct netrun_peer *p, char *err, size_t errlen)
{
    struct peer_spawn spec = {.node = nr->net->nodes[p->node].name};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    struct peer_client *client =
        peer_client_open(nr->loop, &spec, &hooks, &p->child_end, err, errlen);
    if (!client) return -1;
    peer_client_kill(p->client, SIGKILL);
    p->old = p->client;
    p->client = client;
    return 0;
}

int netrun_peer_restart_then(struct netrun *nr, int node, peer_reply_fn done, void *ctx, char *err,
                             size_t errlen)
{
    if (nr->parts)
        return snprintf(err, errlen,
                        "a network over machines restarts through netrun_peer_restart"),
               -1;
    struct netrun_peer *p = &nr->peers[node];
    if (p->old) return snprintf(err, errlen, "a restart is under way"), -1;
    p->killed = false;
    free(p->told); /* the fresh peer knows no address */
    p->told = NULL;
    if (p->client && !peer_client_exited(p->client)) {
        if (restart_after_exit(nr, p, err, errlen) < 0) return -1;
    } else {
        peer_client_free(p->client);
        p->client = NULL;
        if (spawn_peer(nr, nr->peer_path, node, err, errlen) < 0) return -1;
    }
    /* Committed before the call: once it is queued, done is told. */
    if (nr->registry && registry_commit(nr->registry, err, errlen) < 0) return -1;
    /* Its data secret, as at start, and its incarnation: queued before any
     * call of the caller's, so the peer has them when it answers one. */
    p->incarnation++;
    msgpack_sbuffer secret;
    msgpack_sbuffer_init(&secret);
    netrun_pack_peer_secret(nr, p->incarnation, &secret);
    int rc = peer_client_call(p->client, "peers", secret.data, secret.size, done, ctx, err, errlen);
    msgpack_sbuffer_destroy(&secret);
    return rc;
}

int netrun_peer_restart(struct netrun *nr, int node, char *err, size_t errlen)
{
    if (!nr->parts) return netrun_peer_restart_then(nr, node, on_restart_peers, NULL, err, errlen);
    /* The part's engine that restarts it (this machine's inner one, or an
     * agent's) counts the same restart for the peer it starts. */
    int rc = netrun_parts_restart(nr, node, err, errlen);
    if (rc == 0) nr->peers[node].incarnation++;
    return rc;
}

uint64_t netrun_peer_incarnation(const struct netrun *nr, int node)
{
    return nr->peers[node].incarnation;
}

void netrun_pack_peer_secret(const struct netrun *nr, uint64_t incarnation, msgpack_sbuffer *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_bin(&m, "secret", nr->data_secret, sizeof nr->data_secret);
    if (incarnation) msgmap_u64(&m, "incarnation", incarnation);
    msgmap_end(&m, &pk); /* the secret fits the builder's inline buffer: it cannot fail */
}

/* ---- the peers' address book ----
 *
 * A peer learns a node's address (peers{table = {name = addr}}) just before
 * its first send to that node, not at start: at start every peer would get
 * the whole book, which for a thousand nodes is 60 MB of requests and a
 * million entries parsed, a fifth of the start's CPU, while a parameter
 * server's workers each only ever need one entry. */

/* Nothing to do: when the peer cannot take the address, the send queued
 * behind it fails and says why. */
static void on_told(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx, (void)error, (void)result;
}

int netrun_tell_address(struct netrun *nr, int from, int to, char *err, size_t errlen)
{
    struct netrun_peer *p = &nr->peers[from];
    if (to < 0 || (size_t)to >= nr->net->n_nodes || !p->client || !nr->peers[to].client) return 0;
    if (!p->told) p->told = calloc((nr->net->n_nodes + 7) / 8, 1);
    if (!p->told) return snprintf(err, errlen, "out of memory"), -1;
    if (p->told[to / 8] & (1u << (to % 8))) return 0;
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    struct msgmap params, table;
    msgmap_init(&params);
    msgmap_init(&table);
    msgmap_str(&table, nr->net->nodes[to].name, nr->net->nodes[to].addr);
    msgmap_key(&params, "table");
    if (!msgmap_end(&table, &params.pk) || !msgmap_end(&params, &pk)) {
        msgmap_free(&params);
        msgpack_sbuffer_destroy(&buf);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    int rc = peer_client_call(p->client, "peers", buf.data, buf.size, on_told, NULL, err, errlen);
    msgpack_sbuffer_destroy(&buf);
    if (rc == 0) p->told[to / 8] |= (uint8_t)(1u << (to % 8));
    return rc;
}

bool netrun_peers_exited(const struct netrun *nr)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client && !peer_client_exited(nr->peers[i].client)) return false;
    return true;
}

void netrun_kill_peers(struct netrun *nr, int sig)
{
    if (nr->parts) return netrun_parts_kill_peers(nr, sig);
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client) peer_client_kill(nr->peers[i].client, sig);
}
