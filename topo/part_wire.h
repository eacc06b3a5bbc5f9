/* part_wire.h — a part's wire form (topo/part.h): what the controller sends
 * an agent in `build` (docs/design-notes.md, "Several machines, the
 * design"), encoded on the controller, decoded on the agent.
 *
 * One MessagePack map: run id, machine, network name, backend, dilation,
 * seed, the data secret (bin, 32 bytes), this machine's underlay address,
 * the address plan's figures; `nodes` (maps: name, tier, kind, cpu, speed,
 * threads, device, profile, address, segment, remote, tcp), `links` (maps:
 * ends, up, interface names and addresses, prefix length, vni, the
 * remote underlay address and the underlay's one-way delay, params), `routes` (per node, arrays
 * [dst, dst_len, dst_node, link, gateway, via]) and the part's indices in
 * the whole network. Every key is required.
 *
 * Here rather than in proto/ because it codes topo's structs, which proto/
 * must not see (the include layers); it packs with proto/msgmap.h and reads
 * with proto/protocol.h's typed getters, like the control protocol. The
 * decoder takes untrusted bytes (fuzz.fuzz_part_wire): it checks every
 * index, name, range and count, so a decoded part is one the build can
 * take. Owns nothing beyond what it returns. */
#pragma once

#include "topo/part.h"

#include <msgpack.h>
#include <stddef.h>

/* The largest part the decoder takes, bytes. Measured (topo_part_encode
 * of one machine's part of a cloud - edges - switch - terminals tree):
 * 10001 nodes are 5.8 MB with 8 terminals an edge, 24.5 MB with 98
 * (the routes, about one per terminal of the edge a node, dominate). */
#define TOPO_PART_WIRE_MAX (64u << 20)
#define TOPO_PART_WIRE_NODES_MAX 100000
#define TOPO_PART_WIRE_ROUTES_MAX 1000000 /* of one node: one per host of the whole network */

/* Packs part into pk: false when out of memory (pk's buffer may then hold
 * a partial map). */
bool topo_part_encode(const struct topo_part *part, msgpack_packer *pk);
/* Decodes len bytes (exactly one map) into out (zeroed first; the caller's
 * to free with topo_part_free, also on failure). -1 with one line in err
 * naming the field, the node or link and the value at fault. */
int topo_part_decode(const void *bytes, size_t len, struct topo_part *out, char *err,
                     size_t errlen);

/* A link's parameters alone, as a part's links carry them: the `link`
 * message's params (proto/agent_wire.h, op set). Pack: false when out of
 * memory. Read: every key required and checked as in a part; -1 with one
 * line in err ("part wire: link params: field 'loss': ..."). */
bool topo_part_params_pack(msgpack_packer *pk, const struct topo_link_params *p);
int topo_part_params_read(const msgpack_object *map, struct topo_link_params *out, char *err,
                          size_t errlen);
