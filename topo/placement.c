/* placement.c — the topology partitioned over machines with METIS (see
 * placement.h). */
#include "topo/placement.h"

#include <math.h>
#include <metis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(((struct topo_node *)0)->host) == TOPO_MACHINE_NAME_MAX,
               "a node's host= holds a machine's name");

#define UNLIMITED_MBIT 10000.0 /* a link without bw counts as 10 Gbit/s */
#define WEIGHT_SCALE 100.0     /* METIS weights are integers: 0.01 resolution */
#define PROFILE_SHARE 0.25     /* a profiled node sleeps most of its step */
#define SWITCH_DEMAND 0.1      /* a switch forwards; it computes nothing */
#define EDGE_WEIGHT_MAX 100000 /* a zero-delay 1 Gbit/s link: never worth cutting */
#define METIS_SEED 1
/* Parts may exceed their share by 10% (METIS's k-way default is 3%): a cut
 * on the right link matters more than an even load, and small topologies
 * have no balanced cut there (a cloud, two edges, eight terminals on two
 * machines: 6 nodes against 5). */
#define METIS_UFACTOR 100
#define METIS_RECURSIVE_MAX 8

double topo_placement_node_weight(const struct topo_node *n)
{
    if (n->kind == TOPO_NODE_SWITCH) return SWITCH_DEMAND;
    double demand = n->threads * n->speed;
    if (n->cpu > 0 && n->cpu < demand) demand = n->cpu;
    return n->profile[0] ? demand * PROFILE_SHARE : demand;
}

double topo_placement_link_weight(const struct topo_link_params *p)
{
    double mbit = p->rate_bps ? p->rate_bps / 1e6 : UNLIMITED_MBIT;
    double d = 1 + p->delay_ns / 1e6;
    return mbit / (d * d);
}

/* ---- the graph METIS sees: free nodes and one anchor per pinning machine ---- */

struct graph {
    idx_t nv, ne; /* vertices, directed edges */
    idx_t *xadj, *adj, *ewgt, *vwgt;
    int *vert;      /* per node: its vertex */
    int *anchor_of; /* per machine: its anchor vertex, or -1 */
};

struct edge {
    idx_t u, v, w;
};

static void graph_free(struct graph *g)
{
    free(g->xadj), free(g->adj), free(g->ewgt), free(g->vwgt), free(g->vert), free(g->anchor_of);
}

static idx_t scaled(double w, idx_t max)
{
    double s = w * WEIGHT_SCALE;
    return s < 1 ? 1 : s > max ? max : (idx_t)lround(s);
}

/* Vertices: pins resolved (err names an unknown one), weights summed. */
static int graph_vertices(struct graph *g, const struct topo_network *net,
                          const struct topo_machines *m, char *err, size_t errlen)
{
    for (size_t i = 0; i < m->n; i++)
        g->anchor_of[i] = -1;
    for (size_t i = 0; i < net->n_nodes; i++) {
        const struct topo_node *n = &net->nodes[i];
        int k = n->host[0] ? topo_machines_find(m, n->host) : -1;
        if (n->host[0] && k < 0) {
            snprintf(err, errlen, "node '%s': host '%s' is not a machine of %s", n->name, n->host,
                     m->source);
            return -1;
        }
        if (k >= 0 && g->anchor_of[k] < 0) g->anchor_of[k] = g->nv++;
        g->vert[i] = k >= 0 ? g->anchor_of[k] : g->nv++;
    }
    g->vwgt = calloc((size_t)g->nv + 1, sizeof *g->vwgt);
    if (!g->vwgt) return -1;
    for (size_t i = 0; i < net->n_nodes; i++)
        g->vwgt[g->vert[i]] += scaled(topo_placement_node_weight(&net->nodes[i]), EDGE_WEIGHT_MAX);
    return 0;
}

