/* netrun.h — one started network: its realised topology (none or kernel
 * backend; the user backend through hiernet-linkd), its peers, their
 * cgroups and its registry entries.
 *
 * The build never blocks the libev loop: its kernel work (namespaces,
 * links, routes, qdiscs, waiting for the links to run) runs one step at a
 * time on a worker thread whose end the loop hears through an ev_async; the
 * peers are forked by the peer template while the links are made, and
 * their pids collected as the template's replies arrive; the kernel's and
 * CUDA's probes are done once per process on threads of their own
 * (controller/host_probe.h). Once built, partitions, heals and the kernel
 * backend's link changes run in order on that worker thread too, and a
 * restart's new peer starts when the old one's exit arrives. Stop closes the
 * control channels (peers exit on EOF); release (or free) kills any
 * survivor, then releases the namespaces, cgroups and registry entries,
 * waiting for the killed peers' exits, the template's and the cgroups'
 * removal on the loop (free, for when no loop runs, waits for them).
 * A network spread over machines is one netrun of parts (netrun_spread;
 * docs/design-notes.md, "The seam."): its build and release go to every
 * part, its peers are the local part's and those its agents relay, and a
 * change of one node or link of another machine's part fails naming it.
 * Owns: the backend state, one peer client per host node, the cgroups. */
#pragma once

#include "controller/net_error.h"
#include "controller/netprog.h"
#include "controller/peer_client.h"
#include "topo/network.h"

#include <ev.h>
#include <stdbool.h>

struct registry;
struct netrun;

typedef void (*netrun_phase_fn)(void *ctx);

struct netrun_config {
    const char *run_id;         /* names the run's cgroups */
    struct registry *registry;  /* may be NULL */
    uint32_t *loopback_next;    /* backend none: the run's next free 127.x.y.z (host order) */
    netrun_phase_fn links_made; /* may be NULL: the links are made, the peers' forks are
                                   being collected (called with the build's ctx) */
    const char *peer_path;      /* hiernet-peer; NULL: next to this executable (or
                                   HIERNET_PEER, which bypasses the peer template) */
    /* A part of a network spread over machines (topo/part.h, whose net is
     * planned): its routes, computed on the whole network (copied), and
     * the run's data secret (32 bytes, copied). NULL: a network of its own,
     * routed here, with a secret drawn here. */
    const struct topo_routing *routing;
    const uint8_t *data_secret;
    /* A network spread over machines (NULL: all of it here). */
    const struct netrun_spread *spread;
};

struct agent_group;
struct agent_client_options;
struct topo_machines;
/* Every agent of a spread build ready (hello and pings): g's agents may
 * be described and recorded (agent_group_describe, _write_json). */
typedef void (*netrun_agents_fn)(void *ctx, struct agent_group *g);
/* The machines of a network spread over several, and how to start their
 * agents: netrun_build measures this machine's underlay round trips, then
 * starts them (controller/agent_group.h), makes each machine's part
 * (topo/part.h) and, while the agents connect, builds this machine's
 * here; it sends every other part to its agent at that agent's hello.
 * The machines are read during netrun_build only; the agents' options'
 * strings must outlive the network. Not backend none: each part runs on
 * the backend it picks (a cut link: VXLAN on kernel, linkd UDP on user). */
struct netrun_spread {
    const struct topo_machines *machines;
    const struct agent_client_options *agents;
    /* Begins the line of an agent's failure before its part was sent
     * (copied; NULL: none), e.g. "network 'x': 2 of its 3 nodes are
     * placed on other machines than this one". */
    const char *why;
    /* Every machine's part built within this (seconds; 0: the default,
     * NETRUN_BUILD_TIMEOUT_S), the agents' start included, or the build
     * fails naming what is late, and every part is released. */
    double build_timeout_s;
    netrun_agents_fn agents_ready; /* may be NULL */
    void *agents_ctx;
};
/* A 999-node tree's parts build in under 5 s (docs/guide.md, the
 * multihost figures): 120 s is some 25 times that, for loaded machines. */
#define NETRUN_BUILD_TIMEOUT_S 120.0

