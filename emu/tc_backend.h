/* tc_backend.h — the kernel backend: realises a topology model in the kernel.
 *
 * Every node (host or switch) gets an anonymous network namespace held by an
 * fd (nothing bind-mounted: when the controller and the peers are gone, the
 * kernel frees the namespaces and every link in them); every link becomes a
 * veth pair created straight in its two namespaces; a switch is a bridge in
 * its namespace with its links as ports; hosts get their node address on lo,
 * their link addresses, forwarding and the static routes of topo/route.h; both
 * directions of every link are shaped on egress with the qdisc plans of
 * topo/shape.h (HTB + netem, or HTB + bfifo where netem is not needed).
 * A part of a network spread over machines (topo/part.h) has remote nodes,
 * for which nothing is made here (no namespace, interface or route), and
 * cross-machine links, whose local end is a VXLAN device (emu/nl_vxlan.h)
 * made by the machine's socket into the node's namespace and then set up
 * and shaped as a veth end (shaped with the delay less the underlay's:
 * topo_link_params_install); their remote ends are the other machine's.
 * On the user backend hiernet-linkd makes a cut link's local end instead
 * (a TAP, its far end a UDP socket: emu/linkd/underlay.h) and this module
 * configures it as any linkd TAP, after emu_tc_underlay_check.
 *
 * All netlink goes through emu/nl.h in batches (one per namespace, one for
 * the veths) so a 1000-node network starts in well under a second.
 * Owns the namespaces, their netlink sockets and the installed plans. */
#pragma once

#include "topo/network.h"
#include "topo/route.h"
#include "topo/route_change.h"
#include "topo/shape.h"

#include <stdbool.h>
#include <stddef.h>

struct emu_tc;

struct emu_tc_options {
    bool have_netem;           /* the kernel has sch_netem */
    enum topo_shape_root root; /* HTB (default) or TBF */
};

/* Seconds spent per phase of the last build (reported in the run's log). */
struct emu_tc_timing {
    double namespaces, links, configure;
    double interfaces, routes, running; /* configure's passes */
};
const struct emu_tc_timing *emu_tc_timing(const struct emu_tc *k);

/* Builds everything; on failure nothing is left (the namespaces are closed). */
int emu_tc_build(const struct topo_network *net, const struct topo_routing *routing,
                 const struct emu_tc_options *opts, struct emu_tc **out, char *err, size_t errlen);

/* The same in steps, for links made by someone else (the user backend's
 * TAP pairs): create the namespaces, let the caller make each link and
 * report its two ifindexes, then configure addresses, bridges and routes
 * (and qdiscs when shape is true). */
int emu_tc_create(const struct topo_network *net, const struct emu_tc_options *opts,
                  struct emu_tc **out, char *err, size_t errlen);
void emu_tc_set_link_ifindex(struct emu_tc *k, int link, int ifindex_a, int ifindex_b);
/* Options decided after emu_tc_create (they only matter from the
 * shaping plans on). */
void emu_tc_set_options(struct emu_tc *k, const struct emu_tc_options *opts);
/* The kernel backend's links: every veth pair, straight into its
 * namespaces, and each cross-machine link's local VXLAN end (a VNI taken
 * on this machine, EEXIST, fails naming the link). */
int emu_tc_add_veths(struct emu_tc *k, char *err, size_t errlen);
int emu_tc_configure(struct emu_tc *k, const struct topo_routing *routing, bool shape, char *err,
                     size_t errlen);
/* Backend user: the underlay of the part's cut links exists here and
 * carries a full emulated packet plus its 50 bytes of tunnel (nl_vxlan.h);
 * 0 when it does or there is no cut link, else -1 with one line naming
 * the link, the underlay device and both MTUs. */
int emu_tc_underlay_check(const struct emu_tc *k, char *err, size_t errlen);
/* The namespace fd of node i (for spawning its peer and node programs). */
int emu_tc_node_ns(const struct emu_tc *k, int node);
/* The ifindexes of link `index`'s ends, each in its node's namespace (for
 * reading the link's counters there). */