static int edge_order(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;
    if (x->u != y->u) return x->u < y->u ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* Both directions of every link between two vertices, parallel links and
 * links into one anchor summed into one edge (METIS wants no repeats). */
static struct edge *graph_edge_list(const struct graph *g, const struct topo_network *net,
                                    size_t *n)
{
    *n = 0;
    struct edge *e = malloc((2 * net->n_links + 1) * sizeof *e);
    if (!e) return NULL;
    /* each vertex's weights sum within idx_t (32 bits) */
    idx_t max = (idx_t)(INT32_MAX / 2 / (net->n_links + 1));
    if (max > EDGE_WEIGHT_MAX) max = EDGE_WEIGHT_MAX;
    for (size_t k = 0; k < net->n_links; k++) {
        const struct topo_link *l = &net->links[k];
        idx_t u = g->vert[l->a], v = g->vert[l->b];
        if (u == v) continue;
        idx_t w = scaled(topo_placement_link_weight(&l->params), max);
        e[(*n)++] = (struct edge){u, v, w};
        e[(*n)++] = (struct edge){v, u, w};
    }
    qsort(e, *n, sizeof *e, edge_order);
    size_t out = 0;
    for (size_t i = 0; i < *n; i++) {
        if (out && e[out - 1].u == e[i].u && e[out - 1].v == e[i].v)
            e[out - 1].w += e[i].w;
        else
            e[out++] = e[i];
    }
    *n = out;
    return e;
}

static int graph_edges(struct graph *g, const struct topo_network *net)
{
    size_t n;
    struct edge *e = graph_edge_list(g, net, &n);
    g->xadj = calloc((size_t)g->nv + 1, sizeof *g->xadj);
    g->adj = malloc((n + 1) * sizeof *g->adj);
    g->ewgt = malloc((n + 1) * sizeof *g->ewgt);
    if (!e || !g->xadj || !g->adj || !g->ewgt) {
        free(e);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        g->xadj[e[i].u + 1]++;
        g->adj[i] = e[i].v;
        g->ewgt[i] = e[i].w;
    }
    for (idx_t v = 0; v < g->nv; v++)
        g->xadj[v + 1] += g->xadj[v];
    g->ne = (idx_t)n;
    free(e);
    return 0;
}

static int graph_build(struct graph *g, const struct topo_network *net,
                       const struct topo_machines *m, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->vert = malloc((net->n_nodes + 1) * sizeof *g->vert);
    g->anchor_of = malloc((m->n + 1) * sizeof *g->anchor_of);
    if (!g->vert || !g->anchor_of) goto oom;
    int rc = graph_vertices(g, net, m, err, errlen);
    if (rc < 0 && err[0]) return -1;
    if (rc < 0 || graph_edges(g, net) < 0) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "network '%s': placement: out of memory", net->name);
    return -1;
}

/* ---- partitioning ---- */

/* No more vertices than machines (METIS wants more), or one machine: each
 * vertex in turn goes to the part furthest below its share. -1 when out of
 * memory (not a silent fall-back to part 0). */
static int partition_small(const struct graph *g, const real_t *share, idx_t nparts, idx_t *part)
{
    double total = 0, *load = calloc((size_t)nparts, sizeof *load);
    if (!load) return -1;
    for (idx_t v = 0; v < g->nv; v++)
        total += (double)g->vwgt[v];
    for (idx_t v = 0; v < g->nv; v++) {
        idx_t best = 0;
        for (idx_t p = 1; p < nparts; p++)
            if (share[p] * total - load[p] > share[best] * total - load[best]) best = p;
        part[v] = best;
        load[best] += (double)g->vwgt[v];
    }
    free(load);
    return 0;
}

static int partition(struct graph *g, const struct topo_machines *m, idx_t *part, char *err,
                     size_t errlen, const char *netname)
{
    idx_t nparts = (idx_t)m->n, ncon = 1, cut = 0;
    real_t *share = malloc(m->n * sizeof *share);
    if (!share) return snprintf(err, errlen, "network '%s': out of memory", netname), -1;
    double total = 0;
    for (size_t i = 0; i < m->n; i++)
        total += topo_machine_capacity(&m->v[i]);
    for (size_t i = 0; i < m->n; i++)
        share[i] = (real_t)(topo_machine_capacity(&m->v[i]) / total);
    if (g->nv <= nparts || nparts == 1) {
        int rc = partition_small(g, share, nparts, part);
        free(share);
        if (rc < 0) snprintf(err, errlen, "network '%s': out of memory", netname);
        return rc;
    }
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = METIS_SEED;
    options[METIS_OPTION_NUMBERING] = 0;
    options[METIS_OPTION_UFACTOR] = METIS_UFACTOR;
    /* Recursive bisection for few parts, as METIS's manual advises (k-way
     * left a 12-node graph whole on one of two parts); k-way beyond. */
    int (*method)(idx_t *, idx_t *, idx_t *, idx_t *, idx_t *, idx_t *, idx_t *, idx_t *, real_t *,
                  real_t *, idx_t *, idx_t *, idx_t *) =
        nparts <= METIS_RECURSIVE_MAX ? METIS_PartGraphRecursive : METIS_PartGraphKway;
    int rc = method(&g->nv, &ncon, g->xadj, g->adj, g->vwgt, NULL, g->ewgt, &nparts, share, NULL,
                    options, &cut, part);
    free(share);
    if (rc == METIS_OK) return 0;
    snprintf(err, errlen, "network '%s': METIS failed to partition it (error %d)", netname, rc);
    return -1;
}

