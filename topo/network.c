/* network.c — the topology model (see network.h). */
#include "topo/network.h"
#include "proto/link_keys.h"
#include "topo/shape.h"
#include "common/quote.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool name_char_ok(char c)
{
    return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

int topo_name_check(const char *what, const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    bool ok = n > 0 && n < TOPO_NAME_MAX && name_char_ok(name[0]) && name[0] != '.' &&
              name[0] != '-' && name[0] != '_';
    for (size_t i = 0; ok && i < n; i++)
        ok = name_char_ok(name[i]);
    if (ok) return 0;
    char quoted[96]; /* long enough to show a name that is too long */
    snprintf(err, errlen,
             "%s name '%s' is invalid: use 1 to %d letters, digits, '_', '-' or '.', starting "
             "with a letter or digit",
             what, quote_printable(name, quoted, sizeof quoted), TOPO_NAME_MAX - 1);
    return -1;
}

static const char *const backend_names[] = {"none", "auto", "kernel", "user"};

int topo_backend_parse(const char *s, enum topo_backend *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof backend_names / sizeof *backend_names; i++) {
        if (strcmp(s, backend_names[i]) == 0) {
            *out = (enum topo_backend)i;
            return 0;
        }
    }
    snprintf(err, errlen, "unknown backend '%s' (expected none, auto, kernel or user)", s);
    return -1;
}

const char *topo_backend_name(enum topo_backend b)
{
    return backend_names[b];
}

struct topo_network *topo_network_new(const char *name, enum topo_backend backend, uint64_t seed,
                                      char *err, size_t errlen)
{
    if (topo_name_check("network", name, err, errlen) < 0) return NULL;
    struct topo_network *net = calloc(1, sizeof *net);
    if (!net) {
        snprintf(err, errlen, "network '%s': out of memory", name);
        return NULL;
    }
    snprintf(net->name, sizeof net->name, "%s", name);
    net->backend = backend;
    net->seed = seed;
    net->dilation = 1.0;
    net->addr_base = 0x0a000000; /* 10.0.0.0/8 */
    net->addr_prefix_len = 8;
    return net;
}

void topo_network_free(struct topo_network *net)
{
    if (!net) return;
    free(net->nodes);
    free(net->links);
    free(net);
}

int topo_node_find(const struct topo_network *net, const char *name)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        if (strcmp(net->nodes[i].name, name) == 0) return (int)i;
    return -1;
}

static int grow_nodes(struct topo_network *net)
{
    if (net->n_nodes < net->cap_nodes) return 0;
    size_t cap = net->cap_nodes ? net->cap_nodes * 2 : 16;
    struct topo_node *grown = realloc(net->nodes, cap * sizeof *grown);
    if (!grown) return -1;
    net->nodes = grown;
    net->cap_nodes = cap;
    return 0;
}

int topo_node_add(struct topo_network *net, const char *name, enum topo_node_kind kind, char *err,
                  size_t errlen)
{
    if (topo_name_check("node", name, err, errlen) < 0) return -1;
    if (topo_node_find(net, name) >= 0) {
        snprintf(err, errlen, "network '%s': duplicate node '%s'", net->name, name);
        return -1;
    }
    if (grow_nodes(net) < 0) {
        snprintf(err, errlen, "network '%s': out of memory adding node '%s'", net->name, name);
        return -1;
    }
    struct topo_node *n = &net->nodes[net->n_nodes];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    n->kind = kind;
    n->segment = -1;
    n->speed = 1.0;
    n->threads = 1;
    snprintf(n->device, sizeof n->device, "cpu");
    return (int)net->n_nodes++;
}

