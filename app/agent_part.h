/* agent_part.h — the part an agent builds and the peer channels it relays
 * (issue 20; docs/design-notes.md, "Several machines, the design").
 *
 * `build` decodes the controller's part (proto/agent_wire.h) and builds it
 * with controller/part_build.h, the engine a local run uses; once built,
 * every local host's peer control channel is put in relay mode
 * (peer_client_relay): `call` chunks from the controller are written to
 * the node's peer as they come, and what the peer writes goes back as
 * `call` chunks, in order, never re-framed. A peer's exit is an `exit`
 * notification naming the node's whole-network index. The agent's output
 * is one stream for all peers: past AGENT_PART_OUT_HIGH bytes queued, the
 * peers are no longer read until it drains to AGENT_PART_OUT_LOW. The
 * other way, past AGENT_PART_IN_HIGH bytes queued toward one peer, the
 * agent's input is not read until that peer took them (or exited).
 *
 * Owns: the part_run (its netrun, peers, registry entry) until released,
 * and the relay table. Writes into the agent's output through io. */
#pragma once

#include <ev.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_PART_OUT_HIGH (4u << 20) /* design notes: the agent's stdout bound */
#define AGENT_PART_OUT_LOW (1u << 20)
#define AGENT_PART_IN_HIGH (4u << 20) /* toward one peer: a whole control message fits */

struct agent_part;

struct agent_part_io {
    msgpack_packer *pk;          /* the agent's output: messages are packed here */
    size_t (*queued)(void *ctx); /* bytes of output not yet written */
    void (*flush)(void *ctx);    /* writes what can be written now */
    void (*released)(void *ctx); /* agent_part_release's end */
    void (*log)(void *ctx, const char *line);
    void (*input)(void *ctx, bool on); /* read (or stop reading) the controller's stream */
    void *ctx;
};

/* machine: the agent's name buffer (--machine, or hello's), which a part
 * must name; read at build, so it must outlive p.
 * peer_path: hiernet-peer, NULL for the one beside this program. */
struct agent_part *agent_part_new(struct ev_loop *loop, const char *machine, const char *peer_path,
                                  const struct agent_part_io *io);
/* Serves `build` request msgid: its answer follows now or from the loop. */
void agent_part_build(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* Answers build request msgid with an error map of code NET_ERR_SCENARIO. */
void agent_part_refuse(struct agent_part *p, uint32_t msgid, const char *message);
/* Serves a `call` notification: relays its bytes, or logs and drops. */
void agent_part_call(struct agent_part *p, const msgpack_object *params);
/* The run-time requests (app/agent_ops.c), each on the part's netrun with
 * the netrun_* function a local run calls, by whole-network index: link
 * (set, up, down), kill, restart, partition, heal. Each is answered once,
 * now or from the loop: done (heal: {healed}), or the error map naming
 * the node or link (one not in this part: the index and the machine). */
void agent_part_link(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
void agent_part_kill(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
void agent_part_restart(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
void agent_part_partition(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
void agent_part_heal(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* counters of a link with an end in the part: answered with its
 * netrun_link_stats map (id: the whole network's link), or the error map. */
void agent_part_counters(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* trace: plays a link trace on the part's end of a link (netrun_link_trace,
 * from now); done, or the error map. */
void agent_part_trace(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* run: a program in a host of the part (app/agent_programs.c), answered
 * with its pid; its end follows as a `program` notification. signal:
 * signals one, done. */
void agent_part_run(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
void agent_part_signal(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* reroute: a move over machines (app/agent_reroute.c): the moved link
 * when the part holds it, then its hosts' changed routes; done, or the
 * error map. */
void agent_part_reroute(struct agent_part *p, uint32_t msgid, const msgpack_object *params);
/* The agent's output was written out (partly): resume the peers' reads. */
void agent_part_output_drained(struct agent_part *p);
/* Begins releasing the part (once built, when building): true when
 * io->released follows from the loop, false when nothing was built. */
bool agent_part_release(struct agent_part *p);
/* Frees what is left: call when nothing was built or once released. */
void agent_part_free(struct agent_part *p);
