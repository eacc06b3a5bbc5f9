/* route.h — static shortest-path routing of an emulated network.
 *
 * Paths minimise total delay, then hop count (switches count as hops).
 * Every host gets routes to every other host's node address: the most
 * common next hop becomes its default route and only the destinations
 * reached through another next hop get /32 host routes, so a tree needs
 * O(N * depth) routes rather than N^2. On a shared segment (a switch) the
 * hosts reach each other directly: there one on-link route for the whole
 * node-address block replaces the default when that needs fewer routes,
 * so a 1000-host star needs one route per host, not 999. Addresses come from the address
 * plan (topo_assign_addresses); paths do not need it. Owns the route lists
 * it computes. */
#pragma once

#include "topo/network.h"

#include <stddef.h>
#include <stdint.h>

struct topo_route {
    uint32_t dst;     /* node address, the node-address block, or 0 for the default */
    uint8_t dst_len;  /* 32 (one node), the block's prefix length, or 0 (default) */
    int dst_node;     /* the node for a /32, else -1 */
    int link;         /* link index the route leaves by */
    uint32_t gateway; /* next host's address on that link or segment; 0 = on-link */
    int via;          /* that next host's node index; TOPO_ROUTE_DIRECT for on-link */
};

/* A route without gateway: the destination itself answers on the segment
 * (Linux answers ARP for any of its addresses, its loopback node address
 * included). */
#define TOPO_ROUTE_DIRECT (-2)

struct topo_node_routes {
    struct topo_route *routes; /* the default route (if any) first */
    size_t n_routes;
};

struct topo_routing {
    struct topo_node_routes *nodes; /* one per node; empty for switches */
    size_t n_nodes;
    size_t total_routes;
};

/* A disconnected network is an error naming one unreachable pair. */
int topo_routing_compute(const struct topo_network *net, struct topo_routing *out, char *err,
                         size_t errlen);
void topo_routing_free(struct topo_routing *r);
/* A deep copy of from into to (which is overwritten): 0, or -1 when out of
 * memory (to is then empty). */
int topo_routing_copy(const struct topo_routing *from, struct topo_routing *to);

/* The path packets take from host `from` to host `to`, as node indices
 * (both ends and any switches included), following each hop's own routes.
 * Returns the number of nodes on the path, or -1 when there is no path. Like
 * snprintf, a return above cap says the path did not fit: only its first cap
 * nodes were written. n_nodes + 1 entries always suffice. */
int topo_routing_path(const struct topo_network *net, const struct topo_routing *r, int from,
                      int to, int *path, size_t cap);
