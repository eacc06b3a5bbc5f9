/* agent_client.h — the controller's end of one machine's `hiernet agent`
 * (issue 20; docs/design-notes.md, "Several machines, the design").
 *
 * Starts the agent with `ssh -o BatchMode=yes [-l USER] ADDRESS exec BIN
 * agent ...` (OpenSSH, multiplexed through a ControlPath in the caller's
 * private directory) or `srun -u --overlap -N1 -n1 -w HOST BIN agent ...`,
 * the child's stdin and stdout one end of a socketpair that controller/peer_client.h
 * drives (framing, request ids, replies), its stderr copied into the log
 * line by line with the machine's name. On the libev loop, never blocking:
 * hello, then `hello_pings` pings back to back (the clock estimate of
 * controller/clock_estimate.h), then ready; after that a ping a second.
 * Deadlines: no hello answer within hello_timeout_s, or a ping unanswered
 * for ping_timeout_s, fails the agent naming the machine. Killing the ssh
 * child (release, or the controller's death: its parent-death signal) is
 * the agent's EOF.
 *
 * BIN is HIERNET_REMOTE_BIN when set, else this program's own path (the
 * same binary at the same path on every machine). ssh reads the client
 * configuration named by HIERNET_SSH_CONFIG (ssh -F) when set, else its
 * usual ~/.ssh/config.
 *
 * Once ready: `build` sends the machine's part, and the remote nodes'
 * peer control channels are relayed as `call` notifications (controller/
 * agent_relay.h); the agent's `exit` notifications end them as a local
 * peer's exit does, and so does the agent's loss.
 *
 * Owns: the peer_client (hence the child), the stderr pipe and its
 * watcher, the timers, the relay. */
#pragma once

#include "controller/clock_estimate.h"
#include "controller/net_error.h"
#include "controller/peer_client.h"
#include "proto/agent_wire.h"
#include "topo/machines.h"
#include "topo/network.h"

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#define AGENT_ENV_REMOTE_BIN "HIERNET_REMOTE_BIN"
#define AGENT_ENV_SSH_CONFIG "HIERNET_SSH_CONFIG"

/* Seconds ssh waits for a machine's TCP connection (ssh -o ConnectTimeout). */
#define AGENT_SSH_CONNECT_TIMEOUT "15"

struct agent_client;

struct agent_client_options {
    const char *run_id;      /* in hello, for the agent's log */
    const char *version;     /* sent in hello: the agent refuses another than its own */
    const char *control_dir; /* private directory for ssh's ControlPath, or NULL: none */
    unsigned control_slot;   /* the socket's name in it: one per machine of a group */
    bool slurm;              /* srun instead of ssh */
    double hello_timeout_s;  /* the whole start: hello and the first pings */
    int hello_pings;         /* pings before ready (CLOCK_ESTIMATE_SAMPLES) */
    double ping_interval_s;  /* after ready */
    double ping_timeout_s;   /* an unanswered ping this old fails the agent */
};

struct agent_client_hooks {
    /* hello answered and the first pings back: the clock estimate holds. */
    void (*on_ready)(void *ctx, struct agent_client *ac);
    /* Once, before or after ready: why, one line naming the machine. */
    void (*on_failed)(void *ctx, struct agent_client *ac, const char *why);
    /* The teardown was answered, or the agent is gone: once per teardown. */
    void (*on_down)(void *ctx, struct agent_client *ac);
    void *ctx;
    /* hello answered (the pings follow): requests may go from here on,
     * `build` included. NULL: not told. */
    void (*on_hello)(void *ctx, struct agent_client *ac);
};

/* Defaults: 30 s for the start, 8 pings, one a second, 10 s to answer. */
void agent_client_options_default(struct agent_client_options *o);

/* Starts the agent of machine m (copied). NULL with err when no child
 * could be started; every later failure goes to on_failed. */
struct agent_client *agent_client_start(struct ev_loop *loop, const struct topo_machine *m,
                                        const struct agent_client_options *o,
                                        const struct agent_client_hooks *hooks, char *err,
                                        size_t errlen);
/* The build's end: reply (the part's registry id and node count) and
 * error NULL, or error (reply NULL): code is an enum net_error_code, node
 * and link the names at fault ("" none), message one line that begins
 * with "machine 'NAME': ". Called once, from the loop; the agent's loss
 * during the build is such an error too. */
typedef void (*agent_built_fn)(void *ctx, struct agent_client *ac,
                               const struct agent_build_reply *reply,
                               const struct agent_build_error *error);
/* The agent's `stats` samples (rows valid during the call), asked for in
 * the build when fn is set before agent_client_build; its linkd stalls
 * counted at stall_threshold_s (the whole network's; 0: its part's). */
typedef void (*agent_stats_fn)(void *ctx, struct agent_client *ac, const struct agent_stats *s);
void agent_client_on_stats(struct agent_client *ac, agent_stats_fn fn, void *ctx,
                           double stall_threshold_s);
/* Sends the part (len bytes of topo/part_wire.h; copied) in `build`. 0,
 * or -1 with err when it cannot be sent (a build already in flight, the
 * agent failed or gone, the part too large): built is then not called. */
/* A build sent and not answered yet. */
bool agent_client_build_pending(const struct agent_client *ac);
/* Forgets the build in flight: its answer, if one comes, is dropped and
 * built is not called (the caller's deadline passed). */
void agent_client_build_abandon(struct agent_client *ac);
int agent_client_build(struct agent_client *ac, const void *part, size_t len, agent_built_fn built,
                       void *ctx, char *err, size_t errlen);
/* Asks the agent for the round trip from its machine to another's
 * underlay address (IPv4 text) in `underlay` (emu/underlay_rtt.h): cb
 * gets the result map (proto/agent_wire.h agent_wire_read_underlay_reply)
 * or the error, from the loop, also when the agent is lost. 0, or -1
 * with err when it cannot be sent (cb is then not called). */
