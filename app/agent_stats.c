/* agent_stats.c — the `stats` notifications of an agent's part: the rows
 * the engine writes to links.csv on one machine (netrun_sample_links,
 * once per emulated second) go into a record whose rows come here
 * (record_open_sink); the rows of one sample, which the engine writes in
 * one go from one callback, are sent as one notification from the loop's
 * next turn, each link by its whole-network index. */
#include "app/agent_part_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/record.h"
#include "proto/msgmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* links.csv's columns before the counters (netrun_link_columns). */
enum { COL_TIME, COL_NETWORK, COL_LINK, COL_DIR, COL_UP, COL_COUNTERS };
#define COUNT_ONE_(name) +1
#define ROW_COUNTERS (0 AGENT_STATS_COUNTERS(COUNT_ONE_))

struct agent_stats_feed {
    struct agent_part *p;
    struct record *rec;
    ev_timer send; /* the loop's next turn: the sample's rows are all in */
    struct agent_stats_row *rows;
    size_t n_rows, cap_rows;
    int64_t t_ns;                  /* when the sample's first row arrived */
    size_t cursor;                 /* the next link looked at first: rows come in link order */
    char (*names)[AGENT_LINK_MAX]; /* per link of the part: its links.csv name */
};

static double agent_clock(void *ctx)
{
    return mono_s();
}

/* The part's link named as links.csv names it, or -1. */
static long link_by_name(struct agent_stats_feed *f, const char *name)
{
    size_t n = part_model(f->p->run)->net->n_links;
    for (size_t k = 0; k < n; k++) {
        size_t l = (f->cursor + k) % n;
        if (!strcmp(f->names[l], name)) return f->cursor = (l + 1) % n, (long)l;
    }
    return -1;
}

static int64_t cell_value(const char *cell)
{
    return cell && *cell ? strtoll(cell, NULL, 10) : -1; /* empty: not counted */
}

static void on_send(EV_P_ ev_timer *w, int revents)
{
    struct agent_stats_feed *f = container_of(w, struct agent_stats_feed, send);
    struct agent_part *p = f->p;
    struct agent_stats s = {f->t_ns, f->rows, f->n_rows};
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_stats(&m, &s);
    if (!msgmap_notify(&m, p->io.pk, agent_method_name(AGENT_STATS)))
        part_log(p, "stats: %zu rows dropped: out of memory", f->n_rows);
    p->io.flush(p->io.ctx);
    f->n_rows = 0;
}

static struct agent_stats_row *row_new(struct agent_stats_feed *f)
{
    if (f->n_rows == f->cap_rows) {
        size_t cap = f->cap_rows ? 2 * f->cap_rows : 16;
        struct agent_stats_row *grown = realloc(f->rows, cap * sizeof *grown);
        if (!grown) return NULL;
        f->rows = grown;
        f->cap_rows = cap;
    }
    return memset(&f->rows[f->n_rows++], 0, sizeof *f->rows);
}

static void on_row(void *ctx, const char *const *cells, size_t n_cells)
{
    struct agent_stats_feed *f = ctx;
    if (f->p->state != PART_BUILT) return; /* releasing: the part's model is going */
    long l = cells[COL_LINK] ? link_by_name(f, cells[COL_LINK]) : -1;
    if (l < 0 || n_cells != COL_COUNTERS + ROW_COUNTERS) return;
    if (f->n_rows == 0) {
        f->t_ns = mono_ns();
        ev_timer_set(&f->send, 0, 0);
        ev_timer_start(f->p->loop, &f->send);
    }
    struct agent_stats_row *r = row_new(f);
    if (!r) return part_log(f->p, "stats: a row dropped: out of memory");
    r->link = (uint64_t)part_model(f->p->run)->whole_link[l];
    snprintf(r->dir, sizeof r->dir, "%s", cells[COL_DIR] ? cells[COL_DIR] : "");
    r->up = cells[COL_UP] && cells[COL_UP][0] == '1';
    const char *const *c = cells + COL_COUNTERS;
#define READ_CELL_(name) r->name = cell_value(*c++);
    AGENT_STATS_COUNTERS(READ_CELL_)
#undef READ_CELL_
}

static int names_make(struct agent_stats_feed *f)
{
    const struct topo_network *net = part_model(f->p->run)->net;
    f->names = calloc(net->n_links ? net->n_links : 1, sizeof *f->names);
    if (!f->names) return -1;
    for (size_t l = 0; l < net->n_links; l++)
        topo_link_describe(net, &net->links[l], f->names[l], sizeof f->names[l]);
    return 0;
}

/* Whether links.csv's columns after `up` are the wire's counters, in
 * order: on_row copies them by position. */
static bool columns_match(const char *const *columns, size_t n)
{
#define NAME_(name) #name,
    static const char *const counters[] = {AGENT_STATS_COUNTERS(NAME_)};
#undef NAME_
    if (n != COL_COUNTERS + ROW_COUNTERS || strcmp(columns[COL_LINK], "link") ||
        strcmp(columns[COL_DIR], "dir") || strcmp(columns[COL_UP], "up"))
        return false;
    for (size_t k = 0; k < ROW_COUNTERS; k++)
        if (strcmp(columns[COL_COUNTERS + k], counters[k])) return false;
    return true;
}

struct agent_stats_feed *agent_stats_start(struct agent_part *p)
{
    size_t n;
    const char *const *columns = netrun_link_columns(&n);
    char err[256];
    struct agent_stats_feed *f = calloc(1, sizeof *f);
    if (!f || !columns_match(columns, n)) {
        part_log(p, "stats: not sent: %s",
                 f ? "links.csv's columns are not the wire's" : "out of memory");
        free(f);
        return NULL;
    }
    f->p = p;
    ev_init(&f->send, on_send);
    f->rec = record_open_sink("links", columns, n, on_row, f, err, sizeof err);
    if (!f->rec || names_make(f) < 0) {
        part_log(p, "stats: not sent: %s", f->rec ? "out of memory" : err);
        agent_stats_stop(f);
        return NULL;
    }
    netrun_sample_links(part_netrun(p->run), f->rec, agent_clock, f);
    return f;
}

void agent_stats_stop(struct agent_stats_feed *f)
{
    if (!f) return;
    ev_timer_stop(f->p->loop, &f->send);
    record_close(f->rec);
    free(f->rows);
    free(f->names);
    free(f);
}
