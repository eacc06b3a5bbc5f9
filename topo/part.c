/* part.c — one machine's part of a network (see part.h). */
#include "topo/part.h"

#include "proto/linkd_methods.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t topo_part_vni_base(uint64_t random)
{
    return (uint32_t)(random % TOPO_PART_VNI_MAX) + 1;
}

uint32_t topo_part_vni(uint32_t base, size_t c)
{
    return (uint32_t)(((uint64_t)base - 1 + c) % TOPO_PART_VNI_MAX) + 1;
}

int topo_part_init(struct topo_part *part, const char *name, enum topo_backend backend, char *err,
                   size_t errlen)
{
    part->net = topo_network_new(name, backend, 0, err, errlen);
    if (!part->net) return -1;
    part->net->planned = true;
    return 0;
}

void topo_part_free(struct topo_part *part)
{
    topo_network_free(part->net);
    topo_routing_free(&part->routing);
    free(part->whole_node);
    free(part->whole_link);
    memset(part, 0, sizeof *part);
}

uint32_t topo_part_underlay_delay_us(int64_t min_rtt_ns)
{
    if (min_rtt_ns <= 0) return 0;
    int64_t us = min_rtt_ns / 2000;
    return us > TOPO_PART_UNDERLAY_DELAY_MAX_US ? TOPO_PART_UNDERLAY_DELAY_MAX_US : (uint32_t)us;
}

int topo_part_check_underlay(const struct topo_part *part, char *err, size_t errlen)
{
    const struct topo_network *net = part->net;
    for (size_t l = 0; net && l < net->n_links; l++) {
        const struct topo_link *link = &net->links[l];
        double real_ms = (double)link->params.delay_ns * net->dilation / 1e6;
        double underlay_ms = link->underlay_delay_us / 1e3;
        /* no delay asked (0: e.g. a kernel without netem): it gets the
         * underlay's, which the log and run.json show */
        if (real_ms >= underlay_ms || link->params.delay_ns == 0) continue;
        char what[80], dilated[64] = "";
        topo_link_describe(net, link, what, sizeof what);
        if (net->dilation > 1)
            snprintf(dilated, sizeof dilated, " (%g ms real at dilation %g)", real_ms,
                     net->dilation);
        snprintf(err, errlen,
                 "network '%s': link %s: delay %g ms%s is below the underlay's one-way delay of "
                 "%g ms between its machines, which every packet already takes",
                 net->name, what, (double)link->params.delay_ns / 1e6, dilated, underlay_ms);
        return -1;
    }
    return 0;
}

int topo_part_check_ports(const struct topo_part *part, char *err, size_t errlen)
{
    const struct topo_network *net = part->net;
    if (!net || net->backend == TOPO_BACKEND_KERNEL || net->backend == TOPO_BACKEND_NONE) return 0;
    long *owner = malloc(LINKD_UNDERLAY_PORTS * sizeof *owner); /* per port: its link, or -1 */
    if (!owner) return snprintf(err, errlen, "out of memory"), -1;
    for (size_t p = 0; p < LINKD_UNDERLAY_PORTS; p++)
        owner[p] = -1;
    int rc = 0;
    for (size_t l = 0; rc == 0 && l < net->n_links; l++) {
        if (!net->links[l].vni) continue;
        unsigned port = LINKD_UNDERLAY_PORT(net->links[l].vni);
        long *o = &owner[port - LINKD_UNDERLAY_PORT_BASE];
        if (*o < 0) {
            *o = (long)l;
            continue;
        }
        char a[80], b[80];
        topo_link_describe(net, &net->links[*o], a, sizeof a);
        topo_link_describe(net, &net->links[l], b, sizeof b);
        snprintf(err, errlen,
                 "network '%s': cut links %s and %s would both use UDP port %u on machine %s "
                 "(the user backend carries a cut link on port %d + VNI mod %d: at most %d cut "
                 "links per machine; use backend 'kernel' or fewer cut links)",
                 net->name, a, b, port, part->machine, LINKD_UNDERLAY_PORT_BASE,
                 LINKD_UNDERLAY_PORTS, LINKD_UNDERLAY_PORTS);
        rc = -1;
    }
    free(owner);
    return rc;
}

