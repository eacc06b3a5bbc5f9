/* placement.h — which machine runs which node of a network spread over
 * several machines (issue 20, item 4): the topology partitioned with METIS.
 *
 * - Node weights: compute demand, threads x speed (at most cpu when a cgroup
 *   caps it), a quarter of that for a node that computes by profile (it
 *   sleeps the profile's time), 0.1 for a switch.
 * - Edge weights: bandwidth (unlimited: 10 Gbit/s) / (1 + delay in ms)^2,
 *   so METIS, which minimises the cut weight, cuts long-delay links first:
 *   the underlay's own delay then hides inside the emulated one.
 * - Machine shares (METIS's tpwgts): their cores (1 when not given).
 * - Pins (net:node's host=): METIS cannot fix vertices, so every machine's
 *   pinned nodes are contracted into one anchor vertex before partitioning;
 *   the part that holds a machine's anchor goes to that machine, the other
 *   parts to the other machines, and pinned nodes always land where pinned.
 *
 * Pure: no system calls; METIS runs with a fixed seed, so the same input
 * gives the same placement. Owns its arrays. */
#pragma once

#include "topo/machines.h"
#include "topo/network.h"

#include <stdio.h>

struct topo_placement {
    size_t n_nodes, n_machines;
    int *machine; /* per node: index into the machines */
    size_t *cut;  /* indices of the links whose ends are on two machines */
    size_t n_cut;
    double *load;  /* per machine: the node weight placed there */
    size_t *count; /* per machine: nodes placed there */
};

/* Places net's nodes on m's machines. A pin naming a machine m does not
 * list is an error naming the node and the machine. */
int topo_placement_compute(const struct topo_network *net, const struct topo_machines *m,
                           struct topo_placement *out, char *err, size_t errlen);
void topo_placement_free(struct topo_placement *p);
/* The weights above, for the docs' and the tests' sake. */
double topo_placement_node_weight(const struct topo_node *n);
double topo_placement_link_weight(const struct topo_link_params *p);
/* Nodes placed on a machine that is not the controller's (m's local flag). */
size_t topo_placement_remote_nodes(const struct topo_placement *p, const struct topo_machines *m);
/* run.json's placement entry of this network: machines, node -> machine,
 * cut links with their configured delay. */
void topo_placement_write_json(const struct topo_placement *p, const struct topo_network *net,
                               const struct topo_machines *m, FILE *f);
/* hiernet place: the same as tables for people. */
void topo_placement_write_text(const struct topo_placement *p, const struct topo_network *net,
                               const struct topo_machines *m, FILE *f);