int agent_client_underlay(struct agent_client *ac, const char *address, peer_reply_fn cb, void *ctx,
                          char *err, size_t errlen);
/* Opens the relayed control channel of a node of this machine's part
 * (node: its whole-network index, in increasing order; controller/
 * agent_relay.h): a peer_client driven as a local peer's, hooks included,
 * its exit the agent's `exit` notification or the agent's loss. The
 * client stays the agent client's (freed with it). NULL with err. */
struct peer_client *agent_client_open_peer(struct agent_client *ac, int node, const char *name,
                                           const struct peer_client_hooks *hooks, char *err,
                                           size_t errlen);
/* The relayed client of node, or NULL. */
struct peer_client *agent_client_peer(const struct agent_client *ac, int node);
/* Run-time changes of this machine's part (link: whole-network index;
 * params for AGENT_LINK_SET, emulated values, else NULL; node: whole-
 * network index). 0 and a later cb from the loop, with error one line
 * that begins with "machine 'NAME': " (the agent's refusal, or its loss)
 * or NULL and the agent's result; or -1 with err (cb is then not called). */
int agent_client_link(struct agent_client *ac, int link, enum agent_link_op op,
                      const struct topo_link_params *params, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen);
int agent_client_kill(struct agent_client *ac, int node, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen);
/* l:trace of link (whole-network index) at this machine's end: t's fields
 * but its trace, which is trace_len bytes of topo_trace_pack; as
 * agent_client_link. */
int agent_client_trace(struct agent_client *ac, const struct agent_trace *t, const void *trace,
                       size_t trace_len, peer_reply_fn cb, void *ctx, char *err, size_t errlen);
/* node:run / node:spawn in a host of this machine's part (r: node, id,
 * argv), as agent_client_link; the result is {pid}. The end comes as the
 * on_program hook's call. signal: signals the program named id. */
int agent_client_run(struct agent_client *ac, const struct agent_run *r, peer_reply_fn cb,
                     void *ctx, char *err, size_t errlen);
int agent_client_signal(struct agent_client *ac, uint64_t id, int sig, peer_reply_fn cb, void *ctx,
                        char *err, size_t errlen);
/* The agent's `program` notifications (p valid during the call). */
typedef void (*agent_program_fn)(void *ctx, struct agent_client *ac, const struct agent_program *p);
void agent_client_on_program(struct agent_client *ac, agent_program_fn fn, void *ctx);
/* The agent failed (why: one line naming the machine), told once, before
 * on_failed: what it ran there will send no end (its programs). */
typedef void (*agent_lost_fn)(void *ctx, struct agent_client *ac, const char *why);
void agent_client_on_lost(struct agent_client *ac, agent_lost_fn fn, void *ctx);
/* l:stats of link (whole-network index) at this machine's end, as
 * agent_client_link; the result is the agent's counters map. */
int agent_client_counters(struct agent_client *ac, int link, peer_reply_fn cb, void *ctx, char *err,
                          size_t errlen);
/* node:restart() of node (named name) on this machine: its relayed
 * client is replaced by a fresh one (*pc, with hooks; agent_relay_restart)
 * whose calls wait for the agent's answer, then cb as agent_client_link.
 * -1 with err: *pc, when set, is the new client, ended with err. */
int agent_client_restart(struct agent_client *ac, int node, const char *name,
                         const struct peer_client_hooks *hooks, struct peer_client **pc,
                         peer_reply_fn cb, void *ctx, char *err, size_t errlen);
/* partition (side: per whole-network node, n of them) or heal (side NULL:
 * every partition), as agent_client_link. */
int agent_client_sides(struct agent_client *ac, enum agent_method method, const unsigned char *side,
                       size_t n, peer_reply_fn cb, void *ctx, char *err, size_t errlen);
/* reroute (a move over machines: proto/agent_wire.h), as agent_client_link. */
int agent_client_reroute(struct agent_client *ac, const struct agent_reroute *r, peer_reply_fn cb,
                         void *ctx, char *err, size_t errlen);
/* Asks the agent to tear down; on_down follows (at once when it is gone).
 * One that has not answered hello (or failed) holds nothing: its ssh is
 * ended instead. */
void agent_client_teardown(struct agent_client *ac);
/* Ends the child (SIGKILL of ssh: the agent sees EOF) and frees. NULL ok. */
void agent_client_free(struct agent_client *ac);

const char *agent_client_machine(const struct agent_client *ac);
bool agent_client_ready(const struct agent_client *ac);
/* The agent failed (lost) or is tearing down: it takes no more changes. */
bool agent_client_gone(const struct agent_client *ac);
/* The agent's hello answer (valid once ready). */
const struct agent_hello_reply *agent_client_hello(const struct agent_client *ac);
/* The clock estimate from the last pings; false before any. */
bool agent_client_clock(const struct agent_client *ac, struct clock_offset *out);
/* Seconds from its ssh's start to the hello's answer (the connection, the
 * agent's start and its kernel probe) and to ready (the clock's pings
 * too); 0 for a step not reached. */
void agent_client_start_times(const struct agent_client *ac, double *hello_s, double *ready_s);

/* The argv of a command run on machine m, `BIN words...` over ssh (the
 * words shell-quoted into one remote command) or srun, into argv (cap
 * entries, NULL-terminated), its strings in store (storecap bytes): the
 * agent's, and `hiernet clean --hosts`'s. 0, or -1 when it does not fit. */
int agent_client_argv(const struct topo_machine *m, const struct agent_client_options *o,
                      const char *const *words, char **argv, size_t cap, char *store,
                      size_t storecap);
