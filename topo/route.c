/* route.c — static shortest-path routing (see route.h). */
#include "topo/route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- adjacency ---- */

struct adjacency {
    int *start; /* n_nodes + 1 offsets into edges */
    int *edges; /* link indices */
};

static int adjacency_build(const struct topo_network *net, struct adjacency *adj)
{
    adj->start = calloc(net->n_nodes + 1, sizeof *adj->start);
    adj->edges = malloc((2 * net->n_links + 1) * sizeof *adj->edges);
    if (!adj->start || !adj->edges) return -1;
    for (size_t k = 0; k < net->n_links; k++) {
        adj->start[net->links[k].a + 1]++;
        adj->start[net->links[k].b + 1]++;
    }
    for (size_t i = 0; i < net->n_nodes; i++)
        adj->start[i + 1] += adj->start[i];
    int *fill = malloc((net->n_nodes + 1) * sizeof *fill);
    if (!fill) return -1;
    memcpy(fill, adj->start, (net->n_nodes + 1) * sizeof *fill);
    for (size_t k = 0; k < net->n_links; k++) {
        adj->edges[fill[net->links[k].a]++] = (int)k;
        adj->edges[fill[net->links[k].b]++] = (int)k;
    }
    free(fill);
    return 0;
}

static void adjacency_free(struct adjacency *adj)
{
    free(adj->start);
    free(adj->edges);
}

static int other_end(const struct topo_link *l, int node)
{
    return l->a == node ? l->b : l->a;
}

/* ---- Dijkstra on (delay, hops) ---- */

struct cost {
    uint64_t delay;
    uint32_t hops;
};

static bool cost_less(struct cost x, struct cost y)
{
    return x.delay < y.delay || (x.delay == y.delay && x.hops < y.hops);
}

struct heap_item {
    struct cost cost;
    int node;
};

struct heap {
    struct heap_item *items;
    size_t n;
};

static bool item_less(const struct heap_item *x, const struct heap_item *y)
{
    return cost_less(x->cost, y->cost) ||
           (!cost_less(y->cost, x->cost) && x->node < y->node); /* deterministic ties */
}

