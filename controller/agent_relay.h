/* agent_relay.h — the peer control channels of one machine's remote nodes,
 * carried over that machine's agent channel (issue 20; docs/design-notes.md,
 * "Peer commands relayed, bulk data peer to peer").
 *
 * Each remote node gets a peer_client opened as for the peer template (a
 * socketpair, no child of ours): the controller's code drives it as a local
 * peer's, request ids and handshake included. The relay keeps the other end
 * of each socketpair: what the client writes is read there and sent to the
 * agent as `call` notifications (node, bytes); the agent's `call` chunks
 * are written into it; the agent's `exit` notification ends the client as a
 * child's exit would (peer_client_mark_exited). A backlog of the agent
 * channel past AGENT_RELAY_BACKLOG_MAX stops reading every node's end until
 * the channel drains, as the data plane does with its connections.
 *
 * Owns: the nodes' clients and their socketpair ends. Borrows the agent's
 * channel (controller/agent_client.c owns it). On the libev loop; nothing
 * here blocks. */
#pragma once

#include "controller/peer_client.h"

#include <ev.h>
#include <msgpack.h>
#include <stddef.h>

/* The agent channel's unsent bytes past which the nodes' ends are not read:
 * 64 chunks of the largest size, enough to keep an underlay of a few
 * Gbit/s busy for the ~10 ms a drain takes under load. */
#define AGENT_RELAY_BACKLOG_MAX (4u << 20)

struct agent_relay;

/* A relay over channel (the agent's; must outlive the relay), named after
 * machine in its log lines. NULL when out of memory. */
struct agent_relay *agent_relay_new(struct ev_loop *loop, struct peer_client *channel,
                                    const char *machine);
/* Opens node's relayed client (node: its whole-network index; nodes opened
 * in increasing order), named name, with hooks as for a local peer. The
 * client stays the relay's: NULL with err on failure. */
struct peer_client *agent_relay_open(struct agent_relay *r, int node, const char *name,
                                     const struct peer_client_hooks *hooks, char *err,
                                     size_t errlen);
/* node:restart() of a relayed node: its old client's channel ends (its
 * calls fail; the agent's next `exit` of node is the old peer's) and a
 * new client, returned, takes its place, with hooks; its calls are held
 * (not sent to the agent) until agent_relay_resume. NULL with err (the
 * node unknown, a restart already held, out of memory or descriptors):
 * then nothing changed, the old client still relays its peer. */
struct peer_client *agent_relay_restart(struct agent_relay *r, int node, const char *name,
                                        const struct peer_client_hooks *hooks, char *err,
                                        size_t errlen);
/* The agent answered node's restart: why NULL, its new peer runs and the
 * held calls go; else the new client ends, its calls failing with why. */
void agent_relay_resume(struct agent_relay *r, int node, const char *why);
/* The client of node, or NULL when the relay has none. */
struct peer_client *agent_relay_peer(const struct agent_relay *r, int node);
/* A notification from the agent: `call` and `exit` are the relay's (true),
 * anything else is not (false). A bad one is logged and dropped. */
bool agent_relay_notify(struct agent_relay *r, const char *method, uint32_t method_len,
                        const msgpack_object *params);
/* The agent is gone: every node's client that has not exited ends as
 * killed (SIGKILL's wait status), its calls failing with why (one line
 * naming the machine). */
void agent_relay_lost(struct agent_relay *r, const char *why);
void agent_relay_free(struct agent_relay *r);
