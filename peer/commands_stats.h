/* commands_stats.h — the peer commands answered at once on the loop thread
 * (docs/lua-api.md, "Peer commands"); see command_job.h for how a
 * command runs.
 *
 *   ping{}    -> {ms}
 *   stats{}   -> {node, tensors, ..., ms} */
#pragma once

struct command;

extern const struct command stats_cmd_ping;
extern const struct command stats_cmd_stats;
