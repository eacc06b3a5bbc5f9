/* dot.h — a network as a Graphviz graph (hiernet draw): nodes coloured by
 * tier (cloud, edge, terminal), switches as boxes, links labelled with
 * their parameters. Writes to a caller-owned stream; owns nothing. */
#pragma once

#include "topo/network.h"

#include <stdio.h>

void topo_network_write_dot(const struct topo_network *net, FILE *f);
