/* dot.h — a network as a Graphviz graph (hiernet draw): nodes coloured by
 * tier (cloud, edge, terminal), switches as boxes, links labelled with
 * their parameters. Writes to a caller-owned stream; owns nothing. */
#pragma once

#include "topo/network.h"
#include "topo/placement.h"

#include <stdio.h>

void topo_network_write_dot(const struct topo_network *net, FILE *f);
/* The same, placed over machines (hiernet draw --hosts): nodes coloured by
 * machine and labelled with its name, cut links drawn dashed and red. */
void topo_network_write_dot_placed(const struct topo_network *net,
                                   const struct topo_machines *machines,
                                   const struct topo_placement *placement, FILE *f);
