/* netlife.h — the network life cycle engine: one network's way from
 * defined to stopped, driven by the libev loop, without any Lua state.
 *
 *   defined -> building -> spawning -> handshake -> running -> stopping -> stopped
 *
 * building   netrun_build's kernel work (off the loop, controller/netrun.h)
 * spawning   the links are made; the peer template's forks are collected
 * handshake  every peer is sent peers{secret=} and start waits for all answers
 * running    every peer answered
 * stopping   channels closed (peers exit on EOF); SIGKILL after the deadline
 * stopped    every peer has exited (netlife_free releases the rest)
 *
 * A build that fails goes back to defined (nothing is left, the network may
 * start again); a handshake that fails, and a stop asked for during the
 * start, go on to stopping. Each transition is reported once, through
 * on_transition, with a structured error when it is a failure.
 *
 * The run (struct netlife_run) owns what the run's networks share: the run
 * registry (opened at the first start if the caller opened none, after
 * sweeping what crashed runs left), links.csv (the user backend's counters,
 * opened at the first such network), the loopback addresses of backend
 * none and the list of its networks. It keeps run.json's account of them
 * (the caller's struct run): the backend the first started network runs on,
 * and, each time a network starts, the topology of every network started so
 * far and the overload report, written at once. Every host of a network
 * joins the run's overload account (the caller's, if any) when its peers
 * are up. Owns: per network its netrun, its deadlines, handshake state,
 * overload ids and the programs run in its nodes (controller/netprog.h:
 * SIGTERM at the stop, SIGKILL at the release). */
#pragma once

#include "controller/netprog.h"
#include "controller/netrun.h"
#include "topo/network.h"

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

enum netlife_state {
    NETLIFE_DEFINED,
    NETLIFE_BUILDING,
    NETLIFE_SPAWNING,
    NETLIFE_HANDSHAKE,
    NETLIFE_RUNNING,
    NETLIFE_STOPPING,
    NETLIFE_STOPPED,
};

struct netlife_run {
    struct ev_loop *loop;
    const char *dir;           /* the results directory, or NULL: no registry, no records */
    struct registry *registry; /* borrowed if set before the first start, else opened here */
    bool registry_tried;
    struct record *links_record; /* links.csv, once a network has counters */
    struct record *tcp_record;   /* tcp.csv, alongside it */
    uint32_t loopback_next;      /* backend none: the next free 127.x.y.z (host order) */
    int loopback_claim;          /* the claim on its 127.N.0.0/16 (loopback_claim.h), or -1 */
    netrun_clock_fn clock;       /* the run's emulated seconds */
    void *clock_ctx;
    const char *peer_path;     /* NULL: hiernet-peer next to this executable */
    struct run *record;        /* run.json's bookkeeping (controller/run.h), or NULL */
    struct overload *overload; /* the run's overload account (controller/overload.h), or NULL */
    struct netlife *networks;  /* every network of the run, newest first */
};

void netlife_run_init(struct netlife_run *run, struct ev_loop *loop, const char *dir);
/* Opens the run registry under dir (named after dir's last component),
 * once: a run that keeps results opens it before its first run.json, so
 * that a run.json saying "running" always has an entry a sweep finds after
 * a SIGKILL. NULL with err when it cannot (the run goes on without). */
struct registry *netlife_run_open_registry(struct netlife_run *run, char *err, size_t errlen);
/* Removes what crashed runs left behind (registry_sweep_stale), logging
 * how much; once the run's own entry exists, so that it is never taken for
 * a crashed one. */
void netlife_run_sweep_stale(void);
/* The run registry: the one set or opened, or opened now (once, then the
 * sweep) under dir. NULL without. */
struct registry *netlife_run_registry(struct netlife_run *run);
/* Puts the overload account's report into run.json's record (the run's end
 * calls it; a start does it itself). */
void netlife_run_publish_overload(struct netlife_run *run);
/* Closes links.csv, after the networks are freed, and gives up the run's
 * loopback /16. The registry, once open, is closed by the run's owner
 * (registry_close_and_remove, last of all). */
void netlife_run_close(struct netlife_run *run);

struct netlife;

struct netlife_hooks {
    /* from -> to; error is NULL unless the transition is a failure. */
    void (*on_transition)(void *ctx, enum netlife_state from, enum netlife_state to,
                          const struct net_error *error);
    netrun_exit_fn on_peer_exit; /* after the engine's own handling; may be NULL */
    void *ctx;
};

struct netlife_options {
    double start_timeout_s; /* handshake deadline */
    double stop_timeout_s;  /* peers exit on EOF within this, or are SIGKILLed */
    /* Its machines and how to start their agents (netrun_config.spread:
     * read by netlife_start), or NULL: all of it here. */
    const struct netrun_spread *spread;
};

/* A network in state defined; topo stays the caller's and must outlive it. */
struct netlife *netlife_new(struct netlife_run *run, struct topo_network *topo,
                            const struct netlife_hooks *hooks);
/* defined -> building. -1 (state unchanged, error filled, nothing reported)
 * when the build cannot even begin. */
int netlife_start(struct netlife *nl, const struct netlife_options *opts, struct net_error *error);
/* Asks the network to stop (its programs get SIGTERM); true when it is
 * already stopped (or was never started). A start in flight ends first, failing with
 * NET_ERR_STOPPED. */