typedef void (*netrun_exit_fn)(void *ctx, int node, int wait_status);

/* The build's end: nr is the started network and error NULL, or nr is NULL
 * after a failure (it is freed, nothing is left) and error says why
 * (NET_ERR_SCENARIO or NET_ERR_ENVIRONMENT; the node or link at fault, if
 * one step saw it: the kernel layer's steps, which see many links at once,
 * name theirs in the message only). Called once, from the loop. */
typedef void (*netrun_built_fn)(void *ctx, struct netrun *nr, const struct net_error *error);
/* Begins building the network and starting its peers; returns at once with
 * *out set (0), and `built` follows from the loop. -1 with *error when the
 * build cannot begin: nothing is left and `built` is not called. netrun_free
 * during the build abandons it (built not called). */
int netrun_build(struct ev_loop *loop, struct topo_network *net, const struct netrun_config *cfg,
                 netrun_exit_fn on_exit, void *ctx, netrun_built_fn built, void *built_ctx,
                 struct netrun **out, struct net_error *error);
/* The backend actually used ("none", "kernel", "user") and why it was chosen. */
const char *netrun_backend(const struct netrun *nr);
const char *netrun_backend_reason(const struct netrun *nr);
/* A spread network's underlay round trips, for run.json's "underlay": one
 * JSON object per pair of machines a cut link joins ({network, a, b,
 * rtt_ms, one_way_ms}), comma-separated; malloc'd, the caller's. NULL
 * for a network of one machine (or out of memory). */
char *netrun_underlay_json(const struct netrun *nr);
/* "2.051 s: backend 0.001, plan 0.020, namespaces 0.502, ...": the start's
 * phases in order (links: the veths or linkd's TAPs; interfaces, routes+
 * qdiscs and running: emu/tc_backend.h's passes; peers asked and peers forked:
 * the requests to the peer template and the wait for its forks). */
void netrun_describe_start(const struct netrun *nr, char *buf, size_t len);
struct peer_client *netrun_peer(const struct netrun *nr, int node);
int netrun_node_ns(const struct netrun *nr, int node); /* -1 on the none backend */
/* 0 when node is on this machine; -1 with err (the cause only, naming its
 * machine: "it is on machine m2: WHAT a remote node is not available yet")
 * when a network over machines has it on another. */
int netrun_node_here(const struct netrun *nr, int node, const char *what, char *err, size_t errlen);
/* node:run / node:spawn in a node of another machine's part: its agent
 * starts it (controller/netrun_parts.c); a remote netprog on list, its end
 * told as a local one's. NULL with err when it cannot be asked. */
struct netprog *netrun_program_remote(struct netrun *nr, struct netprog_list *list, int node,
                                      char *const argv[], netprog_done_fn done, void *ctx,
                                      char *err, size_t errlen);
/* Before node `from` sends to node `to`: queues peers{table = {to = its
 * address}} on from's channel, once per peer and target (again after a
 * restart), so that send{to = node} finds its target. Nodes without a peer
 * are ignored. 0, or -1 with err when the request cannot be queued. */
int netrun_tell_address(struct netrun *nr, int from, int to, char *err, size_t errlen);
/* Params of the peers' "peers" command that every peer gets at start and
 * after a restart: {secret = the network's data secret (peer/data_auth.h)},
 * so that its data connections prove they belong to the network, and after
 * a restart its incarnation (nonzero: how many restarts made it), which its
 * frames carry (peer/frame.h). Appends to out. */
void netrun_pack_peer_secret(const struct netrun *nr, uint64_t incarnation, msgpack_sbuffer *out);
/* How many times node's peer was restarted (node:restart()): the
 * incarnation an abort{incarnations=} names, so that it spares the
 * connections of a later one (peer/dataplane.h dataplane_abort). */
uint64_t netrun_peer_incarnation(const struct netrun *nr, int node);

/* Run-time link changes: 1 and a later cb (from the loop), or -1. Kernel
 * backend: done on a worker thread, in order with partitions and heals;
 * user backend: the request is queued to linkd. */
int netrun_link_set(struct netrun *nr, int link, const struct topo_link_params *params,
                    peer_reply_fn cb, void *ctx, char *err, size_t errlen);
