/* test_placement.c — the topology partitioned over machines with METIS
 * (topo/placement.c): the cut falls on the long-delay link, edge-cloud
 * before terminal-edge; shares follow cores; pins hold and the rest of a
 * pinned cluster follows; the same input gives the same placement; the
 * weights, the errors and the written forms. */
#include "check.h"
#include "topo/placement.h"

#include <stdint.h>

static char err[512];

static int node(struct topo_network *net, const char *name, enum topo_node_kind kind)
{
    int i = topo_node_add(net, name, kind, err, sizeof err);
    CHECK_MSG(i >= 0, "%s", err);
    return i;
}

static void add_link(struct topo_network *net, int a, int b, double mbit, double delay_ms)
{
    struct topo_link_params p = {0};
    p.rate_bps = (uint64_t)(mbit * 1e6);
    p.delay_ns = (uint64_t)(delay_ms * 1e6);
    CHECK_MSG(topo_link_add(net, a, b, &p, err, sizeof err) >= 0, "%s", err);
}

static void machines(struct topo_machines *m, int n, const int *cores)
{
    memset(m, 0, sizeof *m);
    snprintf(m->source, sizeof m->source, "hosts.txt");
    for (int i = 0; i < n; i++) {
        char name[16], addr[32];
        snprintf(name, sizeof name, "m%d", i + 1);
        snprintf(addr, sizeof addr, "10.0.0.%d", i + 1);
        CHECK(topo_machines_add(m, name, addr, cores[i], err, sizeof err) == 0);
    }
}

/* Two stars of a switch and five hosts each (1 Gbit/s, 1 ms), their
 * switches joined by one 1 Gbit/s 50 ms link. */
static struct topo_network *two_clusters(void)
{
    struct topo_network *net = topo_network_new("two", TOPO_BACKEND_USER, 1, err, sizeof err);
    const char *side[] = {"a", "b"};
    int sw[2];
    for (int s = 0; s < 2; s++) {
        char name[16];
        snprintf(name, sizeof name, "s%s", side[s]);
        sw[s] = node(net, name, TOPO_NODE_SWITCH);
        for (int i = 1; i <= 5; i++) {
            snprintf(name, sizeof name, "%s%d", side[s], i);
            add_link(net, sw[s], node(net, name, TOPO_NODE_HOST), 1000, 1);
        }
    }
    add_link(net, sw[0], sw[1], 1000, 50);
    return net;
}

static const char *machine_of(const struct topo_placement *p, const struct topo_network *net,
                              const struct topo_machines *m, const char *name)
{
    int i = topo_node_find(net, name);
    return i < 0 ? "?" : m->v[p->machine[i]].name;
}

static void cut_at_long_delay(void)
{
    struct topo_network *net = two_clusters();
    struct topo_machines m;
    machines(&m, 2, (int[]){4, 4});
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(p.n_cut == 1, "%zu links cut", p.n_cut);
    if (p.n_cut == 1) CHECK(net->links[p.cut[0]].params.delay_ns == 50000000);
    for (int i = 1; i <= 5; i++) {
        char a[8], b[8];
        snprintf(a, sizeof a, "a%d", i);
        snprintf(b, sizeof b, "b%d", i);
        CHECK_STREQ(machine_of(&p, net, &m, a), machine_of(&p, net, &m, "sa"));
        CHECK_STREQ(machine_of(&p, net, &m, b), machine_of(&p, net, &m, "sb"));
    }
    CHECK(strcmp(machine_of(&p, net, &m, "sa"), machine_of(&p, net, &m, "sb")) != 0);
    CHECK(p.count[0] == 6 && p.count[1] == 6);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

/* cloud - 2 edges (1 Gbit/s, 20 ms) - 4 terminals each (100 Mbit/s, 5 ms):
 * on two machines the cut is an edge-cloud link, not terminal-edge ones. */
static void cut_edge_cloud(void)
{
    struct topo_network *net = topo_network_new("h", TOPO_BACKEND_USER, 1, err, sizeof err);
    int cloud = node(net, "cloud", TOPO_NODE_HOST);
    for (int e = 0; e < 2; e++) {
        char name[16];
        snprintf(name, sizeof name, "edge%d", e);
        int edge = node(net, name, TOPO_NODE_HOST);
        add_link(net, cloud, edge, 1000, 20);
        for (int t = 0; t < 4; t++) {
            snprintf(name, sizeof name, "t%d_%d", e, t);
            add_link(net, edge, node(net, name, TOPO_NODE_HOST), 100, 5);
        }
    }
    struct topo_machines m;
    machines(&m, 2, (int[]){1, 1});
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(p.n_cut == 1, "%zu links cut", p.n_cut);
    for (size_t c = 0; c < p.n_cut; c++)
        CHECK(net->links[p.cut[c]].params.delay_ns == 20000000);
    topo_placement_free(&p);
    topo_network_free(net);
    /* Where the weight's square decides: a cloud, two edges (1 Gbit/s,
     * 20 ms), a terminal of 20 threads under one and of 19 under the other
     * (100 Mbit/s, 5 ms). Cutting an edge-cloud link (22 : 20) and cutting
     * a terminal link (20 : 22) are both balanced; bandwidth / (1 + delay)
     * would cut the terminal's (16.7 against 47.6), the square cuts the
     * edge-cloud one (2.3 against 2.8). */
    net = topo_network_new("heavy", TOPO_BACKEND_USER, 1, err, sizeof err);
    cloud = node(net, "cloud", TOPO_NODE_HOST);
    for (int e = 0; e < 2; e++) {
        char name[16];
        snprintf(name, sizeof name, "edge%d", e);
        int edge = node(net, name, TOPO_NODE_HOST);
        add_link(net, cloud, edge, 1000, 20);
        snprintf(name, sizeof name, "big%d", e);
        int t = node(net, name, TOPO_NODE_HOST);
        net->nodes[t].threads = 20 - e;
        add_link(net, edge, t, 100, 5);
    }
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(p.n_cut == 1, "%zu links cut", p.n_cut);
    for (size_t c = 0; c < p.n_cut; c++)
        CHECK_MSG(net->links[p.cut[c]].params.delay_ns == 20000000, "cut a %s link",
                  net->nodes[net->links[p.cut[c]].b].name);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

/* n hosts in a ring of equal links. */
static struct topo_network *ring(int n)
{
    struct topo_network *net = topo_network_new("ring", TOPO_BACKEND_USER, 1, err, sizeof err);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "h%d", i);
        node(net, name, TOPO_NODE_HOST);
        if (i) add_link(net, i - 1, i, 100, 2);
    }
    add_link(net, n - 1, 0, 100, 2);
    return net;
}

