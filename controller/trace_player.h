/* trace_player.h — plays a link trace (topo/trace.h) on the event loop: one
 * ev_timer fires at each time the trace's values change (emulated seconds
 * times the dilation, from the start), and apply() installs the values then
 * in force. Nothing blocks and nothing polls: between changes the player
 * sleeps. The times are the trace's own, not the timer's (a late wake-up
 * installs the value due then, and the next change keeps its time), so the
 * same file gives the same changes in every run.
 * Owns its trace and the list of changes it applied. */
#pragma once

#include "topo/trace.h"

#include <ev.h>
#include <stdbool.h>

struct trace_player;

struct trace_player_opts {
    enum topo_trace_interp interp;
    bool loop;
    double step_s;   /* linear: emulated seconds between changes within a segment */
    double dilation; /* >= 1 */
};

/* Installs one change; the player carries on whatever it returns (apply
 * reports its own failures). */
typedef void (*trace_apply_fn)(void *ctx, const struct topo_trace *trace,
                               const struct topo_trace_sample *now);

/* Takes ownership of *trace (zeroed here) and applies its first values at
 * once, from inside this call. NULL only when out of memory. */
struct trace_player *trace_player_start(struct ev_loop *loop, struct topo_trace *trace,
                                        const struct trace_player_opts *opts, trace_apply_fn apply,
                                        void *ctx);
void trace_player_free(struct trace_player *p);
const struct topo_trace *trace_player_trace(const struct trace_player *p);
/* The values in force now (the last change applied). */
const struct topo_trace_sample *trace_player_current(const struct trace_player *p);
/* The changes applied so far, oldest first (t_s: the trace's time), at
 * most TRACE_PLAYER_KEEP of them (the first ones). */
#define TRACE_PLAYER_KEEP 100000u
size_t trace_player_changes(const struct trace_player *p, const struct topo_trace_sample **out);