int netrun_link_updown(struct netrun *nr, int link, bool up, peer_reply_fn cb, void *ctx, char *err,
                       size_t errlen);
struct topo_trace;
struct topo_trace_sample;
struct trace_player_opts;
/* Plays a link trace (controller/trace_player.h) on direction dir of the
 * link (0: a to b, 1: b to a, 2: both), from now, replacing a trace on the
 * same direction. Takes ownership of *trace (also on failure). A Mahimahi
 * trace is replayed exactly by linkd (user backend) and as its rate
 * series by the kernel backend. The traces stop with the network. */
int netrun_link_trace(struct netrun *nr, int link, int dir, struct topo_trace *trace,
                      const struct trace_player_opts *opts, char *err, size_t errlen);
/* The changes the trace of one direction (0, 1) applied so far. */
size_t netrun_link_trace_changes(const struct netrun *nr, int link, int dir,
                                 const struct topo_trace_sample **out);
/* Per-direction counters (user backend only): 1 and a later cb, or -1. */
int netrun_link_stats(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen);

struct record;
/* The run's clock: emulated seconds since the run started. */
typedef double (*netrun_clock_fn)(void *ctx);
/* Writes every link's per-direction counters to rec once per emulated
 * second (the network's dilation in real seconds), time_s from clock: on
 * the user backend linkd's, on the kernel backend the veths' (read off the
 * loop by controller/link_sampler.h). No-op on backend none. rec must
 * outlive the sampling (stopped at close/free). */
void netrun_sample_links(struct netrun *nr, struct record *rec, netrun_clock_fn clock, void *ctx);
/* The columns of those rows. */
const char *const *netrun_link_columns(size_t *n);
struct overload;
/* Each round of those samples also goes to o's data-plane account
 * (overload_note_links), and the stalls of the network's linkd processes
 * (controller/linkd_stalls.h) at stall_threshold_s (0: the network's own
 * linkd_stall_threshold): call before netrun_sample_links. */
void netrun_watch_dataplane(struct netrun *nr, struct overload *o, double stall_threshold_s);
/* tcp.csv: each host's TCP counters (controller/tcp_counters.h) into rec
 * at every links.csv sample, cumulative since its namespace was made.
 * Emulated backends only: on backend none every peer shares the host's
 * counters. */
void netrun_sample_tcp(struct netrun *nr, struct record *rec);
const char *const *netrun_tcp_columns(size_t *n);
struct tcp_counters;
/* Host node's counters now; -2 with err when its peer is not running (or
 * exited during the read), -1 with err otherwise (backend none, a switch,
 * counters that cannot be read). */
int netrun_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                        size_t errlen);

/* Handover (node:move): link l keeps its end at node `stays` and gets its
 * other end at node `to` (a host): the interface moves between the
 * namespaces, every host's routes follow. The emulated backends only; on
 * the user backend the link's state in linkd is untouched (its parameters,
 * its up/down). 0 once done, or -1 with err (a move that would
 * disconnect the network is refused before anything changes). A network
 * over machines asks the machine that holds the link to move it and every
 * machine to change its hosts' routes (netrun_parts_move): 1, and cb
 * follows once all answered, or 0 when only this machine's part had
 * changes (cb not called); the model takes the move only when every
 * machine applied its share: a failure (the first one's line) is undone
 * on every machine that applied some of it before cb (or -1) tells it; a
 * move whose link would become, stop being or change a cut link is
 * refused (-1). */
int netrun_link_move(struct netrun *nr, int l, int stays, int to, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen);
/* Whether the engine can move link l so (over machines: not a link that
 * would become, stop being or change a cut link): 0, or -1 with the line. */
int netrun_link_move_check(const struct netrun *nr, int l, int stays, int to, char *err,
                           size_t errlen);
struct topo_route_change;
/* A part's share of a move over machines: link l of its own moves (l -1:
 * none here; its end at `stays` stays, the other goes to `to`, part
 * indices), then its hosts' routes take the changes (part indices, each
 * host's consecutive; topo/route_change.h) in its model and its kernel.
 * The part's routes are the whole network's share, so they come computed,
 * not from this part's own model. 0, or -1 with err; a link move the
 * kernel refused before its interface left changes nothing. */
