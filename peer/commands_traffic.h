/* commands_traffic.h — the peer commands of background traffic (traffic.h;
 * docs/lua-api.md "Background traffic"), answered at once on the loop
 * thread, never queued behind compute:
 *
 *   traffic_sink{id, proto="udp"}                     -> {port}
 *   traffic_source{id, to="A:PORT", proto="udp", pattern="constant", rate=bit/s,
 *                  on_s=, off_s=, seed=1, bytes=0, size=1400} -> {}
 *   traffic_stats{id} / traffic_stop{id}              -> the flow's counters
 *                                                        (stop also closes it) */
#pragma once

struct command;

extern const struct command traffic_cmd_sink;
extern const struct command traffic_cmd_source;
extern const struct command traffic_cmd_stats;
extern const struct command traffic_cmd_stop;
