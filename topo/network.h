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

#define TOPO_NAME_MAX 32 /* bytes, NUL included */

enum topo_backend { TOPO_BACKEND_NONE, TOPO_BACKEND_AUTO, TOPO_BACKEND_KERNEL, TOPO_BACKEND_USER };
enum topo_node_kind { TOPO_NODE_HOST, TOPO_NODE_SWITCH };

struct topo_node {
    char name[TOPO_NAME_MAX];
    char tier[TOPO_NAME_MAX]; /* free-form label: terminal, edge, cloud, ... */
    enum topo_node_kind kind;
    double cpu;    /* share of one core, 0 = unlimited */
    double speed;  /* compute speed factor, 1 = this host */
    int threads;   /* OpenBLAS threads of the peer */
    char device[8]; /* "cpu" or "cuda" */
    char addr[16]; /* node address, dotted quad, set by the backend */
};

struct topo_network {
    char name[TOPO_NAME_MAX];
    enum topo_backend backend;
    uint64_t seed;
    struct topo_node *nodes;
    size_t n_nodes, cap_nodes;
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
/* Backend none: host i gets 127.0.0.(2 + i) and onwards through 127.0.x.y,
 * so every peer has its own data-plane address without privileges. */
int topo_assign_loopback_addresses(struct topo_network *net, char *err, size_t errlen);
/* The network as a JSON object for run.json. */
void topo_network_write_json(const struct topo_network *net, FILE *f);
