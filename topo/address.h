/* address.h — the address plan of an emulated network.
 *
 * From the network's addr_base (default 10.0.0.0/8) it assigns, in order:
 * one node address per host (a /32 on its loopback), one /30 per host-host
 * link, and one subnet per L2 segment (a group of switches linked together)
 * shared by every host attached to it. It also names every interface (at
 * most 15 characters, derived from the name of the node at the other end,
 * collisions resolved deterministically) and rejects switch loops, which
 * bridges without STP would flood. Writes into the network model; owns
 * nothing. */
#pragma once

#include "topo/network.h"

#include <stddef.h>

int topo_assign_addresses(struct topo_network *net, char *err, size_t errlen);
/* A fresh name for node's end of link (after the end moved to node: a
 * terminal's handover), unique among node's interfaces; written to out,
 * which is that end's name in the model. */
void topo_name_link_end(struct topo_network *net, size_t link, int node, char *out);
