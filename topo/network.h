/* network.h — the topology model: a named network of host and switch nodes
 * with their options and addresses, independent of how it is realised.
 *
 * Backends (none, kernel, user) read this model to build the real thing.
 * Owns the node array; nodes are addressed by index, which stays stable. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/names.h"
#include "topo/tcp.h"
#include "topo/units.h"

#define TOPO_NAME_MAX (HN_NODE_NAME_MAX + 1) /* bytes, NUL included */
#define TOPO_IFNAME_MAX 16                   /* IFNAMSIZ */

enum topo_backend { TOPO_BACKEND_NONE, TOPO_BACKEND_AUTO, TOPO_BACKEND_KERNEL, TOPO_BACKEND_USER };
enum topo_node_kind { TOPO_NODE_HOST, TOPO_NODE_SWITCH };

struct topo_node {
    char name[TOPO_NAME_MAX];
    char tier[TOPO_NAME_MAX]; /* free-form label: terminal, edge, cloud, ... */
    enum topo_node_kind kind;
    double cpu;          /* share of one core, 0 = unlimited */
    double speed;        /* compute speed factor, 1 = this host */
    int threads;         /* OpenBLAS threads of the peer */
    char device[8];      /* "cpu" or "cuda" */
    char profile[256];   /* device profile (kernels/profile.h) of profiled compute; "" = none */
    char addr[16];       /* node address, dotted quad, set by the backend */
    uint32_t node_addr;  /* the same, host byte order (0 until assigned) */
    int segment;         /* switches: index of their L2 segment, else -1 */
    struct topo_tcp tcp; /* hosts: TCP settings of its namespace (zero: the kernel's) */
    char host[64];       /* the machine it is pinned to (net:node's host=), "" = placed freely */
    /* A part's node of another machine (topo/part.h): the far end of a
     * cross-machine link, kept for its name and addresses; nothing is made
     * or started for it on this machine. */
    bool remote;
};

/* What a link emulates, per direction (both directions alike). Zero rate
 * means unlimited; a zero queue means "size it from the bandwidth-delay
 * product". */
struct topo_link_params {
    uint64_t rate_bps;
    uint64_t delay_ns, jitter_ns;
    double loss; /* fraction 0..1 */
    struct topo_units_queue queue;
    /* Mark ECN-capable packets CE when the queue they join holds more than
     * this (packets or bytes; both 0: no marking, every packet drop-tail). */
    struct topo_units_queue ecn_threshold;
    bool reorder;
    /* Gilbert-Elliott burst loss instead of independent loss (user backend):
     * p = P(good -> bad), r = P(bad -> good), h / k = P(a packet gets
     * through) in the bad / good state. */
    bool gilbert;
    double ge_p, ge_r, ge_h, ge_k;
};

struct topo_link {
    int a, b;     /* node indices */
    int parallel; /* 0: the pair's first link; n: the n-th added beside it */
    struct topo_link_params params;
    bool up;
    /* set by topo_assign_addresses: */
    char ifname_a[TOPO_IFNAME_MAX], ifname_b[TOPO_IFNAME_MAX];
    uint32_t addr_a, addr_b; /* host byte order; 0 for a switch end */
    uint8_t prefix_len;
    /* A part's cross-machine link (topo/part.h), whose end at a remote node
     * is on another machine: its VXLAN network identifier and that
     * machine's underlay address (host order). 0: a link of one machine. */
    uint32_t vni;
    uint32_t underlay_remote;
    /* A cut link: the underlay's one-way delay between the two machines,
     * as measured (real time, µs; 0: none known). The underlay adds it to
     * every packet, so the backends install the link's delay less it
     * (topo_link_params_install). */
    uint32_t underlay_delay_us;
};

struct topo_network {
    char name[TOPO_NAME_MAX];
    enum topo_backend backend;      /* as asked (auto, ...) */
    enum topo_backend backend_used; /* what start chose; NONE before start */
    uint64_t seed;
    /* Time dilation, >= 1: the emulation runs this many times slower than
     * real time. Link parameters here are emulated; the backends install
     * topo_link_params_dilate()'s. */
    double dilation;
    struct topo_node *nodes;
    size_t n_nodes, cap_nodes;
    struct topo_link *links;
    size_t n_links, cap_links;
    uint32_t addr_base; /* host byte order */
    uint8_t addr_prefix_len;
    uint32_t node_block;    /* the block every node address is in (address plan) */
    uint8_t node_block_len; /* its prefix length; 0 before the plan */
    size_t n_segments;      /* L2 segments: connected groups of switches */
    /* A part (topo/part.h): the addresses above and the routes come with the
     * model, computed on the whole network; the build plans neither. */
    bool planned;
    uint32_t underlay_local; /* a part: this machine's underlay address (host order) */
};