static void heap_push(struct heap *h, struct heap_item it)
{
    size_t i = h->n++;
    h->items[i] = it;
    while (i > 0 && item_less(&h->items[i], &h->items[(i - 1) / 2])) {
        struct heap_item t = h->items[i];
        h->items[i] = h->items[(i - 1) / 2];
        h->items[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static struct heap_item heap_pop(struct heap *h)
{
    struct heap_item top = h->items[0];
    h->items[0] = h->items[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && item_less(&h->items[l], &h->items[m])) m = l;
        if (r < h->n && item_less(&h->items[r], &h->items[m])) m = r;
        if (m == i) break;
        struct heap_item t = h->items[i];
        h->items[i] = h->items[m];
        h->items[m] = t;
        i = m;
    }
    return top;
}

/* Scratch space reused for every source: parent link of each node on its
 * best path, and the costs. */
struct search {
    struct cost *cost;
    int *parent_link;
    bool *done;
    struct heap heap;
    int *via_count; /* per node, all zero between uses (most_common) */
    int *queue;     /* forests: the breadth-first search's queue */
    bool forest;    /* no cycle: every path is the only one */
};

/* Whether the links form no cycle (union-find): then each pair of nodes has
 * at most one path, and a breadth-first walk finds what Dijkstra would. */
static bool is_forest(const struct topo_network *net, int *root)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        root[i] = (int)i;
    for (size_t k = 0; k < net->n_links; k++) {
        int x = net->links[k].a, y = net->links[k].b;
        while (root[x] != x)
            x = root[x] = root[root[x]];
        while (root[y] != y)
            y = root[y] = root[root[y]];
        if (x == y) return false;
        root[x] = y;
    }
    return true;
}

static int search_init(struct search *s, const struct topo_network *net)
{
    size_t n = net->n_nodes ? net->n_nodes : 1;
    s->cost = malloc(n * sizeof *s->cost);
    s->parent_link = malloc(n * sizeof *s->parent_link);
    s->done = malloc(n * sizeof *s->done);
    s->heap.items = malloc((2 * net->n_links + n + 1) * sizeof *s->heap.items);
    s->via_count = calloc(n, sizeof *s->via_count);
    s->queue = malloc(n * sizeof *s->queue);
    if (!s->cost || !s->parent_link || !s->done || !s->heap.items || !s->via_count || !s->queue)
        return -1;
    s->forest = is_forest(net, s->queue);
    return 0;
}

static void search_free(struct search *s)
{
    free(s->cost);
    free(s->parent_link);
    free(s->done);
    free(s->heap.items);
    free(s->via_count);
    free(s->queue);
}

/* A forest's paths from src, in O(nodes + links): at 1000 nodes Dijkstra
 * from every host cost 0.1-0.2 s of the start, on the core that makes the
 * namespaces meanwhile. Costs as Dijkstra would leave them. */
static void forest_search(const struct topo_network *net, const struct adjacency *adj, int src,
                          struct search *s)
{
    size_t head = 0, tail = 0;
    s->queue[tail++] = src;
    while (head < tail) {
        int u = s->queue[head++];
        s->done[u] = true;
        for (int e = adj->start[u]; e < adj->start[u + 1]; e++) {
            const struct topo_link *l = &net->links[adj->edges[e]];
            int v = other_end(l, u);
            if (v == src || s->parent_link[v] >= 0) continue;
            s->cost[v] = (struct cost){s->cost[u].delay + l->params.delay_ns, s->cost[u].hops + 1};
            s->parent_link[v] = adj->edges[e];
            s->queue[tail++] = v;
        }
    }
}

/* Paths never continue through a host other than the source's first hops:
 * hosts forward (they are routers), so they are ordinary vertices here. */
static void dijkstra(const struct topo_network *net, const struct adjacency *adj, int src,
                     struct search *s)
{
    for (size_t i = 0; i < net->n_nodes; i++) {
        s->cost[i] = (struct cost){UINT64_MAX, UINT32_MAX};
        s->parent_link[i] = -1;
        s->done[i] = false;
    }
    s->cost[src] = (struct cost){0, 0};
    if (s->forest) return forest_search(net, adj, src, s);
    s->heap.n = 0;
    heap_push(&s->heap, (struct heap_item){s->cost[src], src});
    while (s->heap.n) {
        struct heap_item it = heap_pop(&s->heap);
        if (s->done[it.node]) continue;
        s->done[it.node] = true;
        for (int e = adj->start[it.node]; e < adj->start[it.node + 1]; e++) {
            const struct topo_link *l = &net->links[adj->edges[e]];
            int v = other_end(l, it.node);
            struct cost c = {it.cost.delay + l->params.delay_ns, it.cost.hops + 1};
            if (s->done[v] || !cost_less(c, s->cost[v])) continue;
            s->cost[v] = c;
            s->parent_link[v] = adj->edges[e];
            heap_push(&s->heap, (struct heap_item){c, v});
        }
    }
}

/* ---- next hops ---- */

/* The address host y has on link l (its end of it). */
static uint32_t addr_on_link(const struct topo_link *l, int y)
{
    return l->a == y ? l->addr_a : l->addr_b;
}

/* Walks back from dst to src: the first link out of src, and the gateway
 * (first host after src, addressed on the link it was entered by). */
static struct topo_route next_hop(const struct topo_network *net, const struct search *s, int src,
                                  int dst)
{
    int node = dst, first_host = dst, entry_link = s->parent_link[dst];
    while (true) {
        int link = s->parent_link[node];
        int prev = other_end(&net->links[link], node);
        if (net->nodes[node].kind == TOPO_NODE_HOST) {
            first_host = node;
            entry_link = link;
        }
        if (prev == src) {
            return (struct topo_route){net->nodes[dst].node_addr,
                                       32,
                                       dst,
                                       link,
                                       addr_on_link(&net->links[entry_link], first_host),
                                       first_host};
        }
        node = prev;
    }
}

/* ---- default route compression ---- */

static bool same_hop(const struct topo_route *x, const struct topo_route *y)
{
    return x->link == y->link && x->via == y->via;
}

/* The most common next hop and how many destinations use it. A next host
 * is reached through one link (its branch of the shortest-path tree), so
 * `via` alone names a next hop; counts is scratch of one int per node, all
 * zero, and left all zero. Ties go to the first in hops order. */
static size_t most_common(const struct topo_route *hops, size_t n, int *counts, size_t *count)
{
    size_t best = 0;
    int best_count = 0;
    for (size_t i = 0; i < n; i++)
        if (++counts[hops[i].via] > best_count) best_count = counts[hops[i].via], best = i;
    for (size_t i = 0; i < n; i++)
        counts[hops[i].via] = 0;
    *count = (size_t)best_count;
    return best;
}

/* Next hops that are the destination itself across a segment, per link:
 * the link with the most, and how many. */
static int best_segment_link(const struct topo_network *net, const struct topo_route *hops,
                             size_t n, size_t *count)
{
    int best = -1;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct topo_link *l = &net->links[hops[i].link];
        bool on_segment =
            net->nodes[l->a].kind == TOPO_NODE_SWITCH || net->nodes[l->b].kind == TOPO_NODE_SWITCH;
        if (!on_segment || hops[i].via != hops[i].dst_node || hops[i].link == best) continue;
        size_t c = 0;
        for (size_t j = 0; j < n; j++)
            c += hops[j].link == hops[i].link && hops[j].via == hops[j].dst_node;
        if (c > *count) *count = c, best = hops[i].link;
    }
    return best;
}

