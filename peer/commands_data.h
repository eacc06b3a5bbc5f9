/* commands_data.h — the peer commands of the data plane (docs/lua-api.md "Peer
 * commands"): send and peers. Their entries in the command
 * table of commands.c; see command_job.h for how a command runs.
 *
 *   send{tensor=, to=NODE | {NODE, ...} | to_addr="A[:PORT]", as=tensor,
 *        range={off, n}, at=, add=false}
 *     -> {bytes=, transfer=, transfers=, version=, ms=, snapshot_ms=,
 *         cpu_ms=, queue_ms=}
 *     The snapshot is taken on the worker, in order with compute commands,
 *     and sent to every destination (one transfer each, in parallel); the
 *     reply comes when every receiver acked it. bytes: summed over the
 *     destinations; ms: from the snapshot to the last ack; transfer: the
 *     first destination's transfer id; version: the snapshot's. at: where
 *     the data lands in the receiver's tensor (default: the range's offset);
 *     add: the receiver adds it into its tensor (dataplane.h).
 *   peers{table={NAME="A[:PORT]", ...}, replace=false}  -> {peers=, ms=}
 *     Loop thread, at once (in a batch: at its turn). Adds (or with replace,
 *     first clears) node name -> data-plane address entries used by
 *     send{to=}. A missing port is this peer's --data-port (7000 when that
 *     is 0). A bad entry changes nothing. */
#pragma once

struct command;

extern const struct command data_cmd_send;
extern const struct command data_cmd_peers;