static void shares_follow_cores(void)
{
    struct topo_network *net = ring(40);
    struct topo_machines m;
    machines(&m, 2, (int[]){3, 1});
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(p.count[0] >= 27 && p.count[0] <= 33, "%zu : %zu", p.count[0], p.count[1]);
    CHECK(p.count[0] + p.count[1] == 40);
    CHECK(p.n_cut == 2); /* a ring cut into two arcs */
    CHECK_NEAR(p.load[0] + p.load[1], 40, 1e-9);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

static void pins_hold(void)
{
    struct topo_network *net = two_clusters();
    struct topo_machines m;
    machines(&m, 2, (int[]){4, 4});
    /* the a cluster's switch on m2: the rest of its cluster follows it */
    snprintf(net->nodes[topo_node_find(net, "sa")].host, 64, "m2");
    /* a pin across the natural cut holds too */
    snprintf(net->nodes[topo_node_find(net, "b5")].host, 64, "m2");
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_STREQ(machine_of(&p, net, &m, "sa"), "m2");
    CHECK_STREQ(machine_of(&p, net, &m, "b5"), "m2");
    CHECK_STREQ(machine_of(&p, net, &m, "a3"), "m2");
    CHECK_STREQ(machine_of(&p, net, &m, "sb"), "m1");
    topo_placement_free(&p);
    /* every node pinned to m1: all there, nothing cut */
    for (size_t i = 0; i < net->n_nodes; i++)
        snprintf(net->nodes[i].host, 64, "m1");
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.count[0] == 12 && p.count[1] == 0 && p.n_cut == 0);
    topo_placement_free(&p);
    snprintf(net->nodes[3].host, 64, "m9");
    CHECK(topo_placement_compute(net, &m, &p, err, sizeof err) < 0);
    CHECK_STREQ(err, "node 'a3': host 'm9' is not a machine of hosts.txt");
    CHECK(p.machine == NULL);
    topo_machines_free(&m);
    topo_network_free(net);
}

/* A tree of 1 + 8 + 64 + 512 nodes with delays by level, on 5 machines. */
static struct topo_network *tree(void)
{
    struct topo_network *net = topo_network_new("tree", TOPO_BACKEND_USER, 1, err, sizeof err);
    node(net, "n0", TOPO_NODE_SWITCH);
    int first = 0, count = 1;
    for (int level = 1; level <= 3; level++) {
        int next = (int)net->n_nodes;
        for (int parent = first; parent < first + count; parent++)
            for (int c = 0; c < 8; c++) {
                char name[16];
                snprintf(name, sizeof name, "n%zu", net->n_nodes);
                add_link(net, parent, node(net, name, TOPO_NODE_HOST), 100.0 * level, 40.0 / level);
            }
        first = next;
        count *= 8;
    }
    return net;
}

