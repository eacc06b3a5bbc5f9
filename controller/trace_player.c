/* trace_player.c — a link trace on the event loop (see trace_player.h). */
#include "controller/trace_player.h"

#include "common/clock.h"
#include "common/container.h"

#include <math.h>
#include <stdlib.h>

struct trace_player {
    struct ev_loop *loop;
    ev_timer timer;
    struct topo_trace trace;
    struct trace_player_opts o;
    trace_apply_fn apply;
    void *ctx;
    double start_mono; /* real seconds */
    double next_s;     /* the trace's time of the next change */
    struct topo_trace_sample current;
    struct topo_trace_sample *changes;
    size_t n_changes, cap_changes;
};

static void keep_change(struct trace_player *p)
{
    if (p->n_changes == p->cap_changes) {
        size_t cap = p->cap_changes ? p->cap_changes * 2 : 64;
        if (cap > TRACE_PLAYER_KEEP) cap = TRACE_PLAYER_KEEP;
        if (cap == p->cap_changes) return; /* full: the first ones are kept */
        struct topo_trace_sample *c = realloc(p->changes, cap * sizeof *c);
        if (!c) return;
        p->changes = c;
        p->cap_changes = cap;
    }
    p->changes[p->n_changes++] = p->current;
}

/* Applies the values due at the trace's time t and arms the next change. */
static void play(struct trace_player *p, double t)
{
    topo_trace_at(&p->trace, p->o.interp, p->o.loop, t, &p->current);
    keep_change(p);
    p->apply(p->ctx, &p->trace, &p->current);
    p->next_s = topo_trace_next_change(&p->trace, p->o.interp, p->o.loop, t, p->o.step_s);
    if (isinf(p->next_s)) return; /* the last value holds */
    double wait = p->start_mono + p->next_s * p->o.dilation - mono_s();
    ev_timer_set(&p->timer, wait > 0 ? wait : 0, 0);
    ev_timer_start(p->loop, &p->timer);
}

static void on_change(EV_P_ ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct trace_player *p = container_of(w, struct trace_player, timer);
    play(p, p->next_s);
}

struct trace_player *trace_player_start(struct ev_loop *loop, struct topo_trace *trace,
                                        const struct trace_player_opts *opts, trace_apply_fn apply,
                                        void *ctx)
{
    struct trace_player *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->loop = loop;
    p->trace = *trace;
    *trace = (struct topo_trace){0};
    p->o = *opts;
    if (!(p->o.dilation >= 1)) p->o.dilation = 1;
    p->apply = apply;
    p->ctx = ctx;
    ev_timer_init(&p->timer, on_change, 0, 0);
    p->start_mono = mono_s();
    play(p, 0);
    return p;
}

void trace_player_free(struct trace_player *p)
{
    if (!p) return;
    ev_timer_stop(p->loop, &p->timer);
    topo_trace_free(&p->trace);
    free(p->changes);
    free(p);
}

const struct topo_trace *trace_player_trace(const struct trace_player *p)
{
    return &p->trace;
}

const struct topo_trace_sample *trace_player_current(const struct trace_player *p)
{
    return &p->current;
}

size_t trace_player_changes(const struct trace_player *p, const struct topo_trace_sample **out)
{
    *out = p->changes;
    return p->n_changes;
}
