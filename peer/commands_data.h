/* commands_data.h — the peer commands of the data plane (DESIGN.md "Peer
 * commands"): send and peers. Their entries in the command table of
 * commands.c; see command_job.h for how a command runs.
 *
 *   send{tensor=, to=NODE | to_addr="A[:PORT]", as=tensor, range={off, n}}
 *     -> {bytes=, transfer=, ms=, snapshot_ms=, cpu_ms=, queue_ms=}
 *     The snapshot is taken on the worker, in order with compute commands;
 *     the reply comes when the receiver acked the whole tensor. ms: from the
 *     snapshot to the ack.
 *   peers{table={NAME="A[:PORT]", ...}, replace=false}  -> {peers=, ms=}
 *     Loop thread. Adds (or with replace, first clears) node name ->
 *     data-plane address entries used by send{to=}. A missing port is this
 *     peer's --data-port (7000 when that is 0). */
#pragma once

struct command;

extern const struct command data_cmd_send;
extern const struct command data_cmd_peers;