/* Checks a node or network name: 1..31 of [A-Za-z0-9_.-], starting with a
 * letter or digit. On failure err names the value and the rule. */
int topo_name_check(const char *what, const char *name, char *err, size_t errlen);
int topo_backend_parse(const char *s, enum topo_backend *out, char *err, size_t errlen);
const char *topo_backend_name(enum topo_backend b);

struct topo_network *topo_network_new(const char *name, enum topo_backend backend, uint64_t seed,
                                      char *err, size_t errlen);
void topo_network_free(struct topo_network *net);
/* Adds a node with default options (speed 1, threads 1, device cpu). Names
 * are unique across hosts and switches. Returns its index or -1. */
int topo_node_add(struct topo_network *net, const char *name, enum topo_node_kind kind, char *err,
                  size_t errlen);
int topo_node_find(const struct topo_network *net, const char *name);
/* A host whose peer runs on this machine: not a switch, not a part's
 * remote node (topo/part.h). */
static inline bool topo_node_local_host(const struct topo_node *n)
{
    return n->kind == TOPO_NODE_HOST && !n->remote;
}
/* Adds a link between two nodes; a self-link or a second link between the
 * same pair is an error naming both nodes. Returns its index or -1. */
int topo_link_add(struct topo_network *net, int a, int b, const struct topo_link_params *params,
                  char *err, size_t errlen);
/* The same, but a pair already linked gets one more link beside the others
 * (bonded or multipath links, Mininet's multilink): interfaces, addresses
 * and parameters of its own. Routing takes the least delay, so the first
 * made of equal ones (route.c). */
int topo_link_add_parallel(struct topo_network *net, int a, int b,
                           const struct topo_link_params *params, char *err, size_t errlen);
/* Sets one link parameter from its text (the keys of TOPO_LINK_TEXT_KEYS,
 * proto/link_keys.h: bw, delay, jitter, loss, queue; units of docs/lua-api.md).
 * Returns -1 with err quoting the value, or -2
 * for an unknown key. */
int topo_link_param_set(struct topo_link_params *p, const char *key, const char *value, char *err,
                        size_t errlen);
/* What a backend installs for the emulated parameters p under dilation d
 * (>= 1): rates divided by d (at least 1 bit/s), delay and jitter multiplied
 * by d; loss, queue, reorder and burst loss as they are (a queue in bytes
 * or packets holds the same data). A shaped link without a queue gets the
 * default queue of its emulated rate and delay, in bytes (with a 1500-byte
 * MTU's frames for its floor): its floor of 2 ms at the rate would shrink d
 * times at the dilated rate. */
void topo_link_params_dilate(const struct topo_link_params *p, double d,
                             struct topo_link_params *out);
/* What a backend installs for link's parameters p (link: NULL for none):
 * topo_link_params_dilate's, with the delay less the link's underlay
 * delay, never below 0 (topo_part_check_underlay refuses a part whose
 * link asks for less than its underlay gives). */
void topo_link_params_install(const struct topo_network *net, const struct topo_link *link,
                              const struct topo_link_params *p, struct topo_link_params *out);
/* "a-b" for messages, "a-b#2" for the second of parallel links, ... */
void topo_link_describe(const struct topo_network *net, const struct topo_link *l, char *buf,
                        size_t len);
/* Parses "10.0.0.0/8" into net->addr_base / addr_prefix_len. */
int topo_set_addr_base(struct topo_network *net, const char *cidr, char *err, size_t errlen);
/* Formats a host-order IPv4 address. */
void topo_addr_format(uint32_t addr, char *buf, size_t len);

/* Backend none: every host gets its own loopback address, taken from *next
 * (host order, inside 127.0.0.0/8) onwards; *next moves past them, so the
 * networks of one run never share an address. */
int topo_assign_loopback_addresses(struct topo_network *net, uint32_t *next, char *err,
                                   size_t errlen);
/* A JSON string of s: '"' and '\\' escaped, control characters dropped. */
void topo_json_write_string(FILE *f, const char *s);
/* The network as a JSON object for run.json. */
void topo_network_write_json(const struct topo_network *net, FILE *f);
