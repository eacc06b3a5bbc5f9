/* test_part.c — a network's parts, one per machine (topo/part.c), and their
 * wire form (topo/part_wire.c), on a tree cut across three machines:
 *   cloud (m1) -- e1 (m2) -- t11 t12 t13 (m2)
 *              -- e2 (m3) -- switch s2 (m3) -- t21 t22 t23 (m3)
 * Every node is in exactly one part; each cut link has exactly one end in
 * each of its two parts, with the same VNI (numbered from the run's base)
 * and the other machine's underlay address; a part's routes are the whole
 * network's for its nodes; decode(encode(part)) is the same part, and
 * broken wire forms are refused in one line naming what is wrong. */
#include "check.h"
#include "topo/address.h"
#include "topo/part.h"
#include "topo/part_wire.h"

#include <stdint.h>

static char err[512];

static int node(struct topo_network *net, const char *name, enum topo_node_kind kind,
                const char *host)
{
    int i = topo_node_add(net, name, kind, err, sizeof err);
    CHECK_MSG(i >= 0, "%s", err);
    snprintf(net->nodes[i].host, sizeof net->nodes[i].host, "%s", host);
    return i;
}

static void link_add(struct topo_network *net, int a, int b, double mbit, double delay_ms)
{
    struct topo_link_params p = {0};
    p.rate_bps = (uint64_t)(mbit * 1e6);
    p.delay_ns = (uint64_t)(delay_ms * 1e6);
    p.loss = 0.01;
    p.queue.packets = 50;
    CHECK_MSG(topo_link_add(net, a, b, &p, err, sizeof err) >= 0, "%s", err);
}

static struct topo_network *tree(void)
{
    struct topo_network *net = topo_network_new("tree", TOPO_BACKEND_KERNEL, 7, err, sizeof err);
    int cloud = node(net, "cloud", TOPO_NODE_HOST, "m1");
    int e1 = node(net, "e1", TOPO_NODE_HOST, "m2");
    int e2 = node(net, "e2", TOPO_NODE_HOST, "m3");
    int s2 = node(net, "s2", TOPO_NODE_SWITCH, "m3");
    link_add(net, cloud, e1, 1000, 20);
    link_add(net, cloud, e2, 1000, 20);
    link_add(net, e2, s2, 100, 1);
    for (int i = 1; i <= 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "t1%d", i);
        link_add(net, e1, node(net, name, TOPO_NODE_HOST, "m2"), 100, 2);
        snprintf(name, sizeof name, "t2%d", i);
        link_add(net, s2, node(net, name, TOPO_NODE_HOST, "m3"), 100, 1);
    }
    snprintf(net->nodes[e1].tcp.cc, sizeof net->nodes[e1].tcp.cc, "reno");
    net->nodes[e1].tcp.init_cwnd = 20;
    snprintf(net->nodes[cloud].tier, sizeof net->nodes[cloud].tier, "cloud");
    net->nodes[cloud].cpu = 0.5;
    net->dilation = 2;
    return net;
}

struct fixture {
    struct topo_network *net;
    struct topo_routing routing;
    struct topo_machines machines;
    struct topo_placement placement;
    uint32_t underlay[3];
    uint8_t secret[TOPO_PART_SECRET_SIZE];
    struct topo_part_plan plan;
    struct topo_part parts[3];
};

