/* part_make.c — hn-part-make: the two parts of the cluster test's network,
 * encoded as the controller will (topo/part.h, topo/part_wire.h):
 *
 *   h1 -- s1 (switch)     on m1
 *         s1 -- h2        h2 on m2: the cut link, RATE_BPS, DELAY_US
 *
 *   hn-part-make OUT_DIR RUN_ID VNI_BASE RATE_BPS [BACKEND [DELAY_US [UNDERLAY_US]]]
 *
 * Writes OUT_DIR/m1.part and OUT_DIR/m2.part (machines m1 10.250.0.1 and
 * m2 10.250.0.2, tests/lib/cluster.sh's), and prints "h1 ADDR" and
 * "h2 ADDR", the hosts' node addresses, and "vni N" of the cut link.
 * BACKEND (default kernel) is the network's; DELAY_US (default 0) the
 * cut link's delay each way; UNDERLAY_US (default 0) the underlay's
 * one-way delay each part declares for its cut link, as the controller
 * will from its measurement.
 * Exit 0, or 1 with one line on stderr. Pure computation: no root. */
#include "topo/address.h"
#include "topo/part.h"
#include "topo/part_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

static char err[512];

static int node(struct topo_network *net, const char *name, enum topo_node_kind kind,
                const char *host)
{
    int i = topo_node_add(net, name, kind, err, sizeof err);
    if (i >= 0) snprintf(net->nodes[i].host, sizeof net->nodes[i].host, "%s", host);
    return i;
}

static struct topo_network *network(uint64_t rate, int64_t delay_us, enum topo_backend backend)
{
    struct topo_network *net = topo_network_new("net", backend, 1, err, sizeof err);
    struct topo_link_params lan = {0}, cut = {0};
    cut.rate_bps = rate;
    cut.delay_ns = delay_us * 1000;
    if (!net) return NULL;
    int h1 = node(net, "h1", TOPO_NODE_HOST, "m1"), s1 = node(net, "s1", TOPO_NODE_SWITCH, "m1");
    int h2 = node(net, "h2", TOPO_NODE_HOST, "m2");
    net->nodes[h1].cpu = 0.5; /* a cgroup, which the release must remove */
    if (h1 < 0 || s1 < 0 || h2 < 0 || topo_link_add(net, h1, s1, &lan, err, sizeof err) < 0 ||
        topo_link_add(net, s1, h2, &cut, err, sizeof err) < 0 ||
        topo_assign_addresses(net, err, sizeof err) < 0) {
        topo_network_free(net);
        return NULL;
    }
    return net;
}

static int write_part(const struct topo_part *p, const char *dir)
{
    char path[4096];
    msgpack_sbuffer buf;
    msgpack_packer pk;
    snprintf(path, sizeof path, "%s/%s.part", dir, p->machine);
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    FILE *f = topo_part_encode(p, &pk) ? fopen(path, "wb") : NULL;
    int rc = f && fwrite(buf.data, 1, buf.size, f) == buf.size ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc < 0) snprintf(err, sizeof err, "cannot write %s", path);
    msgpack_sbuffer_destroy(&buf);
    return rc;
}

static void declare_underlay(struct topo_part *part, uint32_t underlay_us)
{
    for (size_t l = 0; l < part->net->n_links; l++)
        if (part->net->links[l].vni) part->net->links[l].underlay_delay_us = underlay_us;
}

static int make_parts(struct topo_network *net, const char *dir, const char *run, uint32_t vni_base,
                      uint32_t underlay_us)
{
    struct topo_routing routing = {0};
    struct topo_machines machines = {0};
    struct topo_placement placement = {0};
    uint32_t underlay[2] = {0x0afa0001, 0x0afa0002}; /* 10.250.0.1, .2 */
    uint8_t secret[TOPO_PART_SECRET_SIZE];
    int rc = getrandom(secret, sizeof secret, 0) == (ssize_t)sizeof secret ? 0 : -1;
    if (rc == 0 && (topo_routing_compute(net, &routing, err, sizeof err) < 0 ||
                    topo_machines_add(&machines, "m1", "10.250.0.1", 1, err, sizeof err) < 0 ||
                    topo_machines_add(&machines, "m2", "10.250.0.2", 1, err, sizeof err) < 0 ||
                    topo_placement_compute(net, &machines, &placement, err, sizeof err) < 0))
        rc = -1;
    struct topo_part_plan plan = {run, &placement, &machines, underlay, vni_base, secret, NULL};
    for (size_t m = 0; rc == 0 && m < 2; m++) {
        struct topo_part part = {0};
        rc = topo_part_make(net, &routing, &plan, m, &part, err, sizeof err);
        if (rc == 0) declare_underlay(&part, underlay_us);
        if (rc == 0) rc = write_part(&part, dir);
        topo_part_free(&part);
    }
    if (rc == 0) printf("vni %u\n", topo_part_vni(vni_base, 0));
    topo_placement_free(&placement);
    topo_machines_free(&machines);
    topo_routing_free(&routing);
    return rc;
}

int main(int argc, char **argv)
{
    enum topo_backend backend = TOPO_BACKEND_KERNEL;
    if (argc < 5 || argc > 8 ||
        (argc >= 6 && topo_backend_parse(argv[5], &backend, err, sizeof err) < 0)) {
        fprintf(stderr, "usage: hn-part-make OUT_DIR RUN_ID VNI_BASE RATE_BPS [BACKEND [DELAY_US "
                        "[UNDERLAY_US]]]\n");
        return 2;
    }
    int64_t delay_us = argc >= 7 ? strtoll(argv[6], NULL, 10) : 0;
    uint32_t underlay_us = argc == 8 ? (uint32_t)strtoul(argv[7], NULL, 10) : 0;
    struct topo_network *net = network(strtoull(argv[4], NULL, 10), delay_us, backend);
    int rc =
        net ? make_parts(net, argv[1], argv[2], (uint32_t)strtoul(argv[3], NULL, 10), underlay_us)
            : -1;
    if (rc == 0)
        printf("h1 %s\nh2 %s\n", net->nodes[topo_node_find(net, "h1")].addr,
               net->nodes[topo_node_find(net, "h2")].addr);
    else
        fprintf(stderr, "hn-part-make: %s\n", err);
    topo_network_free(net);
    return rc == 0 ? 0 : 1;
}
