/* route_change.c — the routes a move changes (see route_change.h). */
#include "topo/route_change.h"

#include <stdlib.h>

static bool same_route(const struct topo_route *x, const struct topo_route *y)
{
    return x->dst == y->dst && x->dst_len == y->dst_len && x->link == y->link &&
           x->gateway == y->gateway;
}

static bool has_route(const struct topo_node_routes *nr, const struct topo_route *r)
{
    for (size_t i = 0; i < nr->n_routes; i++)
        if (same_route(&nr->routes[i], r)) return true;
    return false;
}

static int changes_push(struct topo_route_changes *c, int node, const struct topo_route *r)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        struct topo_route_change *grown = realloc(c->v, cap * sizeof *grown);
        if (!grown) return -1;
        c->v = grown;
        c->cap = cap;
    }
    c->v[c->n++] = (struct topo_route_change){node, *r};
    return 0;
}

/* The route of nr that covers address dst (the longest prefix), or NULL. */
static const struct topo_route *covering_route(const struct topo_node_routes *nr, uint32_t dst)
{
    const struct topo_route *best = NULL;
    for (size_t i = 0; i < nr->n_routes; i++) {
        const struct topo_route *r = &nr->routes[i];
        uint32_t mask = r->dst_len ? ~0u << (32 - r->dst_len) : 0;
        if ((dst & mask) == (r->dst & mask) && (!best || r->dst_len > best->dst_len)) best = r;
    }
    return best;
}

int topo_route_changes_of(const struct topo_network *net, const struct topo_routing *old,
                          const struct topo_routing *fresh, int node, int leaf,
                          struct topo_route_changes *out)
{
    const struct topo_node_routes *was = &old->nodes[node], *now = &fresh->nodes[node];
    for (size_t i = 0; i < now->n_routes; i++)
        if (!has_route(was, &now->routes[i]) && changes_push(out, node, &now->routes[i]) < 0)
            return -1;
    struct topo_route host;
    if (node == leaf || !topo_route_host_to(net, now, leaf, &host)) return 0;
    return changes_push(out, node, &host);
}

bool topo_route_host_to(const struct topo_network *net, const struct topo_node_routes *nr, int leaf,
                        struct topo_route *out)
{
    uint32_t dst = net->nodes[leaf].node_addr;
    const struct topo_route *c = covering_route(nr, dst);
    if (!c) return false;
    *out = *c;
    out->dst = dst;
    out->dst_len = 32;
    out->dst_node = leaf;
    return true;
}

void topo_route_changes_free(struct topo_route_changes *c)
{
    free(c->v);
    *c = (struct topo_route_changes){0};
}

int topo_routes_put(struct topo_node_routes *nr, const struct topo_route *r)
{
    for (size_t i = 0; i < nr->n_routes; i++)
        if (nr->routes[i].dst == r->dst && nr->routes[i].dst_len == r->dst_len) {
            nr->routes[i] = *r;
            return 0;
        }
    struct topo_route *grown = realloc(nr->routes, (nr->n_routes + 1) * sizeof *grown);
    if (!grown) return -1;
    nr->routes = grown;
    nr->routes[nr->n_routes++] = *r;
    return 0;
}