static void fixture_up(struct fixture *f, uint32_t vni_base)
{
    memset(f, 0, sizeof *f);
    f->net = tree();
    CHECK_MSG(topo_assign_addresses(f->net, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(topo_routing_compute(f->net, &f->routing, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < 3; i++) {
        char name[8], addr[16];
        snprintf(name, sizeof name, "m%d", i + 1);
        snprintf(addr, sizeof addr, "10.250.0.%d", i + 1);
        CHECK(topo_machines_add(&f->machines, name, addr, 1, err, sizeof err) == 0);
        f->underlay[i] = 0x0afa0001u + (uint32_t)i;
    }
    CHECK_MSG(topo_placement_compute(f->net, &f->machines, &f->placement, err, sizeof err) == 0,
              "%s", err);
    for (size_t i = 0; i < sizeof f->secret; i++)
        f->secret[i] = (uint8_t)(i * 7 + 1);
    f->plan = (struct topo_part_plan){"run1",   &f->placement, &f->machines, f->underlay,
                                      vni_base, f->secret,     NULL};
    for (size_t m = 0; m < 3; m++)
        CHECK_MSG(topo_part_make(f->net, &f->routing, &f->plan, m, &f->parts[m], err, sizeof err) ==
                      0,
                  "%s", err);
}

static void fixture_down(struct fixture *f)
{
    for (int m = 0; m < 3; m++)
        topo_part_free(&f->parts[m]);
    topo_placement_free(&f->placement);
    topo_machines_free(&f->machines);
    topo_routing_free(&f->routing);
    topo_network_free(f->net);
}

/* The part's local node of whole node w, or -1. */
static int local_index(const struct topo_part *p, int w)
{
    for (size_t i = 0; i < p->net->n_nodes; i++)
        if (p->whole_node[i] == w && !p->net->nodes[i].remote) return (int)i;
    return -1;
}

static int link_index(const struct topo_part *p, int w)
{
    for (size_t i = 0; i < p->net->n_links; i++)
        if (p->whole_link[i] == w) return (int)i;
    return -1;
}

static void test_every_node_once(const struct fixture *f)
{
    /* cloud e1 e2 s2 t11 t21 t12 t22 t13 t23 */
    static const char *const machine[] = {"m1", "m2", "m3", "m3", "m2",
                                          "m3", "m2", "m3", "m2", "m3"};
    CHECK(f->net->n_nodes == 10);
    for (size_t w = 0; w < f->net->n_nodes; w++) {
        int in = 0;
        for (int m = 0; m < 3; m++)
            in += local_index(&f->parts[m], (int)w) >= 0;
        CHECK_MSG(in == 1, "node %s is local in %d parts", f->net->nodes[w].name, in);
        CHECK_STREQ(f->machines.v[f->placement.machine[w]].name, machine[w]);
    }
    /* m1: cloud and the far ends e1, e2; m2: e1, t11-t13 and cloud; m3:
     * e2, s2, t21-t23 and cloud. */
    static const size_t nodes[] = {3, 5, 6}, locals[] = {1, 4, 5}, links[] = {2, 4, 5};
    for (int m = 0; m < 3; m++) {
        CHECK(f->parts[m].net->n_nodes == nodes[m]);
        CHECK(topo_part_local_nodes(&f->parts[m]) == locals[m]);
        CHECK(f->parts[m].net->n_links == links[m]);
        CHECK_STREQ(f->parts[m].machine, f->machines.v[m].name);
        CHECK(f->parts[m].net->underlay_local == f->underlay[m]);
        CHECK(f->parts[m].net->planned);
    }
}

/* Each cut link: in the parts of its two machines, once each, its end at
 * the other machine remote, the same VNI, each the other's underlay. */
static void test_cut_links(const struct fixture *f, uint32_t base)
{
    CHECK(f->placement.n_cut == 2);
    for (size_t c = 0; c < f->placement.n_cut; c++) {
        int w = (int)f->placement.cut[c];
        const struct topo_link *wl = &f->net->links[w];
        int ma = f->placement.machine[wl->a], mb = f->placement.machine[wl->b];
        for (int m = 0; m < 3; m++) {
            int l = link_index(&f->parts[m], w);
            CHECK((l >= 0) == (m == ma || m == mb));
            if (l < 0) continue;
            const struct topo_network *pn = f->parts[m].net;
            const struct topo_link *pl = &pn->links[l];
            CHECK(pn->nodes[pl->a].remote != pn->nodes[pl->b].remote);
            CHECK(local_index(&f->parts[m], m == ma ? wl->a : wl->b) == (m == ma ? pl->a : pl->b));
            CHECK(pl->vni == topo_part_vni(base, c));
            CHECK(pl->underlay_remote == f->underlay[m == ma ? mb : ma]);
            CHECK(pl->addr_a == wl->addr_a && pl->addr_b == wl->addr_b);
            CHECK_STREQ(pl->ifname_a, wl->ifname_a);
        }
    }
    for (int m = 0; m < 3; m++)
        for (size_t l = 0; l < f->parts[m].net->n_links; l++) {
            const struct topo_link *pl = &f->parts[m].net->links[l];
            bool cut = f->parts[m].net->nodes[pl->a].remote || f->parts[m].net->nodes[pl->b].remote;
            CHECK((pl->vni != 0) == cut);
        }
}

static bool route_same(const struct topo_part *p, const struct topo_route *pr,
                       const struct topo_route *wr)
{
    int dst = pr->dst_node >= 0 ? p->whole_node[pr->dst_node] : -1;
    int via = pr->via >= 0 ? p->whole_node[pr->via] : pr->via;
    bool dst_ok = dst == wr->dst_node || (dst < 0 && wr->dst_node >= 0);
    bool via_ok = via == wr->via || (pr->via == -1 && wr->via >= 0);
    return pr->dst == wr->dst && pr->dst_len == wr->dst_len && pr->gateway == wr->gateway &&
           p->whole_link[pr->link] == wr->link && dst_ok && via_ok;
}

static void test_routes(const struct fixture *f)
{
    size_t checked = 0;
    for (int m = 0; m < 3; m++) {
        const struct topo_part *p = &f->parts[m];
        for (size_t i = 0; i < p->net->n_nodes; i++) {
            const struct topo_node_routes *pr = &p->routing.nodes[i];
            const struct topo_node_routes *wr = &f->routing.nodes[p->whole_node[i]];
            if (p->net->nodes[i].remote) {
                CHECK(pr->n_routes == 0);
                continue;
            }
            CHECK(pr->n_routes == wr->n_routes);
            for (size_t r = 0; r < pr->n_routes && r < wr->n_routes; r++, checked++)
                CHECK(route_same(p, &pr->routes[r], &wr->routes[r]));
        }
    }
    CHECK(checked > 12);
    /* e1 reaches the t2x hosts through the cut link to cloud. */
    const struct topo_part *m2 = &f->parts[1];
    int e1 = local_index(m2, topo_node_find(f->net, "e1"));
    const struct topo_route *def = &m2->routing.nodes[e1].routes[0];
    CHECK(def->dst_len == 0 && m2->net->links[def->link].vni != 0);
}

/* The lookups by whole-network index agree with a scan of the part: its own
 * nodes (binary search), every node (remote ones too), links; a node the
 * part lacks, or one past the network, is -1 for both. */
static void test_lookups(const struct fixture *f)
{
    size_t absent = 0, remote = 0;
    for (int m = 0; m < 3; m++) {
        const struct topo_part *p = &f->parts[m];
        for (size_t w = 0; w < f->net->n_nodes; w++) {
            long own = topo_part_own_node(p, w), any = topo_part_node(p, w);
            CHECK(own == local_index(p, (int)w));
            CHECK(own < 0 || any == own);
            CHECK(any < 0 || p->whole_node[any] == (int)w);
            bool in = false;
            for (size_t i = 0; i < p->net->n_nodes; i++)
                in |= p->whole_node[i] == (int)w;
            CHECK(in == (any >= 0));
            absent += !in;
            remote += in && own < 0;
        }
        for (size_t w = 0; w < f->net->n_links; w++)
            CHECK(topo_part_link(p, w) == link_index(p, (int)w));
        CHECK(topo_part_own_node(p, f->net->n_nodes) == -1);
        CHECK(topo_part_node(p, UINT64_MAX) == -1);
        CHECK(topo_part_link(p, f->net->n_links) == -1);
    }
    CHECK(absent > 0 && remote > 0); /* the fixture has both kinds */
}

/* A whole route of a node converts only in the part that owns the node:
 * another machine's node, remote here or not here at all, is -1. */
static void test_route_from_whole(const struct fixture *f)
{
    for (int m = 0; m < 3; m++) {
        const struct topo_part *p = &f->parts[m];
        for (size_t w = 0; w < f->routing.n_nodes; w++) {
            if (!f->routing.nodes[w].n_routes) continue;
            const struct topo_route *whole = &f->routing.nodes[w].routes[0];
            struct topo_route mine;
            int node = -2;
            int rc = topo_part_route_from_whole(p, (int)w, whole, &node, &mine);
            int own = local_index(p, (int)w);
            CHECK(own < 0 ? rc == -1 && node == -2 : rc == 0 && node == own);
            if (rc == 0) CHECK(route_same(p, &mine, whole));
        }
    }
    /* m1 holds cloud, e1 and e2: t11 is not in its part at all. */
    int t11 = topo_node_find(f->net, "t11");
    struct topo_route mine;
    int node = -2;
    CHECK(topo_part_node(&f->parts[0], (uint64_t)t11) == -1);
    CHECK(topo_part_route_from_whole(&f->parts[0], t11, &f->routing.nodes[t11].routes[0], &node,
                                     &mine) == -1);
}

/* A copy of a part's routes (what netrun takes, netrun_config.routing). */
static void test_routing_copy(const struct fixture *f)
{
    struct topo_routing copy;
    const struct topo_routing *r = &f->parts[2].routing;
    CHECK(topo_routing_copy(r, &copy) == 0);
    CHECK(copy.n_nodes == r->n_nodes && copy.total_routes == r->total_routes);
    for (size_t i = 0; i < r->n_nodes && i < copy.n_nodes; i++) {
        CHECK(copy.nodes[i].n_routes == r->nodes[i].n_routes);
        CHECK(!r->nodes[i].n_routes || copy.nodes[i].routes != r->nodes[i].routes);
        for (size_t j = 0; j < r->nodes[i].n_routes && j < copy.nodes[i].n_routes; j++)
            CHECK(copy.nodes[i].routes[j].dst == r->nodes[i].routes[j].dst &&
                  copy.nodes[i].routes[j].link == r->nodes[i].routes[j].link);
    }
    topo_routing_free(&copy);
}

static void test_vni_numbers(void)
{
    CHECK(topo_part_vni_base(0) == 1);
    CHECK(topo_part_vni_base(TOPO_PART_VNI_MAX - 1) == TOPO_PART_VNI_MAX);
    CHECK(topo_part_vni(TOPO_PART_VNI_MAX, 0) == TOPO_PART_VNI_MAX);
    CHECK(topo_part_vni(TOPO_PART_VNI_MAX, 1) == 1);
    CHECK(topo_part_vni(100, 5) == 105);
}

/* ---- the wire form ---- */

static bool params_same(const struct topo_link_params *a, const struct topo_link_params *b)
{
    return a->rate_bps == b->rate_bps && a->delay_ns == b->delay_ns &&
           a->jitter_ns == b->jitter_ns && a->loss == b->loss &&
           a->queue.packets == b->queue.packets && a->queue.bytes == b->queue.bytes &&
           a->queue.bdp == b->queue.bdp && a->ecn_threshold.packets == b->ecn_threshold.packets &&
           a->ecn_threshold.bytes == b->ecn_threshold.bytes && a->reorder == b->reorder &&
           a->gilbert == b->gilbert && a->ge_p == b->ge_p && a->ge_r == b->ge_r &&
           a->ge_h == b->ge_h && a->ge_k == b->ge_k;
}

static bool node_same(const struct topo_node *a, const struct topo_node *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->tier, b->tier) && a->kind == b->kind &&
           a->cpu == b->cpu && a->speed == b->speed && a->threads == b->threads &&
           !strcmp(a->device, b->device) && !strcmp(a->profile, b->profile) &&
           !strcmp(a->addr, b->addr) && a->node_addr == b->node_addr && a->segment == b->segment &&
           !strcmp(a->host, b->host) && a->remote == b->remote && !strcmp(a->tcp.cc, b->tcp.cc) &&
           a->tcp.rto_min_ns == b->tcp.rto_min_ns && a->tcp.ecn == b->tcp.ecn &&
           a->tcp.init_cwnd == b->tcp.init_cwnd;
}

static bool link_same(const struct topo_link *a, const struct topo_link *b)
{
    return a->a == b->a && a->b == b->b && a->parallel == b->parallel && a->up == b->up &&
           !strcmp(a->ifname_a, b->ifname_a) && !strcmp(a->ifname_b, b->ifname_b) &&
           a->addr_a == b->addr_a && a->addr_b == b->addr_b && a->prefix_len == b->prefix_len &&
           a->vni == b->vni && a->underlay_remote == b->underlay_remote &&
           a->underlay_delay_us == b->underlay_delay_us && params_same(&a->params, &b->params);
}

static bool settings_same(const struct topo_network *a, const struct topo_network *b)
{
    return !strcmp(a->name, b->name) && a->backend == b->backend && a->seed == b->seed &&
           a->dilation == b->dilation && a->addr_base == b->addr_base &&
           a->addr_prefix_len == b->addr_prefix_len && a->node_block == b->node_block &&
           a->node_block_len == b->node_block_len && a->n_segments == b->n_segments &&
           a->planned == b->planned && a->underlay_local == b->underlay_local;
}

static bool route_fields_same(const struct topo_route *a, const struct topo_route *b)
{
    return a->dst == b->dst && a->dst_len == b->dst_len && a->dst_node == b->dst_node &&
           a->link == b->link && a->gateway == b->gateway && a->via == b->via;
}

static void check_same_part(const struct topo_part *a, const struct topo_part *b)
{
    CHECK_STREQ(a->run_id, b->run_id);
    CHECK_STREQ(a->machine, b->machine);
    CHECK(!memcmp(a->secret, b->secret, sizeof a->secret));
    CHECK(settings_same(a->net, b->net));
    CHECK(a->net->n_nodes == b->net->n_nodes && a->net->n_links == b->net->n_links);
    for (size_t i = 0; i < a->net->n_nodes && i < b->net->n_nodes; i++) {
        CHECK_MSG(node_same(&a->net->nodes[i], &b->net->nodes[i]), "node %zu", i);
        CHECK(a->whole_node[i] == b->whole_node[i]);
        const struct topo_node_routes *ra = &a->routing.nodes[i], *rb = &b->routing.nodes[i];
        CHECK(ra->n_routes == rb->n_routes);
        for (size_t r = 0; r < ra->n_routes && r < rb->n_routes; r++)
            CHECK(route_fields_same(&ra->routes[r], &rb->routes[r]));
    }
    for (size_t i = 0; i < a->net->n_links && i < b->net->n_links; i++) {
        CHECK_MSG(link_same(&a->net->links[i], &b->net->links[i]), "link %zu", i);
        CHECK(a->whole_link[i] == b->whole_link[i]);
    }
    CHECK(a->routing.total_routes == b->routing.total_routes);
}

static void encode(const struct topo_part *p, msgpack_sbuffer *buf)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(buf);
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    CHECK(topo_part_encode(p, &pk));
}

static void test_round_trip(const struct fixture *f)
{
    for (int m = 0; m < 3; m++) {
        msgpack_sbuffer buf, again;
        struct topo_part back;
        encode(&f->parts[m], &buf);
        int rc = topo_part_decode(buf.data, buf.size, &back, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
        if (rc == 0) {
            check_same_part(&f->parts[m], &back);
            encode(&back, &again);
            CHECK(again.size == buf.size && !memcmp(again.data, buf.data, buf.size));
            msgpack_sbuffer_destroy(&again);
        }
        topo_part_free(&back);
        msgpack_sbuffer_destroy(&buf);
    }
}

/* part's wire form, after `spoil` changed a copy of it, is refused with a
 * one-line message containing want. */
static void expect_refused(struct topo_part *p, void (*spoil)(struct topo_part *), const char *want)
{
    msgpack_sbuffer buf;
    struct topo_part copy = *p, back;
    struct topo_network net = *p->net;
    struct topo_link links[16];
    struct topo_route routes[16];
    memcpy(links, p->net->links, p->net->n_links * sizeof *links);
    net.links = links;
    copy.net = &net;
    struct topo_node_routes saved = p->routing.nodes[0];
    memcpy(routes, saved.routes, saved.n_routes * sizeof *routes);
    p->routing.nodes[0].routes = routes;
    spoil(&copy);
    encode(&copy, &buf);
    p->routing.nodes[0] = saved;
    CHECK(topo_part_decode(buf.data, buf.size, &back, err, sizeof err) < 0);
    CHECK_CONTAINS(err, want);
    CHECK(!strchr(err, '\n'));
    topo_part_free(&back);
    msgpack_sbuffer_destroy(&buf);
}

static void drop_vni(struct topo_part *p)
{
    p->net->links[0].vni = 0;
}

static void route_elsewhere(struct topo_part *p)
{
    p->routing.nodes[0].routes[0].link = (int)p->net->n_links; /* past the end */
}

static void prefix_too_long(struct topo_part *p)
{
    p->routing.nodes[0].routes[0].dst_len = 33;
}

static void end_past_nodes(struct topo_part *p)
{
    p->net->links[1].a = 7;
}

static void vni_twice(struct topo_part *p)
{
    p->net->links[1].vni = p->net->links[0].vni;
}

static void bad_interface(struct topo_part *p)
{
    snprintf(p->net->links[1].ifname_b, TOPO_IFNAME_MAX, "a/b");
}

static void underlay_on_local(struct topo_part *p)
{
    for (size_t l = 0; l < p->net->n_links; l++)
        if (!p->net->links[l].vni) {
            p->net->links[l].underlay_delay_us = 5;
            return;
        }
}

/* A cut link's underlay delay: carried by the wire, subtracted from what
 * the backends install, refused when above the link's (real) delay, and
 * refused on a link of one machine. */
static void test_underlay_delay(struct fixture *f)
{
    struct topo_part *m1 = &f->parts[0];
    struct topo_link *cut = &m1->net->links[0]; /* cloud-e1: 20 ms at dilation 2 */
    cut->underlay_delay_us = 300;
    msgpack_sbuffer buf;
    struct topo_part back;
    encode(m1, &buf);
    CHECK(topo_part_decode(buf.data, buf.size, &back, err, sizeof err) == 0);
    CHECK(back.net && back.net->links[0].underlay_delay_us == 300);
    topo_part_free(&back);
    msgpack_sbuffer_destroy(&buf);
    struct topo_link_params installed;
    topo_link_params_install(m1->net, cut, &cut->params, &installed);
    CHECK(installed.delay_ns == 40000000 - 300000);
    CHECK(topo_part_check_underlay(m1, err, sizeof err) == 0);
    cut->underlay_delay_us = 50000;
    topo_link_params_install(m1->net, cut, &cut->params, &installed);
    CHECK(installed.delay_ns == 0);
    CHECK(topo_part_check_underlay(m1, err, sizeof err) == -1);
    CHECK_STREQ(err, "network 'tree': link cloud-e1: delay 20 ms (40 ms real at dilation 2) is "
                     "below the underlay's one-way delay of 50 ms between its machines, which "
                     "every packet already takes");
    cut->underlay_delay_us = 0;
    expect_refused(&f->parts[2], underlay_on_local,
                   "field 'underlay_delay_us': 5 on a link of one machine");
}

/* The one-way delay from a round trip: half, in µs rounded down, capped. */
static void test_underlay_arithmetic(void)
{
    CHECK(topo_part_underlay_delay_us(2000000) == 1000); /* 2 ms RTT: 1 ms each way */
    CHECK(topo_part_underlay_delay_us(2003999) == 1001); /* rounded down: never over-subtracted */
    CHECK(topo_part_underlay_delay_us(1999) == 0);
    CHECK(topo_part_underlay_delay_us(0) == 0);
    CHECK(topo_part_underlay_delay_us(-5) == 0);
    CHECK(topo_part_underlay_delay_us(INT64_MAX) == TOPO_PART_UNDERLAY_DELAY_MAX_US);
}

/* The plan's per-pair delays reach each cut link of both ends' parts, and
 * a pair slower than a link's delay is refused naming it and both figures. */
static void test_underlay_plan(struct fixture *f)
{
    uint32_t delay[9] = {0};
    delay[0 * 3 + 1] = delay[1 * 3 + 0] = 1500;  /* m1-m2 */
    delay[0 * 3 + 2] = delay[2 * 3 + 0] = 45000; /* m1-m3: above cloud-e2's 40 ms real */
    struct topo_part_plan plan = f->plan;
    plan.underlay_delay_us = delay;
    struct topo_part parts[3];
    memset(parts, 0, sizeof parts);
    for (size_t m = 0; m < 3; m++)
        CHECK_MSG(topo_part_make(f->net, &f->routing, &plan, m, &parts[m], err, sizeof err) == 0,
                  "%s", err);
    CHECK(parts[0].net->links[0].underlay_delay_us == 1500);  /* cloud-e1 */
    CHECK(parts[0].net->links[1].underlay_delay_us == 45000); /* cloud-e2 */
    int e1_cut = link_index(&parts[1], 0);
    CHECK(e1_cut >= 0 && parts[1].net->links[e1_cut].underlay_delay_us == 1500);
    for (size_t l = 0; l < parts[1].net->n_links; l++)
        if (!parts[1].net->links[l].vni) CHECK(parts[1].net->links[l].underlay_delay_us == 0);
    CHECK(topo_part_check_underlay(&parts[1], err, sizeof err) == 0);
    /* a link of no delay asked is not refused: it gets the underlay's */
    uint64_t asked = parts[0].net->links[1].params.delay_ns;
    parts[0].net->links[1].params.delay_ns = 0;
    CHECK(topo_part_check_underlay(&parts[0], err, sizeof err) == 0);
    parts[0].net->links[1].params.delay_ns = asked;
    CHECK(topo_part_check_underlay(&parts[0], err, sizeof err) == -1);
    CHECK_STREQ(err, "network 'tree': link cloud-e2: delay 20 ms (40 ms real at dilation 2) is "
                     "below the underlay's one-way delay of 45 ms between its machines, which "
                     "every packet already takes");
    for (size_t m = 0; m < 3; m++)
        topo_part_free(&parts[m]);
}

/* linkd's port of a cut link is 16384 + VNI mod 8192: two cut links of
 * one machine 8,192 VNIs apart share it (past 8,192 cut links), which the
 * user backend refuses naming both; the kernel backend's VXLAN does not. */
static void test_port_collision(struct fixture *f)
{
    struct topo_part *m1 = &f->parts[0]; /* cloud-e1 and cloud-e2: VNIs 4242, 4243 */
    CHECK(m1->net->links[0].vni == 4242 && m1->net->links[1].vni == 4243);
    CHECK(topo_part_check_ports(m1, err, sizeof err) == 0);
    m1->net->backend = TOPO_BACKEND_USER;
    CHECK(topo_part_check_ports(m1, err, sizeof err) == 0);
    m1->net->links[1].vni = 4242 + 8192;
    CHECK(topo_part_check_ports(m1, err, sizeof err) == -1);
    CHECK_STREQ(err, "network 'tree': cut links cloud-e1 and cloud-e2 would both use UDP port "
                     "20626 on machine m1 (the user backend carries a cut link on port 16384 + "
                     "VNI mod 8192: at most 8192 cut links per machine; use backend 'kernel' or "
                     "fewer cut links)");
    m1->net->backend = TOPO_BACKEND_AUTO; /* auto may choose user on that machine */
    CHECK(topo_part_check_ports(m1, err, sizeof err) == -1);
    m1->net->backend = TOPO_BACKEND_KERNEL;
    CHECK(topo_part_check_ports(m1, err, sizeof err) == 0);
    m1->net->links[1].vni = 4243;
}

/* The first two local nodes given the same whole node (into the copy's
 * own array: the fixture's stays). */
static void locals_not_ascending(struct topo_part *p)
{
    static int whole[16];
    memcpy(whole, p->whole_node, p->net->n_nodes * sizeof *whole);
    whole[1] = whole[0];
    p->whole_node = whole;
}

static void test_refused(struct fixture *f)
{
    struct topo_part *m1 = &f->parts[0];
    expect_refused(m1, drop_vni, "part wire: link cloud-e1: a link to a remote node needs a VNI");
    /* m1's part: cloud, e1 and e2 (remote); links cloud-e1 and cloud-e2. */
    expect_refused(
        m1, route_elsewhere,
        "part wire: route 0 of node 'cloud': field 'link': 2 is not an index from 0 to 1");
    expect_refused(m1, prefix_too_long,
                   "part wire: route 0 of node 'cloud': field 'dst_len': 33 is above 32");
    expect_refused(m1, end_past_nodes,
                   "part wire: link 1: field 'a': 7 is not an index from 0 to 2");
    expect_refused(m1, bad_interface, "link cloud-e2: field 'ifname_b': bad name");
    char want[128];
    snprintf(want, sizeof want, "part wire: link cloud-e2: VNI %u is link cloud-e1's too",
             m1->net->links[0].vni);
    expect_refused(m1, vni_twice, want);
    struct topo_part *m2 = &f->parts[1]; /* e1, t11, t12, t13; cloud remote */
    CHECK(topo_part_local_nodes(m2) == 4);
    snprintf(want, sizeof want,
             "part wire: node '%s': field 'whole_node': %d after %d (this machine's nodes ascend)",
             m2->net->nodes[1].name, m2->whole_node[0], m2->whole_node[0]);
    expect_refused(m2, locals_not_ascending, want);

    msgpack_sbuffer buf;
    struct topo_part back;
    encode(m1, &buf);
    CHECK(topo_part_decode(buf.data, buf.size - 1, &back, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "not one MessagePack object");
    topo_part_free(&back);
    char *longer = malloc(buf.size + 1);
    memcpy(longer, buf.data, buf.size);
    longer[buf.size] = '\xc0';
    CHECK(topo_part_decode(longer, buf.size + 1, &back, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "1 bytes after the part");
    topo_part_free(&back);
    free(longer);
    /* A header claiming 4 billion entries is refused before anything is
     * allocated for them. */
    static const unsigned char huge[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01};
    CHECK(topo_part_decode(huge, sizeof huge, &back, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "not one MessagePack object");
    topo_part_free(&back);
    msgpack_sbuffer_destroy(&buf);
}

static void test_bad_plan(struct fixture *f)
{
    struct topo_part p = {0};
    struct topo_part_plan plan = f->plan;
    plan.vni_base = 0;
    CHECK(topo_part_make(f->net, &f->routing, &plan, 0, &p, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "VNI base 0 is not in 1..16777215");
    topo_part_free(&p);
    CHECK(topo_part_make(f->net, &f->routing, &f->plan, 3, &p, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "no machine 3");
    topo_part_free(&p);
}

/* test_part FILE: also writes m3's wire form to FILE (the fuzz seed,
 * tests/fuzz/corpus/fuzz_part_wire/m3). */
static void write_seed(const struct topo_part *p, const char *path)
{
    msgpack_sbuffer buf;
    encode(p, &buf);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf.data, 1, buf.size, f) == buf.size);
    if (f) fclose(f);
    msgpack_sbuffer_destroy(&buf);
}

/* The link message's params (proto/agent_wire.h): every field back
 * exactly, and a refusal names the field and the value. */
static void test_link_params(void)
{
    struct topo_link_params p = {.rate_bps = 20000000,
                                 .delay_ns = 5000000,
                                 .jitter_ns = 250000,
                                 .loss = 0.01,
                                 .queue = {100, 0, 0},
                                 .ecn_threshold = {0, 30000, 0},
                                 .reorder = true,
                                 .gilbert = true,
                                 .ge_p = 0.1,
                                 .ge_r = 0.2,
                                 .ge_h = 0.3,
                                 .ge_k = 0.9},
                            back;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(topo_part_params_pack(&pk, &p));
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    char err[256];
    CHECK(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    CHECK(topo_part_params_read(&u.data, &back, err, sizeof err) == 0);
    CHECK(back.rate_bps == p.rate_bps && back.delay_ns == p.delay_ns &&
          back.jitter_ns == p.jitter_ns && back.loss == p.loss);
    CHECK(back.queue.packets == 100 && back.queue.bytes == 0 && back.ecn_threshold.bytes == 30000);
    CHECK(back.reorder && back.gilbert && back.ge_p == 0.1 && back.ge_r == 0.2 &&
          back.ge_h == 0.3 && back.ge_k == 0.9);
    u.data.via.map.ptr[3].val.via.f64 = 2; /* loss, the fourth key */
    CHECK(topo_part_params_read(&u.data, &back, err, sizeof err) == -1);
    CHECK_STREQ(err, "part wire: link params: field 'loss': 2 is not in 0..1");
    msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
    CHECK(topo_part_params_read(&nil, &back, err, sizeof err) == -1);
    CHECK_STREQ(err, "part wire: link params: not a map");
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

int main(int argc, char **argv)
{
    struct fixture f;
    uint32_t base = 4242;
    fixture_up(&f, base);
    if (argc > 1) { /* its cut link with an underlay delay, so the fuzzer sees one */
        f.parts[2].net->links[0].underlay_delay_us = 200;
        write_seed(&f.parts[2], argv[1]);
        f.parts[2].net->links[0].underlay_delay_us = 0;
    }
    test_every_node_once(&f);
    test_cut_links(&f, base);
    test_routes(&f);
    test_lookups(&f);
    test_route_from_whole(&f);
    test_vni_numbers();
    test_routing_copy(&f);
    test_round_trip(&f);
    test_refused(&f);
    test_underlay_delay(&f);
    test_underlay_arithmetic();
    test_underlay_plan(&f);
    test_port_collision(&f);
    test_bad_plan(&f);
    test_link_params();
    fixture_down(&f);
    /* A base at the top of the range: the second cut wraps to VNI 1. */
    fixture_up(&f, TOPO_PART_VNI_MAX);
    test_cut_links(&f, TOPO_PART_VNI_MAX);
    fixture_down(&f);
    return check_report();
}
