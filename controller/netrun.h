/* netrun.h — one started network: its realised topology (none or kernel
 * backend; the user backend through hiernet-linkd), its peers, their
 * cgroups and its registry entries.
 *
 * Start is synchronous (namespaces, links, routes, qdiscs, fork/exec of the
 * peers); everything after runs on the libev loop. Stop closes the control
 * channels (peers exit on EOF); free kills and reaps any survivor, then
 * releases the namespaces, cgroups and registry entries.
 * Owns: the backend state, one peer client per host node, the cgroups. */
#pragma once

#include "controller/peer_client.h"
#include "topo/network.h"

#include <ev.h>
#include <stdbool.h>

struct registry;
struct netrun;

struct netrun_config {
    const char *run_id;        /* names the run's cgroups */
    struct registry *registry; /* may be NULL */
    uint32_t *loopback_next;   /* backend none: the run's next free 127.x.y.z (host order) */
};

typedef void (*netrun_exit_fn)(void *ctx, int node, int wait_status);

/* Builds the network and starts its peers. On failure nothing is left and
 * *env_error tells whether the cause is the environment (privilege, kernel
 * feature: exit code 3) rather than the scenario. */
int netrun_start(struct ev_loop *loop, struct topo_network *net, const struct netrun_config *cfg,
                 netrun_exit_fn on_exit, void *ctx, struct netrun **out, bool *env_error,
                 char *err, size_t errlen);
/* The backend actually used ("none", "kernel", "user") and why it was chosen. */
const char *netrun_backend(const struct netrun *nr);
const char *netrun_backend_reason(const struct netrun *nr);
/* "topology 0.9 s (namespaces ..., links ..., ...), peers 1.2 s": the start's phases. */
void netrun_describe_start(const struct netrun *nr, char *buf, size_t len);
struct peer_client *netrun_peer(const struct netrun *nr, int node);
int netrun_node_ns(const struct netrun *nr, int node); /* -1 on the none backend */
/* Params of the peers' "peers" command: {secret = the network's data
 * secret (peer/data_auth.h), table = {node name = address}}, so that
 * send{to = node} finds its target and the connection proves it belongs to
 * the network. Appends to out. A restarted peer gets them too. */
void netrun_pack_peer_table(const struct netrun *nr, msgpack_sbuffer *out);

/* Run-time link changes. Kernel backend: done at once, returns 0 (or -1).
 * User backend: the request is queued to linkd and 1 is returned; cb gets
 * the reply later. */
int netrun_link_set(struct netrun *nr, int link, const struct topo_link_params *params,
                    peer_reply_fn cb, void *ctx, char *err, size_t errlen);
int netrun_link_updown(struct netrun *nr, int link, bool up, peer_reply_fn cb, void *ctx,
                       char *err, size_t errlen);
/* Per-direction counters (user backend only): 1 and a later cb, or -1. */
int netrun_link_stats(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen);

struct record;
/* User backend: writes linkd's per-direction counters to rec once per
 * second (time_s relative to t0, a CLOCK_MONOTONIC instant). No-op on other
 * backends. rec must outlive the sampling (stopped at close/free). */
void netrun_sample_links(struct netrun *nr, struct record *rec, double t0);
/* The columns of those rows. */
const char *const *netrun_link_columns(size_t *n);

/* node:kill(): SIGKILLs the node's peer; its pending calls fail. */
void netrun_peer_kill(struct netrun *nr, int node);
/* node:restart(): a fresh peer (empty tensor store) in the same node. */
int netrun_peer_restart(struct netrun *nr, int node, char *err, size_t errlen);

/* Closes every control channel: the peers exit on EOF. Idempotent. */
void netrun_close_peers(struct netrun *nr);
bool netrun_peers_exited(const struct netrun *nr);
void netrun_kill_peers(struct netrun *nr, int sig);
/* Kills and reaps surviving peers, then releases the topology, cgroups and
 * registry entries. */
void netrun_free(struct netrun *nr);