/* Default route via the most common next hop (hops[best]), /32s for the rest. */
static void compress_by_default(struct topo_route *hops, size_t n, size_t best,
                                struct topo_node_routes *out)
{
    struct topo_route def = hops[best];
    def.dst = 0;
    def.dst_len = 0;
    def.dst_node = -1;
    out->routes[out->n_routes++] = def;
    for (size_t i = 0; i < n; i++)
        if (!same_hop(&hops[i], &def)) out->routes[out->n_routes++] = hops[i];
}

/* One on-link route for the node block on the busiest segment, /32s for
 * the destinations reached otherwise. */
static void compress_by_segment(const struct topo_network *net, struct topo_route *hops, size_t n,
                                int link, struct topo_node_routes *out)
{
    out->routes[out->n_routes++] =
        (struct topo_route){net->node_block, net->node_block_len, -1, link, 0, TOPO_ROUTE_DIRECT};
    for (size_t i = 0; i < n; i++)
        if (hops[i].link != link || hops[i].via != hops[i].dst_node)
            out->routes[out->n_routes++] = hops[i];
}

static int compress_routes(const struct topo_network *net, struct topo_route *hops, size_t n,
                           int *counts, struct topo_node_routes *out)
{
    out->routes = malloc((n + 1) * sizeof *out->routes);
    if (!out->routes) return -1;
    out->n_routes = 0;
    if (n == 0) return 0;
    size_t on_segment;
    int link = best_segment_link(net, hops, n, &on_segment);
    size_t common;
    size_t best = most_common(hops, n, counts, &common);
    if (link >= 0 && net->node_block_len && on_segment > common)
        compress_by_segment(net, hops, n, link, out);
    else
        compress_by_default(hops, n, best, out);
    return 0;
}

static int unreachable(const struct topo_network *net, int a, int b, char *err, size_t errlen)
{
    snprintf(err, errlen, "network '%s': no path from '%s' to '%s' (the network is disconnected)",
             net->name, net->nodes[a].name, net->nodes[b].name);
    return -1;
}

