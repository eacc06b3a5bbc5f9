/* test_route_change.c — the routes a move changes (topo/route_change.c):
 * on h1 - e1 - t1 with h1 - e2, t1's link moved from e1 to e2, the
 * changes of each host exactly (h1: its default and a /32 to t1 by e2, a
 * /32 to e1; e1 and e2: a /32 to t1; t1: none, its link and gateway
 * address moved with it), and
 * topo_routes_put's replace and append. */
#include "check.h"
#include "topo/address.h"
#include "topo/route.h"
#include "topo/route_change.h"

static char err[512];

static int host(struct topo_network *net, const char *name)
{
    return topo_node_add(net, name, TOPO_NODE_HOST, err, sizeof err);
}

static int link_ms(struct topo_network *net, int a, int b, double delay_ms)
{
    struct topo_link_params p = {0};
    p.delay_ns = (uint64_t)(delay_ms * 1e6);
    return topo_link_add(net, a, b, &p, err, sizeof err);
}

/* The gateway of the changes' route of node to dst_node (or -1: none). */
static const struct topo_route *change_to(const struct topo_route_changes *c, int node, int dst)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].node == node && c->v[i].route.dst_node == dst) return &c->v[i].route;
    return NULL;
}

static uint32_t addr_of_end(const struct topo_network *net, int link, int node)
{
    const struct topo_link *l = &net->links[link];
    return l->a == node ? l->addr_a : l->addr_b;
}

static void test_leaf_move(void)
{
    struct topo_network *net = topo_network_new("m", TOPO_BACKEND_KERNEL, 1, err, sizeof err);
    int h1 = host(net, "h1"), e1 = host(net, "e1"), e2 = host(net, "e2"), t1 = host(net, "t1");
    int l_e1 = link_ms(net, h1, e1, 2), l_e2 = link_ms(net, h1, e2, 4);
    int moved = link_ms(net, e1, t1, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing old, fresh;
    CHECK(topo_routing_compute(net, &old, err, sizeof err) == 0);
    net->links[moved].a = e2; /* the edge's end (and its address) goes to e2 */
    topo_name_link_end(net, (size_t)moved, e2, net->links[moved].ifname_a);
    CHECK(topo_routing_compute(net, &fresh, err, sizeof err) == 0);
    struct topo_route_changes c = {0};
    for (int n = 0; n < 4; n++)
        CHECK(topo_route_changes_of(net, &old, &fresh, n, t1, &c) == 0);
    const struct topo_route *r = change_to(&c, h1, t1);
    CHECK(r && r->link == l_e2 && r->dst_len == 32 && r->gateway == addr_of_end(net, l_e2, e2));
    r = change_to(&c, e1, t1);
    CHECK(r && r->link == l_e1 && r->gateway == addr_of_end(net, l_e1, h1));
    r = change_to(&c, e2, t1);
    CHECK(r && r->link == moved && r->gateway == addr_of_end(net, moved, t1));
    size_t of_t1 = 0;
    for (size_t i = 0; i < c.n; i++)
        of_t1 += c.v[i].node == t1;
    CHECK_MSG(of_t1 == 0, "t1 has %zu changes", of_t1);
    /* h1's default follows the most common next hop: e1 (e1, t1) before,
     * e2 (e2, t1) after; so h1 gets the default by e2, a /32 to e1 and
     * the /32 to t1 (its old /32 to e2 still leads the right way) */
    size_t of_h1 = 0;
    const struct topo_route *dflt = NULL;
    for (size_t i = 0; i < c.n; i++)
        if (c.v[i].node == h1) {
            of_h1++;
            if (c.v[i].route.dst_len == 0) dflt = &c.v[i].route;
        }
    CHECK_MSG(of_h1 == 3, "h1 has %zu changes", of_h1);
    CHECK(dflt && dflt->link == l_e2);
    r = change_to(&c, h1, e1);
    CHECK(r && r->link == l_e1 && r->dst_len == 32);
    /* put: appends h1's first route to t1 (its old routes reach t1 by the
     * default through e1), replaces one to the same destination after */
    struct topo_node_routes nr = {0};
    topo_routing_free(&fresh);
    CHECK(topo_routing_copy(&old, &fresh) == 0); /* fresh now a scratch copy */
    nr = fresh.nodes[h1];
    size_t before = nr.n_routes;
    CHECK(topo_routes_put(&nr, change_to(&c, h1, t1)) == 0);
    CHECK(nr.n_routes == before + 1 && nr.routes[before].link == l_e2);
    struct topo_route extra = {0x0a090909, 32, -1, l_e1, 0, -2};
    CHECK(topo_routes_put(&nr, &extra) == 0 && nr.n_routes == before + 2);
    size_t n = nr.n_routes;
    extra.link = l_e2;
    CHECK(topo_routes_put(&nr, &extra) == 0 && nr.n_routes == n && nr.routes[n - 1].link == l_e2);
    fresh.nodes[h1] = nr;
    topo_route_changes_free(&c);
    CHECK(!c.v && !c.n);
    topo_routing_free(&old);
    topo_routing_free(&fresh);
    topo_network_free(net);
}

int main(void)
{
    test_leaf_move();
    return check_report();
}