bool netlife_stop(struct netlife *nl);
enum netlife_state netlife_state(const struct netlife *nl);
const char *netlife_state_name(enum netlife_state s);
/* The started network (peers, links), or NULL before the build ends. */
struct netrun *netlife_netrun(const struct netlife *nl);
/* The topology it was made with (the caller's). */
struct topo_network *netlife_topology(const struct netlife *nl);
/* The last start's failure (the build's, the handshake's, a stop during
 * it), or NULL when the last start succeeded or is still under way. */
const struct net_error *netlife_start_error(const struct netlife *nl);
/* The overload account's id of node (a host whose peers came up), or -1. */
int netlife_overload_id(const struct netlife *nl, int node);
/* node:run, node:spawn: argv in host node's namespace, its registry entry
 * and its end the engine's (netprog.h). NULL with err (the cause only:
 * the caller names the node) when the network is not running, the node
 * is a switch or the program cannot start. */
struct netprog *netlife_program_spawn(struct netlife *nl, int node, char *const argv[],
                                      netprog_done_fn done, void *ctx, char *err, size_t errlen);
/* node:kill(): the node crashes: its peer is SIGKILLed (its pending calls
 * fail) and its programs too; a node of another machine by its agent,
 * whose answer is done's (its refusal as the error, naming the machine):
 * 1 when done follows, 0 when the kill is done (a node here, an agent
 * gone, nothing built yet: done is not told). */
int netlife_node_kill(struct netlife *nl, int node, peer_reply_fn done, void *ctx);
/* node:restart(): a fresh peer (empty tensor store) in the same node. 0,
 * or -1 with err (the cause only). */
int netlife_node_restart(struct netlife *nl, int node, char *err, size_t errlen);
/* No peer of it is still running. */
bool netlife_exited(const struct netlife *nl);
/* Releases the network's peers, topology, cgroups and registry entries
 * without waiting on the loop (netrun_release); netlife_released says when
 * that is done. A network still building is left to netlife_free. After
 * it, only netlife_exited, netlife_released and netlife_free. */
void netlife_release(struct netlife *nl);
bool netlife_released(const struct netlife *nl);
/* ---- A running network (controller/netlife_ops.c) ----
 * The queries take NULL for a network never started. The changes check
 * that the network runs (else -1 with err "network is <state>", the cause
 * only: the caller names the network, node or link) and hand the change
 * to netrun (controller/netrun.h says how each one is done). */

/* The state as a person reads it (net:state()): "not started" (defined,
 * or NULL), "starting" (building, spawning, handshake), "started",
 * "stopping", "stopped". */
const char *netlife_state_word(const struct netlife *nl);
/* Defined (or NULL): nodes and links may still be added, start begins. */
bool netlife_defined(const struct netlife *nl);
/* Running: every peer answered and it is not released; run-time changes
 * and programs are accepted. */
bool netlife_running(const struct netlife *nl);
/* The peers take calls: handshake or running. */
bool netlife_peers_up(const struct netlife *nl);
/* Host node's peer client while the peers are up, else NULL. */
struct peer_client *netlife_peer(const struct netlife *nl, int node);
/* netrun_tell_address while the peers are up. */
int netlife_tell_address(struct netlife *nl, int from, int to, char *err, size_t errlen);

enum netlife_link_op { NETLIFE_LINK_SET, NETLIFE_LINK_DOWN, NETLIFE_LINK_UP, NETLIFE_LINK_STATS };
/* link:set (params), :down, :up, :stats. 1 and cb later (from the loop),
 * 0 when the backend does not emulate links (backend none: cb is not
 * called), -1 with err. The topology model's link (its params, its up)
 * follows once the change took effect: at once for 0, before cb without
 * an error for 1. */
int netlife_link_change(struct netlife *nl, int link, enum netlife_link_op op,
                        const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                        char *err, size_t errlen);
struct topo_trace;
struct topo_trace_sample;
struct trace_player_opts;
/* netrun_link_trace and netrun_link_trace_changes (0 changes before the
 * start); the trace is taken over, also on failure. */
int netlife_link_trace(struct netlife *nl, int link, int dir, struct topo_trace *trace,
                       const struct trace_player_opts *opts, char *err, size_t errlen);
size_t netlife_link_trace_changes(const struct netlife *nl, int link, int dir,
                                  const struct topo_trace_sample **out);
/* Whether that move can be made (netrun_link_move_check); 0 when the
 * network is not running (the move itself says so). */
int netlife_link_move_check(const struct netlife *nl, int link, int stays, int to, char *err,
                            size_t errlen);
/* node:move's handover: netrun_link_move (0 done, 1 cb follows, -1). */
int netlife_link_move(struct netlife *nl, int link, int stays, int to, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen);
/* net:partition, net:heal: netrun_partition, netrun_heal. */
int netlife_partition(struct netlife *nl, const unsigned char *side, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen);
int netlife_heal(struct netlife *nl, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                 void *ctx, char *err, size_t errlen);
/* net:reachable: running, both peers alive and no partition between. */
bool netlife_reachable(const struct netlife *nl, int a, int b);
struct tcp_counters;
/* net:tcp: netrun_tcp_counters (-2: the peer is not running now). */
int netlife_tcp_counters(struct netlife *nl, int node, struct tcp_counters *out, char *err,
                         size_t errlen);

/* Kills and reaps what is left, releases everything (any state), finishing
 * a release under way before it returns (controller/netrun.h netrun_free). */
void netlife_free(struct netlife *nl);
