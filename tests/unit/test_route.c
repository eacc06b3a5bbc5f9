/* test_route.c — the address plan and static routing of the topology model:
 * addresses and subnets, interface names, switch segments, shortest paths
 * by delay then hops, default-route compression, parallel links, and the
 * errors. */
#include "check.h"
#include "topo/address.h"
#include "topo/route.h"

static char err[512];

static struct topo_network *net_new(void)
{
    return topo_network_new("t", TOPO_BACKEND_KERNEL, 1, err, sizeof err);
}

static int host(struct topo_network *net, const char *name)
{
    return topo_node_add(net, name, TOPO_NODE_HOST, err, sizeof err);
}

static int sw(struct topo_network *net, const char *name)
{
    return topo_node_add(net, name, TOPO_NODE_SWITCH, err, sizeof err);
}

static int link_ms(struct topo_network *net, int a, int b, double delay_ms)
{
    struct topo_link_params p = {0};
    p.delay_ns = (uint64_t)(delay_ms * 1e6);
    return topo_link_add(net, a, b, &p, err, sizeof err);
}

static void path_names(struct topo_network *net, struct topo_routing *r, int a, int b, char *out,
                       size_t cap)
{
    int path[64];
    int n = topo_routing_path(net, r, a, b, path, 64);
    CHECK_MSG(n <= 64, "path of %d nodes", n);
    if (n > 64) n = 64;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strncat(out, ",", cap - strlen(out) - 1);
        strncat(out, net->nodes[path[i]].name, cap - strlen(out) - 1);
    }
    if (n < 0) snprintf(out, cap, "(no path)");
}

