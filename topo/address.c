/* address.c — the address plan of an emulated network (see address.h). */
#include "topo/address.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- L2 segments: connected groups of switches ---- */

static int uf_find(int *parent, int i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

static bool is_switch(const struct topo_network *net, int i)
{
    return net->nodes[i].kind == TOPO_NODE_SWITCH;
}

/* Groups switches joined by links; a link closing a cycle is an error. */
static int assign_segments(struct topo_network *net, char *err, size_t errlen)
{
    int *parent = malloc((net->n_nodes ? net->n_nodes : 1) * sizeof *parent);
    if (!parent) return snprintf(err, errlen, "out of memory"), -1;
    for (size_t i = 0; i < net->n_nodes; i++)
        parent[i] = (int)i;
    for (size_t k = 0; k < net->n_links; k++) {
        const struct topo_link *l = &net->links[k];
        if (!is_switch(net, l->a) || !is_switch(net, l->b)) continue;
        int ra = uf_find(parent, l->a), rb = uf_find(parent, l->b);
        if (ra == rb) {
            snprintf(err, errlen,
                     "network '%s': link %s-%s closes a loop of switches; bridges without "
                     "spanning tree would flood it",
                     net->name, net->nodes[l->a].name, net->nodes[l->b].name);
            free(parent);
            return -1;
        }
        parent[ra] = rb;
    }
    int *segment_of_root = malloc(net->n_nodes * sizeof *segment_of_root);
    if (!segment_of_root) return free(parent), snprintf(err, errlen, "out of memory"), -1;
    for (size_t i = 0; i < net->n_nodes; i++)
        segment_of_root[i] = -1;
    net->n_segments = 0;
    for (size_t i = 0; i < net->n_nodes; i++) {
        if (!is_switch(net, (int)i)) continue;
        int root = uf_find(parent, (int)i);
        if (segment_of_root[root] < 0) segment_of_root[root] = (int)net->n_segments++;
        net->nodes[i].segment = segment_of_root[root];
    }
    free(segment_of_root);
    free(parent);
    return 0;
}

/* ---- interface names ---- */

/* True when node `node` already has an interface called name (links before `upto`). */
static bool ifname_taken(const struct topo_network *net, int node, size_t upto, const char *name)
{
    if (strcmp(name, "lo") == 0) return true;
    for (size_t k = 0; k < upto; k++) {
        const struct topo_link *l = &net->links[k];
        if ((l->a == node && strcmp(l->ifname_a, name) == 0) ||
            (l->b == node && strcmp(l->ifname_b, name) == 0))
            return true;
    }
    return false;
}

/* Names node's end of link k after the node at the other end. */
static void name_interface(struct topo_network *net, size_t k, int node, int other, char *out)
{
    const char *base = net->nodes[other].name;
    snprintf(out, TOPO_IFNAME_MAX, "%.15s", base);
    for (int n = 1; ifname_taken(net, node, k, out); n++) {
        char suffix[12];
        int slen = snprintf(suffix, sizeof suffix, "-%d", n);
        snprintf(out, TOPO_IFNAME_MAX, "%.*s%s", 15 - slen, base, suffix);
    }
}

void topo_name_link_end(struct topo_network *net, size_t link, int node, char *out)
{
    struct topo_link *l = &net->links[link];
    int other = l->a == node ? l->b : l->a;
    /* every other link's names count, this one's own end (out) does not */
    char name[TOPO_IFNAME_MAX];
    out[0] = '\0';
    name_interface(net, net->n_links, node, other, name);
    snprintf(out, TOPO_IFNAME_MAX, "%s", name);
}

static void assign_ifnames(struct topo_network *net)
{
    for (size_t k = 0; k < net->n_links; k++) {
        struct topo_link *l = &net->links[k];
        name_interface(net, k, l->a, l->b, l->ifname_a);
        name_interface(net, k, l->b, l->a, l->ifname_b);
    }
}

/* ---- addresses ---- */

struct allocator {
    uint64_t next, end; /* host-order addresses, end exclusive */
};

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 4;
    while (p < n)
        p <<= 1;
    return p;
}