static void deterministic(void)
{
    struct topo_network *net = tree();
    struct topo_machines m;
    machines(&m, 5, (int[]){8, 8, 4, 4, 2});
    struct topo_placement p, q;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(topo_placement_compute(net, &m, &q, err, sizeof err) == 0, "%s", err);
    CHECK(p.n_nodes == 585 && q.n_nodes == 585);
    CHECK(memcmp(p.machine, q.machine, p.n_nodes * sizeof *p.machine) == 0);
    CHECK(p.n_cut == q.n_cut);
    for (size_t k = 0; k < m.n; k++)
        CHECK_MSG(p.count[k] > 0, "machine %zu got no node", k);
    topo_placement_free(&p);
    topo_placement_free(&q);
    topo_machines_free(&m);
    /* twelve machines: METIS's k-way (recursive bisection up to eight) */
    machines(&m, 12, (int[]){2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2});
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    size_t total = 0;
    for (size_t k = 0; k < m.n; k++) {
        CHECK_MSG(p.count[k] >= 585 / 12 * 8 / 10 && p.count[k] <= 585 / 12 * 12 / 10,
                  "machine %zu got %zu nodes", k, p.count[k]);
        total += p.count[k];
    }
    CHECK(total == 585);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

/* Fewer nodes than machines, and one machine. */
static void small(void)
{
    struct topo_network *net = topo_network_new("s", TOPO_BACKEND_USER, 1, err, sizeof err);
    add_link(net, node(net, "x", TOPO_NODE_HOST), node(net, "y", TOPO_NODE_HOST), 10, 1);
    struct topo_machines m;
    machines(&m, 3, (int[]){1, 1, 1});
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.count[0] + p.count[1] + p.count[2] == 2 && p.n_cut == 1);
    topo_placement_free(&p);
    m.n = 1;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.count[0] == 2 && p.n_cut == 0);
    m.v[0].local = true;
    CHECK(topo_placement_remote_nodes(&p, &m) == 0);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

static void weights(void)
{
    struct topo_node n = {.kind = TOPO_NODE_HOST, .speed = 0.5, .threads = 4};
    CHECK_NEAR(topo_placement_node_weight(&n), 2, 1e-12);
    n.cpu = 1.5;
    CHECK_NEAR(topo_placement_node_weight(&n), 1.5, 1e-12);
    snprintf(n.profile, sizeof n.profile, "a100");
    CHECK_NEAR(topo_placement_node_weight(&n), 0.375, 1e-12);
    n.kind = TOPO_NODE_SWITCH;
    CHECK_NEAR(topo_placement_node_weight(&n), 0.1, 1e-12);
    struct topo_link_params lp = {.rate_bps = 1000000000, .delay_ns = 49000000};
    CHECK_NEAR(topo_placement_link_weight(&lp), 1000.0 / 2500, 1e-12);
    lp.rate_bps = 0;
    lp.delay_ns = 0;
    CHECK_NEAR(topo_placement_link_weight(&lp), 10000, 1e-12);
}

static void written(void)
{
    struct topo_network *net = two_clusters();
    struct topo_machines m;
    machines(&m, 2, (int[]){4, 4});
    m.v[0].local = true;
    snprintf(net->nodes[topo_node_find(net, "sa")].host, 64, "m1");
    struct topo_placement p;
    CHECK_MSG(topo_placement_compute(net, &m, &p, err, sizeof err) == 0, "%s", err);
    CHECK(topo_placement_remote_nodes(&p, &m) == 6);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    topo_placement_write_json(&p, net, &m, f);
    fputc('\n', f);
    topo_placement_write_text(&p, net, &m, f);
    fclose(f);
    CHECK_CONTAINS(buf,
                   "{\"network\": \"two\", \"hosts\": \"hosts.txt\", \"machines\": [{\"name\": "
                   "\"m1\", \"address\": \"10.0.0.1\", \"cores\": 4, \"local\": true, "
                   "\"nodes\": 6, \"load\": 5.10}");
    CHECK_CONTAINS(buf, "\"sa\": \"m1\", \"a1\": \"m1\"");
    CHECK_CONTAINS(buf, "\"pinned\": [\"sa\"]");
    CHECK_CONTAINS(buf, "\"cut_links\": [{\"a\": \"sa\", \"b\": \"sb\", \"parallel\": 0, "
                        "\"machine_a\": \"m1\", \"machine_b\": \"m2\", \"delay_us\": 50000.000, "
                        "\"bw_bps\": 1000000000}]}");
    CHECK_CONTAINS(buf, "network 'two': 12 nodes on 2 machines of hosts.txt\n");
    CHECK_CONTAINS(buf, "sa                   m1 (pinned)\n");
    CHECK_CONTAINS(buf, "cut links: 1\n  sa-sb");
    CHECK_CONTAINS(buf, "delay 50ms");
    free(buf);
    topo_placement_free(&p);
    topo_machines_free(&m);
    topo_network_free(net);
}

int main(void)
{
    cut_at_long_delay();
    cut_edge_cloud();
    shares_follow_cores();
    pins_hold();
    deterministic();
    small();
    weights();
    written();
    return check_report();
}
