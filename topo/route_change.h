/* route_change.h — the routes a move changes (t:move over machines, issue
 * 20): the routing of a network whose leaf moved, against the routing
 * before, as the changes each host needs, and those changes applied to a
 * route list. The controller computes them on the whole network and sends
 * each machine its hosts' share; the part applies them to its model and
 * its kernel (controller/netrun_parts.c, netrun_link_move_routes).
 *
 * Pure: no system calls. Owns nothing but the arrays it returns. */
#pragma once

#include "topo/network.h"
#include "topo/route.h"

#include <stdbool.h>
#include <stddef.h>

/* One route host `node` must have (install it in place of any route to
 * the same dst/dst_len). */
struct topo_route_change {
    int node;
    struct topo_route route;
};

struct topo_route_changes {
    struct topo_route_change *v;
    size_t n, cap;
};

/* Appends host node's changes from old to fresh (both of net, whose leaf
 * `leaf` moved): every route of fresh that old lacks (a dst/dst_len it
 * has not, or has by another link or gateway), then, unless node is the
 * leaf, a /32 to the leaf along its fresh path, so that no host keeps an
 * older host route towards where the leaf was (emu_tc_reroute does the
 * same on one machine). Other destinations keep their paths, so the
 * routes of old that fresh dropped still lead the right way. 0, or -1 out
 * of memory. */
int topo_route_changes_of(const struct topo_network *net, const struct topo_routing *old,
                          const struct topo_routing *fresh, int node, int leaf,
                          struct topo_route_changes *out);
void topo_route_changes_free(struct topo_route_changes *c);

/* A /32 route to node `leaf` along the route of nr that covers its node
 * address (the longest prefix) into out: false when none covers it. */
bool topo_route_host_to(const struct topo_network *net, const struct topo_node_routes *nr, int leaf,
                        struct topo_route *out);

/* Puts r into nr: replaces the route to the same dst/dst_len, or appends
 * it. 0, or -1 out of memory (nr unchanged). */
int topo_routes_put(struct topo_node_routes *nr, const struct topo_route *r);
