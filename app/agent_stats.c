/* agent_stats.c — the `stats` notifications of an agent's part: the rows
 * the engine writes to links.csv and tcp.csv on one machine
 * (netrun_sample_links, netrun_sample_tcp, once per emulated second) go
 * into records whose rows come here (record_open_sink); the rows of one
 * sample, which the engine writes in one go from one callback, are sent
 * as one notification from the loop's next turn, each link and node by
 * its whole-network index. The part's hiernet-linkd stalls
 * (controller/linkd_stalls.h), seen by an overload account of its own
 * watching the part's data plane, go out the same way. */
#include "app/agent_part_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/overload.h"
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
    struct record *tcp_rec; /* tcp.csv's rows of the part's hosts */
    struct agent_tcp_row *tcp;
    size_t n_tcp, cap_tcp;
    int64_t t_ns;                  /* when the sample's first row arrived */
    size_t cursor;                 /* the next link looked at first: rows come in link order */
    size_t node_cursor;            /* the same for tcp.csv's nodes */
    char (*names)[AGENT_LINK_MAX]; /* per link of the part: its links.csv name */
    struct overload *overload;     /* watches the part's data plane for stalls, or NULL */
    struct agent_stall *stalls;    /* since the last notification */
    size_t n_stalls, cap_stalls;
    bool stalls_dropped; /* past AGENT_STALLS_MAX in one sample: logged once */
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
    struct agent_stats s = {f->t_ns, f->rows, f->n_rows, f->tcp, f->n_tcp, f->stalls, f->n_stalls};
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_stats(&m, &s);
    if (!msgmap_notify(&m, p->io.pk, agent_method_name(AGENT_STATS)))
        part_log(p, "stats: %zu rows and stalls dropped: out of memory",
                 f->n_rows + f->n_tcp + f->n_stalls);
    p->io.flush(p->io.ctx);
    f->n_rows = f->n_tcp = f->n_stalls = 0;
}

/* A zeroed element appended to *v (n of cap, each size bytes), or NULL. */
static void *element_new(void **v, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 16;
        void *grown = realloc(*v, grown_cap * size);
        if (!grown) return NULL;
        *v = grown;
        *cap = grown_cap;
    }
    return memset((char *)*v + (*n)++ * size, 0, size);
}

/* The sample's first row (of either file) sets its time and sends it
 * from the loop's next turn. */
static void sample_begin(struct agent_stats_feed *f)
{
    if (f->n_rows || f->n_tcp || f->n_stalls) return;
    f->t_ns = mono_ns();
    ev_timer_set(&f->send, 0, 0);
    ev_timer_start(f->p->loop, &f->send);
}

static void on_row(void *ctx, const char *const *cells, size_t n_cells)
{
    struct agent_stats_feed *f = ctx;
    if (f->p->state != PART_BUILT) return;              /* releasing: the part's model is going */
    if (n_cells != COL_COUNTERS + ROW_COUNTERS) return; /* before any cell is read */
    long l = cells[COL_LINK] ? link_by_name(f, cells[COL_LINK]) : -1;
    if (l < 0) return;
    sample_begin(f);
    struct agent_stats_row *r =
        element_new((void **)&f->rows, &f->n_rows, &f->cap_rows, sizeof *f->rows);
    if (!r) return part_log(f->p, "stats: a row dropped: out of memory");
    r->link = (uint64_t)part_model(f->p->run)->whole_link[l];
    snprintf(r->dir, sizeof r->dir, "%s", cells[COL_DIR] ? cells[COL_DIR] : "");
    r->up = cells[COL_UP] && cells[COL_UP][0] == '1';
    const char *const *c = cells + COL_COUNTERS;
#define READ_CELL_(name) r->name = cell_value(*c++);
    AGENT_STATS_COUNTERS(READ_CELL_)
#undef READ_CELL_
}

/* tcp.csv's columns: time_s, network, node, then the counters. */
enum { TCP_COL_NODE = 2, TCP_COL_COUNTERS };
#define TCP_COUNTERS_N (0 AGENT_TCP_COUNTERS(COUNT_ONE_))

/* The part's node named name, or -1 (rows come in node order). */
static long node_by_name(struct agent_stats_feed *f, const struct topo_network *net,
                         const char *name)
{
    size_t n = net->n_nodes;
    for (size_t k = 0; k < n; k++) {
        size_t i = (f->node_cursor + k) % n;
        if (!strcmp(net->nodes[i].name, name)) return f->node_cursor = (i + 1) % n, (long)i;
    }
    return -1;
}

