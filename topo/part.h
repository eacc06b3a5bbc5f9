/* part.h — one machine's part of a network spread over machines (issue 20;
 * docs/design-notes.md, "Several machines, the design").
 *
 * A part is a network model of its own (struct topo_network, planned):
 * the machine's nodes, in the whole network's order, then one remote node
 * (topo_node.remote) for each node of another machine that a cut link
 * reaches; every link between two of its nodes, and every cut link with
 * its end at the remote node marked by vni and underlay_remote. Addresses
 * are the whole network's (the address plan is made once, on the
 * controller), and so are the routes: computed once for the whole network,
 * each part keeps its nodes' share, with links and nodes renumbered, so a
 * route may leave through a cut link like through any other.
 *
 * VNIs: cut link c of the placement's list gets topo_part_vni(base, c),
 * the same on both machines; base is drawn per run (two runs on the same
 * machines then rarely collide, and a collision is a start error naming
 * the link, emu/tc_backend.c).
 *
 * Pure: no system calls. Owns its network, routes and index maps. */
#pragma once

#include "topo/machines.h"
#include "topo/network.h"
#include "topo/placement.h"
#include "topo/route.h"

#include <stddef.h>
#include <stdint.h>

#define TOPO_PART_VNI_MAX 0xffffff /* VXLAN's 24 bits; 0 is not a VNI */
#define TOPO_PART_SECRET_SIZE 32   /* the data plane's secret (peer/data_auth.h) */
#define TOPO_PART_RUN_ID_MAX 64    /* the run id, NUL included (HN_RUN_ID_MAX + 1) */

struct topo_part {
    char run_id[TOPO_PART_RUN_ID_MAX];
    char machine[TOPO_MACHINE_NAME_MAX];
    struct topo_network *net;    /* the part's model (planned) */
    struct topo_routing routing; /* per node of net; empty for switches and remote nodes */
    int *whole_node;             /* per node of net: its index in the whole network */
    int *whole_link;             /* per link of net: its index in the whole network */
    uint8_t secret[TOPO_PART_SECRET_SIZE];
};

/* What the parts of one run share, besides the whole network and its routes. */
struct topo_part_plan {
    const char *run_id;
    const struct topo_placement *placement;
    const struct topo_machines *machines;
    const uint32_t *underlay; /* per machine: its underlay IPv4 address, host order */
    uint32_t vni_base;        /* 1 .. TOPO_PART_VNI_MAX: topo_part_vni_base */
    const uint8_t *secret;    /* TOPO_PART_SECRET_SIZE bytes */
    /* Per pair of machines (a * machines->n + b, both orders): the
     * underlay's one-way delay between them in µs, given to each cut
     * link between them (topo_part_underlay_delay_us); NULL: none known. */
    const uint32_t *underlay_delay_us;
};

/* A VNI base from random bits: 1 .. TOPO_PART_VNI_MAX. */
uint32_t topo_part_vni_base(uint64_t random);
/* The VNI of cut link c (its index in the placement's cut list). */
uint32_t topo_part_vni(uint32_t base, size_t c);

/* Machine `machine`'s part of whole (addressed, routed by routing) into
 * out, which starts zeroed and is the caller's to free even on failure.
 * A machine without nodes gets an empty part. -1 with err on bad input
 * (an address plan missing, a bad machine index) or out of memory. */
int topo_part_make(const struct topo_network *whole, const struct topo_routing *routing,
                   const struct topo_part_plan *plan, size_t machine, struct topo_part *out,
                   char *err, size_t errlen);
/* An empty part with its network named name (the decoder's start). */
int topo_part_init(struct topo_part *part, const char *name, enum topo_backend backend, char *err,
                   size_t errlen);
void topo_part_free(struct topo_part *part);
/* The largest underlay one-way delay a cut link may carry (10 s): more
 * is no underlay but a fault. */
#define TOPO_PART_UNDERLAY_DELAY_MAX_US 10000000u
/* The underlay's one-way delay from the smallest measured round trip
 * (ns): half of it, in µs rounded down, at most
 * TOPO_PART_UNDERLAY_DELAY_MAX_US; 0 for a round trip <= 0. Half assumes
 * both directions take as long: an asymmetric underlay is off by up to
 * half their difference (docs/design-notes.md). */
uint32_t topo_part_underlay_delay_us(int64_t min_rtt_ns);
/* Every cut link's delay (real time: times the dilation) covers its
 * underlay's one-way delay, which the backends subtract from it
 * (topo_link_params_install); else -1 with one line naming the first link
 * that does not and both figures. A link of no delay (0) is not refused:
 * it asked for none and gets the underlay's (the log and run.json show it). */
int topo_part_check_underlay(const struct topo_part *part, char *err, size_t errlen);
/* hiernet-linkd carries a cut link over UDP port LINKD_UNDERLAY_PORT(vni)
 * (proto/linkd_methods.h): two cut links of one machine whose VNIs are
 * LINKD_UNDERLAY_PORTS apart would share it (past 8,192 cut links on a
 * machine). A part whose backend may be the user one (user, auto) with such
 * a pair: -1 with one line naming both links, the port and the machine;
 * the kernel backend's VXLAN devices share one port and are not limited. */
int topo_part_check_ports(const struct topo_part *part, char *err, size_t errlen);
/* Nodes of the part that are the machine's own (not remote): they come
 * first, so they are part->net->nodes[0 .. this). */
size_t topo_part_local_nodes(const struct topo_part *part);
/* The part's own node of whole-network node `whole` (a binary search: its
 * own nodes are in the whole network's order), or -1 when the part lacks
 * it or has it as a remote node. */
long topo_part_own_node(const struct topo_part *part, uint64_t whole);
/* The part's node of whole-network node `whole`, its own or a remote one,
 * or -1 when the part lacks it. */
long topo_part_node(const struct topo_part *part, uint64_t whole);
/* The part's link of whole-network link `whole`, or -1 when none. */
long topo_part_link(const struct topo_part *part, uint64_t whole);
/* A route of whole node `node` (whole-network indices, as the
 * controller's routing has it) as the part's: its node, link, dst_node
 * and via renumbered (dst_node and via -1 when the part lacks them: the
 * route then goes by its address). 0, or -1 when node is not the part's
 * own or the route's link not in the part. */
int topo_part_route_from_whole(const struct topo_part *part, int node,
                               const struct topo_route *whole, int *node_out,
                               struct topo_route *out);
