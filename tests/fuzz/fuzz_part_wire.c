/* fuzz_part_wire.c — libFuzzer target for a part's wire decoder
 * (topo/part_wire.c), which an agent runs on what reaches its stdin: any
 * bytes either fail with one line or give a part whose links join two of
 * its nodes, whose routes leave by their node's links, and which encodes
 * back to bytes that decode to the same encoding. */
#include "topo/part_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_part(const struct topo_part *p)
{
    const struct topo_network *net = p->net;
    for (size_t l = 0; l < net->n_links; l++)
        if (net->links[l].a < 0 || (size_t)net->links[l].a >= net->n_nodes || net->links[l].b < 0 ||
            (size_t)net->links[l].b >= net->n_nodes)
            abort();
    for (size_t i = 0; i < p->routing.n_nodes; i++)
        for (size_t r = 0; r < p->routing.nodes[i].n_routes; r++) {
            const struct topo_link *l = &net->links[p->routing.nodes[i].routes[r].link];
            if (l->a != (int)i && l->b != (int)i) abort();
        }
}

static void check_encoding_stable(const struct topo_part *p)
{
    msgpack_sbuffer a, b;
    msgpack_packer pk;
    struct topo_part back;
    char err[512];
    msgpack_sbuffer_init(&a);
    msgpack_packer_init(&pk, &a, msgpack_sbuffer_write);
    if (!topo_part_encode(p, &pk)) abort();
    if (topo_part_decode(a.data, a.size, &back, err, sizeof err) < 0) abort();
    msgpack_sbuffer_init(&b);
    msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
    if (!topo_part_encode(&back, &pk)) abort();
    if (a.size != b.size || memcmp(a.data, b.data, a.size)) abort();
    topo_part_free(&back);
    msgpack_sbuffer_destroy(&a);
    msgpack_sbuffer_destroy(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    struct topo_part p;
    int rc = topo_part_decode(data, size, &p, err, sizeof err);
    if (rc < 0 && (!err[0] || strchr(err, '\n'))) abort();
    if (rc == 0) {
        check_part(&p);
        check_encoding_stable(&p);
    }
    topo_part_free(&p);
    return 0;
}