static void on_tcp_row(void *ctx, const char *const *cells, size_t n_cells)
{
    struct agent_stats_feed *f = ctx;
    if (f->p->state != PART_BUILT) return; /* releasing: the part's model is going */
    const struct topo_part *part = part_model(f->p->run);
    if (n_cells != TCP_COL_COUNTERS + TCP_COUNTERS_N) return; /* before any cell is read */
    long i = cells[TCP_COL_NODE] ? node_by_name(f, part->net, cells[TCP_COL_NODE]) : -1;
    if (i < 0) return;
    sample_begin(f);
    struct agent_tcp_row *r = element_new((void **)&f->tcp, &f->n_tcp, &f->cap_tcp, sizeof *f->tcp);
    if (!r) return part_log(f->p, "stats: a tcp row dropped: out of memory");
    r->node = (uint64_t)part->whole_node[i];
    const char *const *c = cells + TCP_COL_COUNTERS;
#define READ_TCP_(name) r->name = *c ? strtoull(*c, NULL, 10) : 0, c++;
    AGENT_TCP_COUNTERS(READ_TCP_)
#undef READ_TCP_
}

/* A stall of one of the part's linkd processes: sent from the loop's
 * next turn, with a sample's rows if one is being gathered. */
static void on_stall(void *ctx, const struct linkd_stall *st)
{
    struct agent_stats_feed *f = ctx;
    if (f->n_stalls == AGENT_STALLS_MAX) {
        if (!f->stalls_dropped)
            part_log(f->p, "stats: stalls dropped: %d in one sample", AGENT_STALLS_MAX);
        f->stalls_dropped = true;
        return;
    }
    sample_begin(f);
    struct agent_stall *s =
        element_new((void **)&f->stalls, &f->n_stalls, &f->cap_stalls, sizeof *f->stalls);
    if (!s) return part_log(f->p, "stats: a stall dropped: out of memory");
    s->t_ns = (int64_t)(st->mono_s * 1e9);
    s->wall_ns = (int64_t)(st->wall_s * 1e9);
}

/* The part's data plane watched for stalls; a failure costs only them. */
static void stalls_start(struct agent_stats_feed *f)
{
    f->overload = overload_new(f->p->loop);
    if (!f->overload) return part_log(f->p, "stats: no linkd stalls: out of memory");
    overload_on_stall(f->overload, on_stall, f);
    netrun_watch_dataplane(part_netrun(f->p->run), f->overload, f->p->stall_threshold_s);
}

static void names_describe(struct agent_stats_feed *f)
{
    const struct topo_network *net = part_model(f->p->run)->net;
    for (size_t l = 0; l < net->n_links; l++)
        topo_link_describe(net, &net->links[l], f->names[l], sizeof f->names[l]);
}

static int names_make(struct agent_stats_feed *f)
{
    const struct topo_network *net = part_model(f->p->run)->net;
    f->names = calloc(net->n_links ? net->n_links : 1, sizeof *f->names);
    if (!f->names) return -1;
    names_describe(f);
    return 0;
}

void agent_stats_rename(struct agent_stats_feed *f)
{
    if (f) names_describe(f);
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

/* tcp.csv's rows of the part's hosts: sent with the links' (the sample
 * timer netrun_sample_links starts reads both); a failure costs only them. */
static void tcp_start(struct agent_stats_feed *f)
{
    size_t n;
    const char *const *columns = netrun_tcp_columns(&n);
    char err[256];
#define NAME_(name) #name,
    static const char *const counters[] = {AGENT_TCP_COUNTERS(NAME_)};
#undef NAME_
    bool match = n == TCP_COL_COUNTERS + TCP_COUNTERS_N && !strcmp(columns[TCP_COL_NODE], "node");
    for (size_t k = 0; match && k < TCP_COUNTERS_N; k++)
        match = !strcmp(columns[TCP_COL_COUNTERS + k], counters[k]);
    if (!match) return part_log(f->p, "stats: no tcp rows: tcp.csv's columns are not the wire's");
    f->tcp_rec = record_open_sink("tcp", columns, n, on_tcp_row, f, err, sizeof err);
    if (!f->tcp_rec) return part_log(f->p, "stats: no tcp rows: %s", err);
    netrun_sample_tcp(part_netrun(f->p->run), f->tcp_rec);
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
    tcp_start(f);
    netrun_sample_links(part_netrun(p->run), f->rec, agent_clock, f);
    stalls_start(f);
    return f;
}

void agent_stats_stop(struct agent_stats_feed *f)
{
    if (!f) return;
    ev_timer_stop(f->p->loop, &f->send);
    record_close(f->rec);
    record_close(f->tcp_rec);
    free(f->rows);
    free(f->tcp);
    free(f->names);
    overload_free(f->overload); /* the netrun that watched it is gone */
    free(f->stalls);
    free(f);
}
