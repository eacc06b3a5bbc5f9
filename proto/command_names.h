/* command_names.h — the one list of the peer's control commands: their
 * names on the wire, the C definition of each (struct command, see
 * command_job.h) and how Lua reaches it. The peer's dispatch table
 * (peer/commands.c) and the Lua node methods (lua/l_node.c) are both
 * generated from it, so a command is named once.
 *
 * PEER_COMMANDS(X) calls X(name, definition, face) for each command, ping
 * first (the hot one: dispatch searches in this order):
 *   name        the method name, a C identifier (stringified where needed)
 *   definition  the const struct command that implements it
 *   face        PEER_FACE_METHOD: node:<name>(params) sends params as they are
 *               PEER_FACE_OWN: Lua has a method of its own for it (batch)
 *               PEER_FACE_CONTROLLER: only the controller sends it (peers)
 * Macros only: any module may include it. */
#pragma once

#define PEER_FACE_METHOD 1
#define PEER_FACE_OWN 2
#define PEER_FACE_CONTROLLER 3

#define PEER_COMMANDS(X)                                                                           \
    X(ping, stats_cmd_ping, PEER_FACE_METHOD)                                                      \
    X(stats, stats_cmd_stats, PEER_FACE_METHOD)                                                    \
    X(tensor, vec_cmd_tensor, PEER_FACE_METHOD)                                                    \
    X(copy, vec_cmd_copy, PEER_FACE_METHOD)                                                        \
    X(drop, vec_cmd_drop, PEER_FACE_METHOD)                                                        \
    X(axpy, vec_cmd_axpy, PEER_FACE_METHOD)                                                        \
    X(scale, vec_cmd_scale, PEER_FACE_METHOD)                                                      \
    X(sum, vec_cmd_sum, PEER_FACE_METHOD)                                                          \
    X(norm, vec_cmd_norm, PEER_FACE_METHOD)                                                        \
    X(dot, vec_cmd_dot, PEER_FACE_METHOD)                                                          \
    X(read, vec_cmd_read, PEER_FACE_METHOD)                                                        \
    X(send, data_cmd_send, PEER_FACE_METHOD)                                                       \
    X(peers, data_cmd_peers, PEER_FACE_CONTROLLER)                                                 \
    X(wait, sync_cmd_wait, PEER_FACE_METHOD)                                                       \
    X(batch, sync_cmd_batch, PEER_FACE_OWN)                                                        \
    X(abort, sync_cmd_abort, PEER_FACE_METHOD)                                                     \
    X(dataset, ml_cmd_dataset, PEER_FACE_METHOD)                                                   \
    X(model, ml_cmd_model, PEER_FACE_METHOD)                                                       \
    X(grad, ml_cmd_grad, PEER_FACE_METHOD)                                                         \
    X(optim, ml_cmd_optim, PEER_FACE_METHOD)                                                       \
    X(eval, ml_cmd_eval, PEER_FACE_METHOD)                                                         \
    X(compress, ml_cmd_compress, PEER_FACE_METHOD)                                                 \
    X(decompress, ml_cmd_decompress, PEER_FACE_METHOD)                                             \
    X(bucket, ml_cmd_bucket, PEER_FACE_METHOD)                                                     \
    X(forward, ml_cmd_forward, PEER_FACE_METHOD)                                                   \
    X(backward, ml_cmd_backward, PEER_FACE_METHOD)                                                 \
    X(traffic_sink, traffic_cmd_sink, PEER_FACE_METHOD)                                            \
    X(traffic_source, traffic_cmd_source, PEER_FACE_METHOD)                                        \
    X(traffic_stats, traffic_cmd_stats, PEER_FACE_METHOD)                                          \
    X(traffic_stop, traffic_cmd_stop, PEER_FACE_METHOD)