static int routes_for_source(const struct topo_network *net, const struct adjacency *adj,
                             struct search *s, int src, struct topo_route *hops,
                             struct topo_node_routes *out, char *err, size_t errlen)
{
    dijkstra(net, adj, src, s);
    size_t n = 0;
    for (size_t d = 0; d < net->n_nodes; d++) {
        if ((int)d == src || net->nodes[d].kind != TOPO_NODE_HOST) continue;
        if (s->parent_link[d] < 0) return unreachable(net, src, (int)d, err, errlen);
        hops[n++] = next_hop(net, s, src, (int)d);
    }
    if (compress_routes(net, hops, n, s->via_count, out) < 0)
        return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

int topo_routing_compute(const struct topo_network *net, struct topo_routing *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct adjacency adj = {0};
    struct search s = {0};
    struct topo_route *hops = malloc((net->n_nodes + 1) * sizeof *hops);
    out->nodes = calloc(net->n_nodes + 1, sizeof *out->nodes);
    out->n_nodes = net->n_nodes;
    int rc = -1;
    if (!hops || !out->nodes || adjacency_build(net, &adj) < 0 || search_init(&s, net) < 0) {
        snprintf(err, errlen, "network '%s': out of memory computing routes", net->name);
        goto done;
    }
    for (size_t src = 0; src < net->n_nodes; src++) {
        if (net->nodes[src].kind != TOPO_NODE_HOST) continue;
        if (routes_for_source(net, &adj, &s, (int)src, hops, &out->nodes[src], err, errlen) < 0)
            goto done;
        out->total_routes += out->nodes[src].n_routes;
    }
    rc = 0;
done:
    free(hops);
    search_free(&s);
    adjacency_free(&adj);
    if (rc < 0) topo_routing_free(out);
    return rc;
}

void topo_routing_free(struct topo_routing *r)
{
    for (size_t i = 0; r->nodes && i < r->n_nodes; i++)
        free(r->nodes[i].routes);
    free(r->nodes);
    memset(r, 0, sizeof *r);
}

int topo_routing_copy(const struct topo_routing *from, struct topo_routing *to)
{
    memset(to, 0, sizeof *to);
    to->nodes = calloc(from->n_nodes ? from->n_nodes : 1, sizeof *to->nodes);
    if (!to->nodes) return -1;
    to->n_nodes = from->n_nodes;
    to->total_routes = from->total_routes;
    for (size_t i = 0; i < from->n_nodes; i++) {
        size_t n = from->nodes[i].n_routes;
        if (!n) continue;
        to->nodes[i].routes = malloc(n * sizeof *to->nodes[i].routes);
        if (!to->nodes[i].routes) {
            topo_routing_free(to);
            return -1;
        }
        memcpy(to->nodes[i].routes, from->nodes[i].routes, n * sizeof *to->nodes[i].routes);
        to->nodes[i].n_routes = n;
    }
    return 0;
}

/* ---- paths ---- */

static const struct topo_route *route_to(const struct topo_node_routes *nr, int dst_node)
{
    for (size_t i = 1; i < nr->n_routes; i++)
        if (nr->routes[i].dst_node == dst_node) return &nr->routes[i];
    return nr->n_routes ? &nr->routes[0] : NULL;
}

/* Nodes from `to` back to `from` (excluded) along the search's parent links:
 * the segment's length, or -1 when `to` is unreachable. Any number of
 * switches: the walk is bounded by the node count, not by a buffer. */
static long segment_length(const struct topo_network *net, const struct search *s, int from, int to)
{
    long depth = 0;
    for (int v = to; v != from; depth++) {
        if (s->parent_link[v] < 0 || (size_t)depth >= net->n_nodes) return -1;
        v = other_end(&net->links[s->parent_link[v]], v);
    }
    return depth;
}

/* Appends the switches between host `from` and the next host `to` (L2 path),
 * writing each node at its place from the end so no buffer bounds the path. */
static int append_segment(const struct topo_network *net, int from, int to, int *path, size_t cap,
                          size_t *n)
{
    struct adjacency adj = {0};
    struct search s = {0};
    int rc = -1;
    if (adjacency_build(net, &adj) == 0 && search_init(&s, net) == 0) {
        dijkstra(net, &adj, from, &s);
        long depth = segment_length(net, &s, from, to);
        if (depth >= 0) {
            long i = depth - 1;
            for (int v = to; v != from; i--) {
                if (*n + (size_t)i < cap) path[*n + (size_t)i] = v;
                v = other_end(&net->links[s.parent_link[v]], v);
            }
            *n += (size_t)depth;
            rc = 0;
        }
    }
    search_free(&s);
    adjacency_free(&adj);
    return rc;
}

int topo_routing_path(const struct topo_network *net, const struct topo_routing *r, int from,
                      int to, int *path, size_t cap)
{
    size_t n = 1;
    if (cap) path[0] = from;
    int at = from;
    for (size_t guard = 0; at != to && guard <= net->n_nodes; guard++) {
        const struct topo_route *rt = route_to(&r->nodes[at], to);
        if (!rt) return -1;
        int next = rt->via == TOPO_ROUTE_DIRECT ? to : rt->via;
        if (append_segment(net, at, next, path, cap, &n) < 0) return -1;
        at = next;
    }
    return at == to ? (int)n : -1;
}
