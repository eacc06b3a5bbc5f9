/* placement.c — bench_placement, driven by tools/bench/placement: how long
 * topo/placement.c takes to place a 1000-node hierarchy (a cloud, 27 edges
 * at 1 Gbit/s 20 ms, 36 terminals each at 100 Mbit/s 5 ms) over 2, 4, 8
 * and 16 machines of 8 cores, against the anchor of building that topology
 * model in the same run (topo_node_add / topo_link_add), both best of
 * ROUNDS; and what it cut: links, terminal-edge links among them, and the
 * largest machine's load over its share. Last line: one JSON object. */
#include "topo/placement.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ROUNDS 20
#define EDGES 27
#define TERMINALS 36
#define TERMINAL_DELAY_NS 5000000

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int add(struct topo_network *net, const char *name, int parent, double mbit, double ms)
{
    char err[256];
    int i = topo_node_add(net, name, TOPO_NODE_HOST, err, sizeof err);
    struct topo_link_params p = {.rate_bps = (uint64_t)(mbit * 1e6),
                                 .delay_ns = (uint64_t)(ms * 1e6)};
    if (i >= 0 && parent >= 0 && topo_link_add(net, parent, i, &p, err, sizeof err) < 0) i = -1;
    if (i < 0) fprintf(stderr, "bench_placement: %s\n", err);
    return i;
}

static struct topo_network *hierarchy(void)
{
    char err[256], name[32];
    struct topo_network *net = topo_network_new("h", TOPO_BACKEND_USER, 1, err, sizeof err);
    int cloud = net ? add(net, "cloud", -1, 0, 0) : -1;
    for (int e = 0; cloud >= 0 && e < EDGES; e++) {
        snprintf(name, sizeof name, "edge%d", e);
        int edge = add(net, name, cloud, 1000, 20);
        for (int t = 0; edge >= 0 && t < TERMINALS; t++) {
            snprintf(name, sizeof name, "t%d_%d", e, t);
            if (add(net, name, edge, 100, 5) < 0) edge = -1;
        }
        if (edge < 0) cloud = -1;
    }
    if (cloud >= 0) return net;
    topo_network_free(net);
    return NULL;
}

struct result {
    double ms, imbalance;
    size_t cut, terminal_cut;
};

static int place(const struct topo_network *net, int n_machines, struct result *r)
{
    char err[512];
    struct topo_machines m = {.source = "bench"};
    for (int i = 0; i < n_machines; i++) {
        char name[16], addr[32];
        snprintf(name, sizeof name, "m%d", i);
        snprintf(addr, sizeof addr, "10.0.0.%d", i + 1);
        topo_machines_add(&m, name, addr, 8, err, sizeof err);
    }
    struct topo_placement p = {0};
    r->ms = 1e9;
    for (int k = 0; k < ROUNDS; k++) {
        topo_placement_free(&p);
        double t0 = now_ms();
        if (topo_placement_compute(net, &m, &p, err, sizeof err) < 0) {
            fprintf(stderr, "bench_placement: %s\n", err);
            topo_machines_free(&m);
            return -1;
        }
        double dt = now_ms() - t0;
        if (dt < r->ms) r->ms = dt;
    }
    double total = 0, most = 0;
    for (int k = 0; k < n_machines; k++) {
        total += p.load[k];
        if (p.load[k] > most) most = p.load[k];
    }
    r->imbalance = most / (total / n_machines);
    r->cut = p.n_cut;
    r->terminal_cut = 0;
    for (size_t c = 0; c < p.n_cut; c++)
        r->terminal_cut += net->links[p.cut[c]].params.delay_ns == TERMINAL_DELAY_NS;
    topo_placement_free(&p);
    topo_machines_free(&m);
    return 0;
}

static double build_ms(void)
{
    double best = 1e9;
    for (int k = 0; k < ROUNDS; k++) {
        double t0 = now_ms();
        struct topo_network *net = hierarchy();
        double dt = now_ms() - t0;
        topo_network_free(net);
        if (dt < best) best = dt;
    }
    return best;
}

int main(void)
{
    static const int machines[] = {2, 4, 8, 16};
    struct result r[4];
    struct topo_network *net = hierarchy();
    if (!net) return 1;
    double anchor = build_ms();
    printf("topology model of %zu nodes built in %.3f ms (best of %d): the anchor\n", net->n_nodes,
           anchor, ROUNDS);
    for (int i = 0; i < 4; i++) {
        if (place(net, machines[i], &r[i]) < 0) return 1;
        printf("%2d machines: placed in %.3f ms (%.2f x the anchor), %zu links cut (%zu "
               "terminal-edge), largest load %.3f x the mean\n",
               machines[i], r[i].ms, r[i].ms / anchor, r[i].cut, r[i].terminal_cut, r[i].imbalance);
    }
    size_t n = net->n_nodes;
    topo_network_free(net);
    printf("{\"bench\":\"placement\",\"nodes\":%zu,\"build_ms\":%.3f,\"place_ms\":[%.3f,%.3f,%.3f,"
           "%.3f],\"place_vs_build\":[%.3f,%.3f,%.3f,%.3f],\"machines\":[2,4,8,16],\"cut\":[%zu,"
           "%zu,%zu,%zu],\"terminal_edge_cut\":[%zu,%zu,%zu,%zu],\"imbalance\":[%.3f,%.3f,%.3f,"
           "%.3f]}\n",
           n, anchor, r[0].ms, r[1].ms, r[2].ms, r[3].ms, r[0].ms / anchor, r[1].ms / anchor,
           r[2].ms / anchor, r[3].ms / anchor, r[0].cut, r[1].cut, r[2].cut, r[3].cut,
           r[0].terminal_cut, r[1].terminal_cut, r[2].terminal_cut, r[3].terminal_cut,
           r[0].imbalance, r[1].imbalance, r[2].imbalance, r[3].imbalance);
    return 0;
}