/* An aligned block of `size` addresses; 0 when the base is exhausted. */
static uint32_t alloc_block(struct allocator *a, uint32_t size)
{
    uint64_t start = (a->next + size - 1) / size * size;
    if (start + size > a->end) return 0;
    a->next = start + size;
    return (uint32_t)start;
}

static int exhausted(const struct topo_network *net, char *err, size_t errlen)
{
    char base[16];
    topo_addr_format(net->addr_base, base, sizeof base);
    snprintf(err, errlen,
             "network '%s': addr_base %s/%u is too small for %zu nodes and %zu links; choose a "
             "larger one",
             net->name, base, net->addr_prefix_len, net->n_nodes, net->n_links);
    return -1;
}

static int assign_node_addresses(struct topo_network *net, struct allocator *a)
{
    size_t hosts = 0;
    for (size_t i = 0; i < net->n_nodes; i++)
        hosts += !is_switch(net, (int)i);
    uint32_t size = pow2_at_least(hosts + 2);
    uint32_t block = alloc_block(a, size);
    if (!block && hosts) return -1;
    net->node_block = block;
    net->node_block_len = 32;
    for (uint32_t v = size; v > 1; v >>= 1)
        net->node_block_len--;
    uint32_t next = block + 1; /* skip the block's network address */
    for (size_t i = 0; i < net->n_nodes; i++) {
        struct topo_node *n = &net->nodes[i];
        n->node_addr = 0;
        n->addr[0] = '\0';
        if (is_switch(net, (int)i)) continue;
        n->node_addr = next++;
        topo_addr_format(n->node_addr, n->addr, sizeof n->addr);
    }
    return 0;
}

static int assign_p2p_subnets(struct topo_network *net, struct allocator *a)
{
    for (size_t k = 0; k < net->n_links; k++) {
        struct topo_link *l = &net->links[k];
        if (is_switch(net, l->a) || is_switch(net, l->b)) continue;
        uint32_t subnet = alloc_block(a, 4);
        if (!subnet) return -1;
        l->addr_a = subnet + 1;
        l->addr_b = subnet + 2;
        l->prefix_len = 30;
    }
    return 0;
}

/* One subnet per segment, sized for the hosts attached to its switches. */
static int assign_segment_subnets(struct topo_network *net, struct allocator *a)
{
    for (size_t s = 0; s < net->n_segments; s++) {
        size_t attached = 0;
        for (size_t k = 0; k < net->n_links; k++) {
            const struct topo_link *l = &net->links[k];
            int sw = is_switch(net, l->a) ? l->a : l->b;
            if (is_switch(net, l->a) != is_switch(net, l->b) && net->nodes[sw].segment == (int)s)
                attached++;
        }
        uint32_t size = pow2_at_least(attached + 2);
        uint32_t subnet = alloc_block(a, size);
        if (!subnet) return -1;
        uint8_t prefix = 32;
        for (uint32_t v = size; v > 1; v >>= 1)
            prefix--;
        uint32_t next = subnet + 1;
        for (size_t k = 0; k < net->n_links; k++) {
            struct topo_link *l = &net->links[k];
            bool sa = is_switch(net, l->a), sb = is_switch(net, l->b);
            if (sa == sb || net->nodes[sa ? l->a : l->b].segment != (int)s) continue;
            *(sa ? &l->addr_b : &l->addr_a) = next++;
            l->prefix_len = prefix;
        }
    }
    return 0;
}

int topo_assign_addresses(struct topo_network *net, char *err, size_t errlen)
{
    if (assign_segments(net, err, errlen) < 0) return -1;
    assign_ifnames(net);
    uint64_t span = 1ull << (32 - net->addr_prefix_len);
    struct allocator a = {net->addr_base, (uint64_t)net->addr_base + span};
    if (assign_node_addresses(net, &a) < 0 || assign_p2p_subnets(net, &a) < 0 ||
        assign_segment_subnets(net, &a) < 0)
        return exhausted(net, err, errlen);
    return 0;
}