int topo_link_param_set(struct topo_link_params *p, const char *name, const char *value, char *err,
                        size_t errlen)
{
#define PARSE_KEY(key, field, parse, unit)                                                         \
    if (strcmp(name, #key) == 0) return parse(value, &p->field, err, errlen);
    TOPO_LINK_TEXT_KEYS(PARSE_KEY)
#undef PARSE_KEY
    return -2;
}

void topo_link_params_install(const struct topo_network *net, const struct topo_link *link,
                              const struct topo_link_params *p, struct topo_link_params *out)
{
    topo_link_params_dilate(p, net->dilation, out);
    uint64_t underlay = link ? (uint64_t)link->underlay_delay_us * 1000 : 0;
    out->delay_ns = out->delay_ns > underlay ? out->delay_ns - underlay : 0;
}

void topo_link_params_dilate(const struct topo_link_params *p, double d,
                             struct topo_link_params *out)
{
    *out = *p;
    if (!(d > 1)) return;
    if (p->rate_bps) {
        double rate = (double)p->rate_bps / d;
        out->rate_bps = rate < 1 ? 1 : (uint64_t)llround(rate);
    }
    out->delay_ns = (uint64_t)llround((double)p->delay_ns * d);
    out->jitter_ns = (uint64_t)llround((double)p->jitter_ns * d);
    /* A shaped link without a queue gets the default one, a BDP of at
     * least 2 ms at its rate: the emulated link's, fixed in bytes here, since
     * 2 ms at rate / d would shrink it d times (at D = 24 a 10 Gbit/s link's
     * 2.5 MB became 151 kB, and its drops stretched the run's transfers). */
    if (p->rate_bps && !p->queue.packets && !p->queue.bytes)
        out->queue.bytes =
            topo_shape_default_queue_bytes(p->rate_bps, 2 * (p->delay_ns + p->jitter_ns),
                                           TOPO_SHAPE_DEFAULT_MTU + TOPO_SHAPE_ETH_HLEN);
}

void topo_link_describe(const struct topo_network *net, const struct topo_link *l, char *buf,
                        size_t len)
{
    if (l->parallel)
        snprintf(buf, len, "%s-%s#%d", net->nodes[l->a].name, net->nodes[l->b].name,
                 l->parallel + 1);
    else
        snprintf(buf, len, "%s-%s", net->nodes[l->a].name, net->nodes[l->b].name);
}

static int grow_links(struct topo_network *net)
{
    if (net->n_links < net->cap_links) return 0;
    size_t cap = net->cap_links ? net->cap_links * 2 : 16;
    struct topo_link *grown = realloc(net->links, cap * sizeof *grown);
    if (!grown) return -1;
    net->links = grown;
    net->cap_links = cap;
    return 0;
}

static int link_add(struct topo_network *net, int a, int b, const struct topo_link_params *params,
                    bool parallel, char *err, size_t errlen)
{
    const char *na = net->nodes[a].name, *nb = net->nodes[b].name;
    if (a == b) {
        snprintf(err, errlen, "link %s-%s: a node cannot be linked to itself", na, nb);
        return -1;
    }
    int siblings = 0;
    for (size_t i = 0; i < net->n_links; i++) {
        const struct topo_link *l = &net->links[i];
        if ((l->a == a && l->b == b) || (l->a == b && l->b == a)) siblings++;
    }
    if (siblings && !parallel) {
        snprintf(err, errlen,
                 "link %s-%s: the two nodes are already linked (parallel = true adds another)", na,
                 nb);
        return -1;
    }
    if (grow_links(net) < 0) {
        snprintf(err, errlen, "link %s-%s: out of memory", na, nb);
        return -1;
    }
    struct topo_link *l = &net->links[net->n_links];
    memset(l, 0, sizeof *l);
    l->a = a;
    l->b = b;
    l->parallel = siblings;
    l->params = *params;
    l->up = true;
    return (int)net->n_links++;
}

int topo_link_add(struct topo_network *net, int a, int b, const struct topo_link_params *params,
                  char *err, size_t errlen)
{
    return link_add(net, a, b, params, false, err, errlen);
}

int topo_link_add_parallel(struct topo_network *net, int a, int b,
                           const struct topo_link_params *params, char *err, size_t errlen)
{
    return link_add(net, a, b, params, true, err, errlen);
}

int topo_set_addr_base(struct topo_network *net, const char *cidr, char *err, size_t errlen)
{
    char ip[32];
    const char *slash = strchr(cidr, '/');
    size_t n = slash ? (size_t)(slash - cidr) : strlen(cidr);
    char *end = NULL;
    long prefix = slash ? strtol(slash + 1, &end, 10) : -1;
    struct in_addr in;
    if (n >= sizeof ip || !slash || *end || prefix < 1 || prefix > 24) goto bad;
    memcpy(ip, cidr, n);
    ip[n] = '\0';
    if (inet_pton(AF_INET, ip, &in) != 1) goto bad;
    uint32_t base = ntohl(in.s_addr);
    uint32_t mask = prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
    if (base & ~mask) {
        snprintf(err, errlen, "network '%s': addr_base '%s' has host bits set", net->name, cidr);
        return -1;
    }
    net->addr_base = base;
    net->addr_prefix_len = (uint8_t)prefix;
    return 0;
bad:
    snprintf(err, errlen,
             "network '%s': addr_base '%s' is not an IPv4 prefix like 10.0.0.0/8 (/1 to /24)",
             net->name, cidr);
    return -1;
}

void topo_addr_format(uint32_t addr, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
             addr & 255);
}

int topo_assign_loopback_addresses(struct topo_network *net, uint32_t *next, char *err,
                                   size_t errlen)
{
    for (size_t i = 0; i < net->n_nodes; i++) {
        struct topo_node *n = &net->nodes[i];
        n->addr[0] = '\0';
        n->node_addr = 0;
        if (n->kind != TOPO_NODE_HOST) continue;
        if ((*next & 0xff) == 0) (*next)++;    /* no .0 */
        if ((*next & 0xff) == 255) *next += 2; /* no .255, no .0 of the next /24 */
        if ((*next >> 24) != 127) {
            snprintf(err, errlen, "network '%s': too many nodes for 127.0.0.0/8", net->name);
            return -1;
        }
        n->node_addr = (*next)++;
        topo_addr_format(n->node_addr, n->addr, sizeof n->addr);
    }
    return 0;
}

void topo_json_write_string(FILE *f, const char *s)
{
    /* Names are validated to [A-Za-z0-9_.-]: no escaping needed; tiers are
     * free-form, so escape the two characters that could break the string. */
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

void topo_network_write_json(const struct topo_network *net, FILE *f)
{
    fputs("{\"name\": ", f);
    topo_json_write_string(f, net->name);
    fprintf(f,
            ", \"backend\": \"%s\", \"backend_requested\": \"%s\", \"seed\": %llu, "
            "\"dilation\": %g, \"nodes\": [",
            topo_backend_name(net->backend_used), topo_backend_name(net->backend),
            (unsigned long long)net->seed, net->dilation);
    for (size_t i = 0; i < net->n_nodes; i++) {
        const struct topo_node *n = &net->nodes[i];
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        topo_json_write_string(f, n->name);
        fprintf(f, ", \"kind\": \"%s\", \"tier\": ", n->kind == TOPO_NODE_HOST ? "host" : "switch");
        topo_json_write_string(f, n->tier);
        fputs(", \"addr\": ", f);
        topo_json_write_string(f, n->addr);
        fprintf(f, ", \"cpu\": %g, \"speed\": %g, \"threads\": %d, \"device\": \"%s\"", n->cpu,
                n->speed, n->threads, n->device);
        if (topo_tcp_any(&n->tcp)) { /* what its namespace's TCP ran with */
            fputs(", \"tcp\": ", f);
            topo_tcp_write_json(&n->tcp, f);
        }
        fputc('}', f);
    }
    fputs("], \"links\": [", f);
    for (size_t k = 0; k < net->n_links; k++) {
        const struct topo_link *l = &net->links[k];
        fprintf(f,
                "%s{\"a\": \"%s\", \"b\": \"%s\", \"bw_bps\": %llu, \"delay_us\": %.3f, "
                "\"jitter_us\": %.3f, \"loss\": %g, \"queue_packets\": %llu, "
                "\"queue_bytes\": %llu, \"reorder\": %s",
                k ? ", " : "", net->nodes[l->a].name, net->nodes[l->b].name,
                (unsigned long long)l->params.rate_bps, l->params.delay_ns / 1e3,
                l->params.jitter_ns / 1e3, l->params.loss,
                (unsigned long long)l->params.queue.packets,
                (unsigned long long)l->params.queue.bytes, l->params.reorder ? "true" : "false");
        if (l->params.ecn_threshold.packets || l->params.ecn_threshold.bytes)
            fprintf(f, ", \"ecn_threshold_packets\": %llu, \"ecn_threshold_bytes\": %llu",
                    (unsigned long long)l->params.ecn_threshold.packets,
                    (unsigned long long)l->params.ecn_threshold.bytes);
        if (l->parallel)
            fprintf(f, ", \"parallel\": %d}", l->parallel);
        else
            fputc('}', f);
    }
    fputs("]}", f);
}
