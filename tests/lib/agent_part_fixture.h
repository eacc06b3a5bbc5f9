/* agent_part_fixture.h — what the drivers of a real agent over pipes
 * (netns.agent_build, netns.agent_ops) share: the network h1 - s1 - h2
 * (kernel backend, addressed), its part placed wholly on m1 in wire form
 * (or m1's part of a network over m1 and m2),
 * hello, and a peer's pid from the part's registry entry. Header only
 * (static functions); owns nothing past a call. */
#pragma once

#include "tests/lib/agent_pipe.h"
#include "topo/address.h"
#include "topo/part.h"
#include "topo/part_wire.h"

#include "hiernet_version.h"

#include <stdio.h>

/* h1 (0) - s1 (1, a switch) - h2 (2), links without parameters; NULL
 * with err on failure. */
static inline struct topo_network *agent_fixture_network(char *err, size_t errlen)
{
    struct topo_network *net = topo_network_new("net", TOPO_BACKEND_KERNEL, 1, err, errlen);
    struct topo_link_params lan = {0};
    if (!net) return NULL;
    int h1 = topo_node_add(net, "h1", TOPO_NODE_HOST, err, errlen);
    int s1 = topo_node_add(net, "s1", TOPO_NODE_SWITCH, err, errlen);
    int h2 = topo_node_add(net, "h2", TOPO_NODE_HOST, err, errlen);
    if (h1 != 0 || s1 != 1 || h2 != 2 || topo_link_add(net, h1, s1, &lan, err, errlen) < 0 ||
        topo_link_add(net, s1, h2, &lan, err, errlen) < 0 ||
        topo_assign_addresses(net, err, errlen) < 0) {
        topo_network_free(net);
        return NULL;
    }
    return net;
}

/* m1's part of net for run over n_machines machines (1 or 2: m1 at
 * 127.0.0.1, m2 at 127.0.0.2; pin nodes with their host field), encoded
 * into out; frees net. */
static inline int agent_fixture_part_over(struct topo_network *net, const char *run,
                                          uint32_t vni_base, size_t n_machines,
                                          msgpack_sbuffer *out, char *err, size_t errlen)
{
    struct topo_routing routing = {0};
    struct topo_machines machines = {0};
    struct topo_placement placement = {0};
    struct topo_part part = {0};
    uint32_t underlay[2] = {0x7f000001, 0x7f000002};
    uint8_t secret[TOPO_PART_SECRET_SIZE] = {7};
    struct topo_part_plan plan = {run, &placement, &machines, underlay, vni_base, secret, NULL};
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    int rc = net && topo_routing_compute(net, &routing, err, errlen) == 0 &&
                     topo_machines_add(&machines, "m1", "127.0.0.1", 1, err, errlen) == 0 &&
                     (n_machines < 2 ||
                      topo_machines_add(&machines, "m2", "127.0.0.2", 1, err, errlen) == 0) &&
                     topo_placement_compute(net, &machines, &placement, err, errlen) == 0 &&
                     topo_part_make(net, &routing, &plan, 0, &part, err, errlen) == 0 &&
                     topo_part_encode(&part, &pk)
                 ? 0
                 : -1;
    topo_part_free(&part);
    topo_placement_free(&placement);
    topo_machines_free(&machines);
    topo_routing_free(&routing);
    topo_network_free(net);
    return rc;
}

/* m1's part of net (all of it) for run, encoded into out; frees net. */
static inline int agent_fixture_part(struct topo_network *net, const char *run, uint32_t vni_base,
                                     msgpack_sbuffer *out, char *err, size_t errlen)
{
    return agent_fixture_part_over(net, run, vni_base, 1, out, err, errlen);
}

/* hello as m1 of run, answered without error within timeout_ms. */
static inline bool agent_fixture_hello(struct agent_pipe *a, const char *run, int timeout_ms)
{
    struct agent_hello h = {.clock_ns = 1};
    struct proto_msg m;
    snprintf(h.version, sizeof h.version, "%s", HIERNET_AGENT_VERSION);
    snprintf(h.run_id, sizeof h.run_id, "%s", run);
    snprintf(h.machine, sizeof h.machine, "m1");
    struct msgmap q;
    msgmap_init(&q);
    agent_wire_hello(&q, &h);
    uint32_t id = agent_pipe_request(a, AGENT_HELLO, &q);
    return id && agent_pipe_next(a, &m, timeout_ms) && m.kind == PROTO_RESPONSE && m.msgid == id &&
           m.error->type == MSGPACK_OBJECT_NIL;
}

/* The pid of node name's peer in registry entry dir, -1 when none. */
static inline pid_t agent_fixture_peer(const char *dir, const char *name)
{
    char path[700], net[64], node[64];
    snprintf(path, sizeof path, "%s/nodes", dir);
    FILE *f = fopen(path, "r");
    long pid, found = -1;
    unsigned long long start;
    unsigned long inode;
    while (f && fscanf(f, "%63s %63s %ld %llu %lu", net, node, &pid, &start, &inode) == 5)
        if (!strcmp(node, name)) found = pid;
    if (f) fclose(f);
    return (pid_t)found;
}