/* Part -> machine: a part holding a machine's anchor goes to that machine;
 * the others keep their index's machine when it is free, else the next free.
 * -1 when out of memory: without the anchors mapped, a pinned node's
 * neighbours would land apart from it. */
static int map_parts(const struct graph *g, const idx_t *part, size_t n, int *machine_of_part)
{
    bool *taken = calloc(n, sizeof *taken);
    if (!taken) return -1;
    for (size_t p = 0; p < n; p++)
        machine_of_part[p] = -1;
    for (size_t k = 0; k < n; k++) {
        int a = g->anchor_of[k];
        if (a < 0 || machine_of_part[part[a]] >= 0) continue;
        machine_of_part[part[a]] = (int)k;
        taken[k] = true;
    }
    for (size_t p = 0, next = 0; p < n; p++) {
        if (machine_of_part[p] >= 0) continue;
        if (!taken[p]) {
            machine_of_part[p] = (int)p;
        } else {
            while (taken[next])
                next++;
            machine_of_part[p] = (int)next;
        }
        taken[machine_of_part[p]] = true;
    }
    free(taken);
    return 0;
}

/* ---- the result ---- */

static int placement_fill(struct topo_placement *out, const struct topo_network *net,
                          const struct topo_machines *m, const struct graph *g, const idx_t *part,
                          const int *machine_of_part)
{
    for (size_t i = 0; i < net->n_nodes; i++) {
        int k = net->nodes[i].host[0] ? topo_machines_find(m, net->nodes[i].host)
                                      : machine_of_part[part[g->vert[i]]];
        out->machine[i] = k;
        out->load[k] += topo_placement_node_weight(&net->nodes[i]);
        out->count[k]++;
    }
    out->cut = malloc((net->n_links + 1) * sizeof *out->cut);
    if (!out->cut) return -1;
    for (size_t l = 0; l < net->n_links; l++)
        if (out->machine[net->links[l].a] != out->machine[net->links[l].b])
            out->cut[out->n_cut++] = l;
    return 0;
}

int topo_placement_compute(const struct topo_network *net, const struct topo_machines *m,
                           struct topo_placement *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    struct graph g;
    if (m->n == 0) return snprintf(err, errlen, "%s lists no machine", m->source), -1;
    if (graph_build(&g, net, m, err, errlen) < 0) {
        graph_free(&g);
        return -1;
    }
    idx_t *part = calloc((size_t)g.nv + 1, sizeof *part);
    int *machine_of_part = calloc(m->n, sizeof *machine_of_part);
    out->n_nodes = net->n_nodes;
    out->n_machines = m->n;
    out->machine = calloc(net->n_nodes + 1, sizeof *out->machine);
    out->load = calloc(m->n, sizeof *out->load);
    out->count = calloc(m->n, sizeof *out->count);
    int rc = -1;
    if (!part || !machine_of_part || !out->machine || !out->load || !out->count)
        snprintf(err, errlen, "network '%s': placement: out of memory", net->name);
    else if (partition(&g, m, part, err, errlen, net->name) == 0) {
        rc = map_parts(&g, part, m->n, machine_of_part) < 0
                 ? -1
                 : placement_fill(out, net, m, &g, part, machine_of_part);
        if (rc < 0) snprintf(err, errlen, "network '%s': placement: out of memory", net->name);
    }
    free(part);
    free(machine_of_part);
    graph_free(&g);
    if (rc < 0) topo_placement_free(out);
    return rc;
}

void topo_placement_free(struct topo_placement *p)
{
    free(p->machine), free(p->cut), free(p->load), free(p->count);
    memset(p, 0, sizeof *p);
}

size_t topo_placement_remote_nodes(const struct topo_placement *p, const struct topo_machines *m)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_nodes; i++)
        n += !m->v[p->machine[i]].local;
    return n;
}