/* A binary search for the first remote node: they come last (topo_part_make
 * adds them so, topo_part_decode refuses another order). */
size_t topo_part_local_nodes(const struct topo_part *part)
{
    size_t lo = 0, hi = part->net ? part->net->n_nodes : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (part->net->nodes[mid].remote)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

long topo_part_own_node(const struct topo_part *part, uint64_t whole)
{
    size_t lo = 0, hi = topo_part_local_nodes(part);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)part->whole_node[mid] == whole) return (long)mid;
        if ((uint64_t)part->whole_node[mid] < whole)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

long topo_part_node(const struct topo_part *part, uint64_t whole)
{
    long i = topo_part_own_node(part, whole);
    /* The remote nodes, in their cut links' order: a linear search, as a
     * machine's cut links are few beside its nodes. */
    for (size_t k = topo_part_local_nodes(part); i < 0 && part->net && k < part->net->n_nodes; k++)
        if ((uint64_t)part->whole_node[k] == whole) i = (long)k;
    return i;
}

long topo_part_link(const struct topo_part *part, uint64_t whole)
{
    for (size_t l = 0; part->net && l < part->net->n_links; l++)
        if ((uint64_t)part->whole_link[l] == whole) return (long)l;
    return -1;
}

/* What a part's build keeps of the whole network's settings. */
static void copy_settings(struct topo_network *net, const struct topo_network *whole)
{
    net->seed = whole->seed;
    net->dilation = whole->dilation;
    net->addr_base = whole->addr_base;
    net->addr_prefix_len = whole->addr_prefix_len;
    net->node_block = whole->node_block;
    net->node_block_len = whole->node_block_len;
    net->n_segments = whole->n_segments;
}

/* Whole node w joins the part (remote: as another machine's node). */
static int add_node(struct topo_part *part, const struct topo_network *whole, int w, bool remote,
                    int *part_of, char *err, size_t errlen)
{
    const struct topo_node *n = &whole->nodes[w];
    int i = topo_node_add(part->net, n->name, n->kind, err, errlen);
    if (i < 0) return -1;
    part->net->nodes[i] = *n;
    part->net->nodes[i].remote = remote;
    part->whole_node[i] = w;
    part_of[w] = i;
    return 0;
}