static void test_addresses_and_names(void)
{
    struct topo_network *net = net_new();
    int a = host(net, "alpha"), b = host(net, "beta"), s = sw(net, "cell");
    int c = host(net, "a-very-long-node-name-1"), d = host(net, "a-very-long-node-name-2");
    link_ms(net, a, b, 1);
    link_ms(net, a, s, 1);
    link_ms(net, c, s, 1);
    link_ms(net, d, s, 1);
    link_ms(net, a, c, 1);
    link_ms(net, a, d, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    CHECK_STREQ(net->nodes[a].addr, "10.0.0.1");
    CHECK_STREQ(net->nodes[b].addr, "10.0.0.2");
    CHECK_STREQ(net->nodes[s].addr, ""); /* switches have no node address */
    CHECK(net->links[0].prefix_len == 30);
    CHECK(net->links[0].addr_b == net->links[0].addr_a + 1);
    /* Hosts on the switch share one subnet. */
    CHECK(net->links[1].prefix_len == net->links[2].prefix_len);
    CHECK((net->links[1].addr_a >> (32 - net->links[1].prefix_len)) ==
          (net->links[2].addr_a >> (32 - net->links[2].prefix_len)));
    CHECK(net->links[1].addr_b == 0); /* the switch end */
    CHECK_STREQ(net->links[0].ifname_a, "beta");
    CHECK_STREQ(net->links[0].ifname_b, "alpha");
    /* Two long names truncate to the same 15 characters on alpha: resolved. */
    CHECK_STREQ(net->links[4].ifname_a, "a-very-long-nod");
    CHECK_STREQ(net->links[5].ifname_a, "a-very-long-n-1");
    CHECK(strlen(net->links[5].ifname_a) <= 15);
    topo_network_free(net);
}

static void test_shortest_by_delay_then_hops(void)
{
    /* a-b-c direct 10 ms each way versus a-d-e-c 1 ms per hop: delay wins;
     * with equal delay the path with fewer hops wins. */
    struct topo_network *net = net_new();
    int a = host(net, "a"), b = host(net, "b"), c = host(net, "c");
    int d = host(net, "d"), e = host(net, "e");
    link_ms(net, a, b, 10);
    link_ms(net, b, c, 10);
    link_ms(net, a, d, 1);
    link_ms(net, d, e, 1);
    link_ms(net, e, c, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    char p[256];
    path_names(net, &r, a, c, p, sizeof p);
    CHECK_STREQ(p, "a,d,e,c");
    path_names(net, &r, c, b, p, sizeof p);
    CHECK_STREQ(p, "c,b");
    topo_routing_free(&r);
    topo_network_free(net);

    net = net_new();
    a = host(net, "a"), b = host(net, "b"), c = host(net, "c"), d = host(net, "d");
    link_ms(net, a, b, 2);
    link_ms(net, b, d, 2);
    link_ms(net, a, c, 1);
    link_ms(net, c, b, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    path_names(net, &r, a, b, p, sizeof p);
    CHECK_STREQ(p, "a,b"); /* 2 ms either way: one hop beats two */
    topo_routing_free(&r);
    topo_network_free(net);
}

/* cloud - edge1 - switch(cell) - {t1, t2}; cloud - edge2 - t3 */
static void test_three_tiers_with_switch(void)
{
    struct topo_network *net = net_new();
    int cloud = host(net, "cloud"), e1 = host(net, "edge1"), e2 = host(net, "edge2");
    int cell = sw(net, "cell"), t1 = host(net, "t1"), t2 = host(net, "t2"), t3 = host(net, "t3");
    link_ms(net, cloud, e1, 10);
    link_ms(net, cloud, e2, 10);
    link_ms(net, e1, cell, 1);
    link_ms(net, t1, cell, 1);
    link_ms(net, t2, cell, 1);
    link_ms(net, e2, t3, 5);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    char p[256];
    path_names(net, &r, t1, t3, p, sizeof p);
    CHECK_STREQ(p, "t1,cell,edge1,cloud,edge2,t3");
    path_names(net, &r, t1, t2, p, sizeof p);
    CHECK_STREQ(p, "t1,cell,t2");
    /* A leaf needs one default route (via edge1) plus t2 directly on the segment. */
    const struct topo_node_routes *leaf = &r.nodes[t3];
    CHECK(leaf->n_routes == 1 && leaf->routes[0].dst == 0);
    CHECK(leaf->routes[0].gateway == net->links[5].addr_a); /* edge2's end */
    const struct topo_node_routes *t1r = &r.nodes[t1];
    CHECK(t1r->n_routes == 2);
    CHECK(t1r->routes[0].gateway == net->links[2].addr_a); /* edge1 on the cell */
    CHECK(t1r->routes[1].dst == net->nodes[t2].node_addr);
    topo_routing_free(&r);
    topo_network_free(net);
}

static void test_errors(void)
{
    struct topo_network *net = net_new();
    int a = host(net, "a"), b = host(net, "b"), c = host(net, "c");
    CHECK(link_ms(net, a, a, 1) < 0);
    CHECK_CONTAINS(err, "a-a: a node cannot be linked to itself");
    link_ms(net, a, b, 1);
    CHECK(link_ms(net, b, a, 1) < 0);
    CHECK_CONTAINS(err, "already linked");
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "no path from 'a' to 'c'");
    (void)c;
    topo_network_free(net);

    net = net_new();
    int s1 = sw(net, "s1"), s2 = sw(net, "s2"), s3 = sw(net, "s3");
    link_ms(net, s1, s2, 0);
    link_ms(net, s2, s3, 0);
    link_ms(net, s3, s1, 0);
    CHECK(topo_assign_addresses(net, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "loop of switches");
    topo_network_free(net);

    net = net_new();
    CHECK(topo_set_addr_base(net, "192.168.7.0/24", err, sizeof err) == 0);
    CHECK(topo_set_addr_base(net, "10.1.0.0/8", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "host bits");
    CHECK(topo_set_addr_base(net, "banana", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "'banana'");
    topo_set_addr_base(net, "192.168.7.0/24", err, sizeof err);
    int prev = host(net, "h0");
    for (int i = 1; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "h%d", i);
        int h = host(net, name);
        link_ms(net, prev, h, 1);
        prev = h;
    }
    CHECK(topo_assign_addresses(net, err, sizeof err) < 0); /* 100 nodes + 99 /30s > 256 */
    CHECK_CONTAINS(err, "too small");
    topo_network_free(net);
}

static int parallel_ms(struct topo_network *net, int a, int b, double delay_ms)
{
    struct topo_link_params p = {0};
    p.delay_ns = (uint64_t)(delay_ms * 1e6);
    return topo_link_add_parallel(net, a, b, &p, err, sizeof err);
}

/* Parallel links: interfaces, addresses and names of their own; routes take
 * the least delay, the first made of equal ones. */
static void test_parallel_links(void)
{
    struct topo_network *net = net_new();
    int a = host(net, "a"), b = host(net, "b"), s = sw(net, "s");
    int ab1 = link_ms(net, a, b, 5);
    int ab2 = parallel_ms(net, b, a, 2);
    int ab3 = parallel_ms(net, a, b, 2);
    int as1 = link_ms(net, a, s, 1);
    int as2 = parallel_ms(net, s, a, 1);
    CHECK(ab1 == 0 && ab2 == 1 && ab3 == 2 && as1 == 3 && as2 == 4);
    CHECK(link_ms(net, a, b, 1) < 0); /* still refused without parallel */
    CHECK_CONTAINS(err,
                   "link a-b: the two nodes are already linked (parallel = true adds another)");
    char name[64];
    topo_link_describe(net, &net->links[ab1], name, sizeof name);
    CHECK_STREQ(name, "a-b");
    topo_link_describe(net, &net->links[ab2], name, sizeof name);
    CHECK_STREQ(name, "b-a#2");
    topo_link_describe(net, &net->links[ab3], name, sizeof name);
    CHECK_STREQ(name, "a-b#3");
    topo_link_describe(net, &net->links[as2], name, sizeof name);
    CHECK_STREQ(name, "s-a#2");
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    CHECK_STREQ(net->links[ab1].ifname_a, "b");
    CHECK_STREQ(net->links[ab2].ifname_b, "b-1");
    CHECK_STREQ(net->links[ab3].ifname_a, "b-2");
    CHECK_STREQ(net->links[as1].ifname_a, "s");
    CHECK_STREQ(net->links[as2].ifname_b, "s-1");
    CHECK(net->links[ab1].addr_a != net->links[ab3].addr_a);
    CHECK(net->links[as1].addr_a != net->links[as2].addr_b && net->links[as2].addr_b != 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    /* 2 ms beats 5 ms; of the two 2 ms links the first made (b-a#2). */
    CHECK(r.nodes[a].n_routes == 1 && r.nodes[a].routes[0].link == ab2);
    CHECK(r.nodes[a].routes[0].gateway == net->links[ab2].addr_a); /* b's end */
    CHECK(r.nodes[b].n_routes == 1 && r.nodes[b].routes[0].link == ab2);
    topo_routing_free(&r);
    topo_network_free(net);
}

/* A 1000-leaf tree of depth 3 needs O(N * depth) routes, not N^2. */
static void test_tree_route_count(void)
{
    struct topo_network *net = net_new();
    int root = host(net, "root");
    char name[32];
    int leaves = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "m%d", i);
        int mid = host(net, name);
        link_ms(net, root, mid, 1);
        for (int j = 0; j < 100; j++) {
            snprintf(name, sizeof name, "l%d-%d", i, j);
            link_ms(net, mid, host(net, name), 1);
            leaves++;
        }
    }
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    size_t n = net->n_nodes;
    CHECK_MSG(r.total_routes < 4 * n, "%zu routes for %zu nodes", r.total_routes, n);
    printf("tree of %zu nodes: %zu routes\n", n, r.total_routes);
    topo_routing_free(&r);
    topo_network_free(net);
    (void)leaves;
}

/* Hosts sharing a switch reach each other on-link: one route each for a
 * 1000-host star instead of 999; a host on the segment with a private
 * link elsewhere keeps a /32 for what lies behind it. */
static void test_star_on_one_segment(void)
{
    struct topo_network *net = net_new();
    int s = sw(net, "s"), first = -1, last = -1;
    char name[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "h%d", i);
        last = host(net, name);
        if (first < 0) first = last;
        link_ms(net, s, last, 1);
    }
    int far = host(net, "far");
    link_ms(net, first, far, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    const struct topo_node_routes *lr = &r.nodes[last];
    CHECK_MSG(lr->n_routes == 2, "%zu routes", lr->n_routes); /* the block on-link, far via h0 */
    CHECK(lr->routes[0].gateway == 0 && lr->routes[0].via == TOPO_ROUTE_DIRECT);
    CHECK(lr->routes[0].dst == net->node_block && lr->routes[0].dst_len == net->node_block_len);
    CHECK(lr->routes[1].dst_node == far && lr->routes[1].dst_len == 32);
    CHECK_MSG(r.total_routes < 3 * net->n_nodes, "%zu routes", r.total_routes);
    char p[256];
    path_names(net, &r, last, first, p, sizeof p);
    CHECK_STREQ(p, "h999,s,h0");
    path_names(net, &r, last, far, p, sizeof p);
    CHECK_STREQ(p, "h999,s,h0,far");
    path_names(net, &r, far, last, p, sizeof p);
    CHECK_STREQ(p, "far,h0,s,h999");
    topo_routing_free(&r);
    topo_network_free(net);
}

/* A segment of any length: 100 switches in a row between two hosts (the
 * path walk once stopped at 64 and cut the path without a word), and a
 * buffer too small is told by the return, as with snprintf. */
static void test_long_switch_chain(void)
{
    struct topo_network *net = net_new();
    int a = host(net, "a"), prev = a;
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "s%d", i);
        int s = sw(net, name);
        link_ms(net, prev, s, 1);
        prev = s;
    }
    int b = host(net, "b");
    link_ms(net, prev, b, 1);
    CHECK(topo_assign_addresses(net, err, sizeof err) == 0);
    struct topo_routing r;
    CHECK(topo_routing_compute(net, &r, err, sizeof err) == 0);
    int path[128], small[64];
    int n = topo_routing_path(net, &r, a, b, path, 128);
    CHECK_MSG(n == 102, "%d nodes", n);
    CHECK(n == 102 && path[0] == a && path[1] == 1 && path[100] == prev && path[101] == b);
    bool in_order = n == 102;
    for (int i = 1; in_order && i <= 100; i++)
        in_order = path[i] == i; /* s0 is node 1 */
    CHECK(in_order);
    CHECK(topo_routing_path(net, &r, b, a, path, 128) == 102 && path[1] == prev && path[101] == a);
    CHECK(topo_routing_path(net, &r, a, b, small, 64) == 102 && small[63] == 63);
    topo_routing_free(&r);
    topo_network_free(net);
}

int main(void)
{
    test_long_switch_chain();
    test_star_on_one_segment();
    test_addresses_and_names();
    test_shortest_by_delay_then_hops();
    test_three_tiers_with_switch();
    test_errors();
    test_parallel_links();
    test_tree_route_count();
    return check_report();
}