int netrun_link_move_routes(struct netrun *nr, int l, int stays, int to,
                            const struct topo_route_change *changes, size_t n, char *err,
                            size_t errlen);
/* node:kill(): SIGKILLs the node's peer; its pending calls fail. A node
 * of another machine's part is killed by its agent, whose refusal is
 * logged. */
void netrun_peer_kill(struct netrun *nr, int node);
/* The same, the agent's answer told to done (its refusal as the error,
 * naming the machine): 1 when done follows, 0 when the kill is done (a
 * node of this machine; or its agent is gone, whose loss ends the node). */
int netrun_peer_kill_then(struct netrun *nr, int node, peer_reply_fn done, void *ctx);
/* node:kill() asked its peer's end, and no restart since. */
bool netrun_peer_killed(const struct netrun *nr, int node);
/* The node's peer runs (not killed, not exited). */
bool netrun_peer_alive(const struct netrun *nr, int node);
/* Puts a partition in place (side[node]: group 1 or 2, 0 neither); see
 * emu_tc_partition. The emulated backends only. The routes change on
 * a worker thread, in order with the other kernel changes: 1 and cb once
 * they are in place (error: why not), 0 when in place at once (over
 * machines, no part had anything to answer; cb not called), or -1. */
int netrun_partition(struct netrun *nr, const unsigned char *side, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen);
/* Heals only the partitions that cut side's two groups (NULL: every one);
 * *healed (may be NULL) how many go (see emu_tc_heal). 0 when none
 * does or they all went at once (over machines, no part had anything to
 * answer; cb is not called), else 1 and cb once the routes are back (the
 * same worker thread), or -1 at once. */
int netrun_heal(struct netrun *nr, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                void *ctx, char *err, size_t errlen);
/* How many partitions are in place; whether one separates nodes a and b
 * (as asked for: from netrun_partition's call on; none without a kernel). */
size_t netrun_partitions(const struct netrun *nr);
bool netrun_separated(const struct netrun *nr, int a, int b);
/* node:restart(): a fresh peer (empty tensor store) in the same node. */
int netrun_peer_restart(struct netrun *nr, int node, char *err, size_t errlen);
/* The same on a network of one machine (an agent's part), done told once
 * the new peer has taken its data secret (error: it refused, or its
 * channel closed first): 0 (done follows), or -1 with err (done is not
 * told). */
int netrun_peer_restart_then(struct netrun *nr, int node, peer_reply_fn done, void *ctx, char *err,
                             size_t errlen);

/* Closes every control channel: the peers exit on EOF. Idempotent. */
void netrun_close_peers(struct netrun *nr);
bool netrun_peers_exited(const struct netrun *nr);
/* Signals every peer. Over machines: the local part's peers, and the other
 * parts' peers end by their agents' teardown, which SIGKILLs them (it is
 * asked here if netrun_close_peers has not; netrun_parts.c says why that is
 * the same for the one caller, the stop deadline's SIGKILL). */
void netrun_kill_peers(struct netrun *nr, int sig);

typedef void (*netrun_released_fn)(void *ctx);
/* Releases the network without waiting on the loop: kills the surviving
 * peers and removes the topology and the registry's entries at once; the
 * killed peers' exits (reaped from the loop), then the peer template's exit
 * and the cgroups' removal (a killed peer leaves its group a moment after
 * it is reaped) are waited for on the loop, at most about a second each.
 * Then nr is freed and released(ctx) called (from the loop, never from
 * inside this call; released may be NULL). Not during a build (netlife
 * releases a built network): the build's step off the loop would be
 * joined here. */
void netrun_release(struct netrun *nr, netrun_released_fn released, void *ctx);
/* The same, done before it returns (the same bounded waits, here): for
 * when the loop runs no more, and for a netrun whose release is under way
 * (released is then not called; nor is `built` of a failed build). NULL is
 * a no-op. */
void netrun_free(struct netrun *nr);