/* The far end of every cut link of the machine, once each. */
static int add_remote_nodes(struct topo_part *part, const struct topo_network *whole,
                            const struct topo_part_plan *plan, size_t machine, int *part_of,
                            char *err, size_t errlen)
{
    const struct topo_placement *p = plan->placement;
    for (size_t c = 0; c < p->n_cut; c++) {
        const struct topo_link *l = &whole->links[p->cut[c]];
        int far = p->machine[l->a] == (int)machine ? l->b : l->a;
        if (p->machine[far] == (int)machine || p->machine[l->a + l->b - far] != (int)machine)
            continue; /* a cut between two other machines */
        if (part_of[far] < 0 && add_node(part, whole, far, true, part_of, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int add_nodes(struct topo_part *part, const struct topo_network *whole,
                     const struct topo_part_plan *plan, size_t machine, int *part_of, char *err,
                     size_t errlen)
{
    for (size_t w = 0; w < whole->n_nodes; w++)
        if (plan->placement->machine[w] == (int)machine &&
            add_node(part, whole, (int)w, false, part_of, err, errlen) < 0)
            return -1;
    return add_remote_nodes(part, whole, plan, machine, part_of, err, errlen);
}

/* Whole link w, both ends in the part; cut (its index in the cut list,
 * -1: not cut) marks the end at a remote node. */
static int add_link(struct topo_part *part, const struct topo_network *whole, size_t w, long cut,
                    const struct topo_part_plan *plan, const int *part_of, int *link_of, char *err,
                    size_t errlen)
{
    const struct topo_link *wl = &whole->links[w];
    int a = part_of[wl->a], b = part_of[wl->b];
    int i = topo_link_add_parallel(part->net, a, b, &wl->params, err, errlen);
    if (i < 0) return -1;
    struct topo_link *l = &part->net->links[i];
    *l = *wl;
    l->a = a;
    l->b = b;
    if (cut >= 0) {
        int far = part->net->nodes[a].remote ? wl->a : wl->b;
        l->vni = topo_part_vni(plan->vni_base, (size_t)cut);
        l->underlay_remote = plan->underlay[plan->placement->machine[far]];
        if (plan->underlay_delay_us)
            l->underlay_delay_us = plan->underlay_delay_us[(size_t)plan->placement->machine[wl->a] *
                                                               plan->machines->n +
                                                           (size_t)plan->placement->machine[wl->b]];
    }
    part->whole_link[i] = (int)w;
    link_of[w] = i;
    return 0;
}

static int add_links(struct topo_part *part, const struct topo_network *whole,
                     const struct topo_part_plan *plan, const int *part_of, int *link_of, char *err,
                     size_t errlen)
{
    const struct topo_placement *p = plan->placement;
    long *cut_index = malloc((whole->n_links ? whole->n_links : 1) * sizeof *cut_index);
    if (!cut_index) return snprintf(err, errlen, "network '%s': out of memory", whole->name), -1;
    for (size_t w = 0; w < whole->n_links; w++)
        cut_index[w] = -1;
    for (size_t c = 0; c < p->n_cut; c++)
        cut_index[p->cut[c]] = (long)c;
    int rc = 0;
    for (size_t w = 0; w < whole->n_links && rc == 0; w++) {
        const struct topo_link *wl = &whole->links[w];
        if (part_of[wl->a] < 0 || part_of[wl->b] < 0) continue;
        if (part->net->nodes[part_of[wl->a]].remote && part->net->nodes[part_of[wl->b]].remote)
            continue; /* two far ends: a link of other machines */
        rc = add_link(part, whole, w, cut_index[w], plan, part_of, link_of, err, errlen);
    }
    free(cut_index);
    return rc;
}

static int map_index(const int *map, int i)
{
    return i >= 0 ? map[i] : i;
}

/* Node i's share of the whole network's routes (whole node w), renumbered. */
static int copy_routes(struct topo_part *part, const struct topo_routing *routing, int i, int w,
                       const int *part_of, const int *link_of, char *err, size_t errlen)
{
    const struct topo_node_routes *from = &routing->nodes[w];
    struct topo_node_routes *to = &part->routing.nodes[i];
    if (!from->n_routes) return 0;
    to->routes = malloc(from->n_routes * sizeof *to->routes);
    if (!to->routes)
        return snprintf(err, errlen, "network '%s': out of memory", part->net->name), -1;
    for (size_t r = 0; r < from->n_routes; r++) {
        struct topo_route route = from->routes[r];
        route.link = link_of[route.link]; /* a link of node w: in the part */
        route.dst_node = map_index(part_of, route.dst_node);
        if (route.via != TOPO_ROUTE_DIRECT) route.via = map_index(part_of, route.via);
        to->routes[to->n_routes++] = route;
    }
    part->routing.total_routes += to->n_routes;
    return 0;
}

static int copy_routing(struct topo_part *part, const struct topo_routing *routing,
                        const int *part_of, const int *link_of, char *err, size_t errlen)
{
    size_t n = part->net->n_nodes;
    part->routing.nodes = calloc(n ? n : 1, sizeof *part->routing.nodes);
    if (!part->routing.nodes)
        return snprintf(err, errlen, "network '%s': out of memory", part->net->name), -1;
    part->routing.n_nodes = n;
    for (size_t i = 0; i < n; i++) {
        int w = part->whole_node[i];
        if (part->net->nodes[i].remote || (size_t)w >= routing->n_nodes) continue;
        if (copy_routes(part, routing, (int)i, w, part_of, link_of, err, errlen) < 0) return -1;
    }
    return 0;
}

static int check_input(const struct topo_network *whole, const struct topo_routing *routing,
                       const struct topo_part_plan *plan, size_t machine, char *err, size_t errlen)
{
    if (machine >= plan->machines->n || plan->placement->n_nodes != whole->n_nodes)
        return snprintf(err, errlen, "network '%s': no machine %zu in a placement of %zu nodes",
                        whole->name, machine, plan->placement->n_nodes),
               -1;
    if (!whole->node_block_len || routing->n_nodes != whole->n_nodes)
        return snprintf(err, errlen,
                        "network '%s': a part needs the whole network's addresses and routes",
                        whole->name),
               -1;
    if (plan->vni_base < 1 || plan->vni_base > TOPO_PART_VNI_MAX)
        return snprintf(err, errlen, "network '%s': VNI base %u is not in 1..%d", whole->name,
                        plan->vni_base, TOPO_PART_VNI_MAX),
               -1;
    return 0;
}

static int make_part(struct topo_part *out, const struct topo_network *whole,
                     const struct topo_routing *routing, const struct topo_part_plan *plan,
                     size_t machine, int *part_of, int *link_of, char *err, size_t errlen)
{
    if (add_nodes(out, whole, plan, machine, part_of, err, errlen) < 0 ||
        add_links(out, whole, plan, part_of, link_of, err, errlen) < 0)
        return -1;
    return copy_routing(out, routing, part_of, link_of, err, errlen);
}

int topo_part_make(const struct topo_network *whole, const struct topo_routing *routing,
                   const struct topo_part_plan *plan, size_t machine, struct topo_part *out,
                   char *err, size_t errlen)
{
    if (check_input(whole, routing, plan, machine, err, errlen) < 0 ||
        topo_part_init(out, whole->name, whole->backend, err, errlen) < 0)
        return -1;
    snprintf(out->run_id, sizeof out->run_id, "%s", plan->run_id ? plan->run_id : "run");
    snprintf(out->machine, sizeof out->machine, "%s", plan->machines->v[machine].name);
    memcpy(out->secret, plan->secret, sizeof out->secret);
    copy_settings(out->net, whole);
    out->net->underlay_local = plan->underlay[machine];
    size_t nn = whole->n_nodes ? whole->n_nodes : 1, nl = whole->n_links ? whole->n_links : 1;
    int *part_of = malloc(nn * sizeof *part_of), *link_of = malloc(nl * sizeof *link_of);
    out->whole_node = malloc(nn * sizeof *out->whole_node);
    out->whole_link = malloc(nl * sizeof *out->whole_link);
    int rc = -1;
    if (!part_of || !link_of || !out->whole_node || !out->whole_link)
        snprintf(err, errlen, "network '%s': out of memory", whole->name);
    else {
        for (size_t i = 0; i < nn; i++)
            part_of[i] = -1;
        for (size_t i = 0; i < nl; i++)
            link_of[i] = -1;
        rc = make_part(out, whole, routing, plan, machine, part_of, link_of, err, errlen);
    }
    free(part_of);
    free(link_of);
    return rc;
}

/* The part's index of whole node w (a route's dst_node or via), or -1. */
static int part_node_of(const struct topo_part *part, int w)
{
    return w < 0 ? -1 : (int)topo_part_node(part, (uint64_t)w);
}

int topo_part_route_from_whole(const struct topo_part *part, int node,
                               const struct topo_route *whole, int *node_out,
                               struct topo_route *out)
{
    long i = node < 0 ? -1 : topo_part_own_node(part, (uint64_t)node);
    long l = whole->link < 0 ? -1 : topo_part_link(part, (uint64_t)whole->link);
    if (i < 0 || l < 0) return -1;
    *out = *whole;
    out->link = (int)l;
    out->dst_node = part_node_of(part, whole->dst_node);
    if (whole->via != TOPO_ROUTE_DIRECT) out->via = part_node_of(part, whole->via);
    *node_out = (int)i;
    return 0;
}