void emu_tc_link_ifindex(const struct emu_tc *k, int index, int *ifindex_a, int *ifindex_b);
/* Runtime changes of link `index` (both directions). The model's params are
 * the caller's to update once this succeeds. */
int emu_tc_link_set(struct emu_tc *k, int index, const struct topo_link_params *params, char *err,
                    size_t errlen);
/* The same for one direction (0: a to b, 1: b to a) or both. */
#define EMU_TC_BOTH 2
int emu_tc_link_set_dir(struct emu_tc *k, int index, int dir, const struct topo_link_params *params,
                        char *err, size_t errlen);
int emu_tc_link_updown(struct emu_tc *k, int index, bool up, char *err, size_t errlen);
/* Whether params can be installed (the qdisc plan: a delay or loss needs
 * sch_netem), without touching the kernel: 0, or -1 with the cause. */
int emu_tc_link_check(const struct emu_tc *k, const struct topo_link_params *params, char *err,
                      size_t errlen);
/* Handover: the model already has one end of link l at its new node (end
 * a or b; the caller renamed it, topo_name_link_end); the interface moves
 * there from node `from` (emu_nl_link_move_build), is set up as at build
 * (router interface or bridge port, address, qdiscs), and both ends come
 * up and run. Routes are emu_tc_reroute's. */
int emu_tc_link_move(struct emu_tc *k, int l, bool end_a, int from, char *err, size_t errlen);
/* Every host's routes as the routing the kernel was configured with now
 * says (the caller replaced its content after link `moved` moved, which
 * leaf ends), in replace requests, with a host route to leaf on every
 * other host (so that none keeps one towards where it was), partitions'
 * blackholes after. On the kernel backend routes over links set down wait
 * for their link up, except over `moved` (emu_tc_link_move brought it
 * up). */
int emu_tc_reroute(struct emu_tc *k, int moved, int leaf, char *err, size_t errlen);
/* A part's share of a move over machines (topo/route_change.h): each
 * change's route replaces its host's route to the same destination, in
 * the kernel (the routing's model is the caller's to update), the hosts'
 * partitions' blackholes after, as emu_tc_reroute; routes over links set
 * down wait for their link up, except over `moved` (-1: none here).
 * Changes of one host are consecutive. */
int emu_tc_routes_put(struct emu_tc *k, const struct topo_route_change *changes, size_t n,
                      int moved, char *err, size_t errlen);
/* A partition (side[node]: 1 or 2 for its two groups, 0 for neither; NULL:
 * heal): every host of one group drops, silently, what it sends or forwards
 * to a host of the other group (blackhole routes to their node addresses),
 * as a cut network does. Healing removes them and replays the routes they
 * replaced. Partitions add up (each cuts its two groups apart) until one
 * heal removes them all; routes replayed when a link comes up keep them. */
int emu_tc_partition(struct emu_tc *k, const unsigned char *side, char *err, size_t errlen);
/* Heals the partitions that cut the two groups of side (as given to
 * emu_tc_partition, either group first; NULL: every partition), the
 * others staying in place; *healed (may be NULL) says how many went. */
int emu_tc_heal(struct emu_tc *k, const unsigned char *side, size_t *healed, char *err,
                size_t errlen);
/* Whether partition p cuts the same two groups as side (either first). */
bool emu_tc_same_cut(const unsigned char *p, const unsigned char *side, size_t n);
/* How many partitions are in place (0 once healed). */
size_t emu_tc_partitions(const struct emu_tc *k);
/* Whether a partition in place puts nodes a and b in opposite groups. */
bool emu_tc_separated(const struct emu_tc *k, int a, int b);
/* Closes every namespace fd and socket; the namespaces vanish once no
 * process (peer, node program) is left in them. */
void emu_tc_destroy(struct emu_tc *k);

/* The shaping request of one link direction (shared with the user backend). */
void emu_tc_shape_request(const struct topo_link_params *p, enum topo_shape_root root,
                          struct topo_shape_request *req);
