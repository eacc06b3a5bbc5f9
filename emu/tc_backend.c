/* tc_backend.c — the kernel backend (see tc_backend.h). */
#include "emu/tc_backend.h"

#include "common/clock.h"
#include "emu/netns.h"
#include "emu/nl.h"
#include "emu/nl_vxlan.h"
#include "emu/tcp_sysctl.h"

#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/socket.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Interface numbers are chosen up front from each namespace's free ones
 * (emu_netns_ifindex_alloc: a new namespace may already hold fallback
 * tunnel devices), so no lookups are needed between creating a veth and
 * configuring it. A switch's bridge takes the first. */

struct emu_tc {
    const struct topo_network *net;
    const struct topo_routing *routing; /* the caller's; replayed when a link comes back up */
    struct emu_netns *ns;               /* one per node */
    int *ifindex_a, *ifindex_b;         /* per link: its ifindex in a's and b's namespace */
    int *bridge_ifindex;                /* per node: its bridge (switches) */
    struct topo_shape_plan *plan_a;     /* per link: what is installed on a's end (towards b) */
    struct topo_shape_plan *plan_b;
    struct emu_tc_options opts;
    bool shaped; /* qdiscs are ours to install (kernel backend) */
    struct emu_tc_timing timing;
    unsigned char **partitions; /* each: per node its group (1, 2) or 0; until healed */
    size_t n_partitions;
};

const struct emu_tc_timing *emu_tc_timing(const struct emu_tc *k)
{
    return &k->timing;
}

/* ---- allocation ---- */

static struct emu_tc *kernel_alloc(const struct topo_network *net)
{
    struct emu_tc *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    size_t nn = net->n_nodes ? net->n_nodes : 1, nl = net->n_links ? net->n_links : 1;
    k->net = net;
    k->ns = calloc(nn, sizeof *k->ns);
    k->ifindex_a = calloc(nl, sizeof *k->ifindex_a);
    k->ifindex_b = calloc(nl, sizeof *k->ifindex_b);
    k->plan_a = calloc(nl, sizeof *k->plan_a);
    k->plan_b = calloc(nl, sizeof *k->plan_b);
    k->bridge_ifindex = calloc(nn, sizeof *k->bridge_ifindex);
    if (!k->ns || !k->ifindex_a || !k->ifindex_b || !k->plan_a || !k->plan_b ||
        !k->bridge_ifindex) {
        emu_tc_destroy(k);
        return NULL;
    }
    for (size_t i = 0; i < nn; i++)
        k->ns[i].fd = -1;
    return k;
}

void emu_tc_destroy(struct emu_tc *k)
{
    if (!k) return;
    for (size_t i = 0; k->ns && i < k->net->n_nodes; i++)
        emu_netns_close(&k->ns[i]);
    free(k->ns);
    free(k->ifindex_a);
    free(k->ifindex_b);
    free(k->plan_a);
    free(k->plan_b);
    free(k->bridge_ifindex);
    for (size_t i = 0; i < k->n_partitions; i++)
        free(k->partitions[i]);
    free(k->partitions);
    free(k);
}

int emu_tc_node_ns(const struct emu_tc *k, int node)
{
    return k->ns[node].fd;
}

void emu_tc_link_ifindex(const struct emu_tc *k, int index, int *ifindex_a, int *ifindex_b)
{
    *ifindex_a = k->ifindex_a[index];
    *ifindex_b = k->ifindex_b[index];
}

/* A part's node of another machine (topo/part.h): no namespace here. */
static bool node_here(const struct emu_tc *k, int node)
{
    return !k->net->nodes[node].remote;
}

/* A host of this machine: routes, blackholes and TCP settings are its. */
static bool host_here(const struct emu_tc *k, int node)
{
    return k->net->nodes[node].kind == TOPO_NODE_HOST && node_here(k, node);
}

/* An end at a remote node gets no number: nothing is made for it here. */
static int ifindex_alloc(struct emu_tc *k, int node)
{
    return node_here(k, node) ? emu_netns_ifindex_alloc(&k->ns[node]) : 0;
}

static void number_interfaces(struct emu_tc *k)
{
    const struct topo_network *net = k->net;
    for (size_t i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == TOPO_NODE_SWITCH) k->bridge_ifindex[i] = ifindex_alloc(k, (int)i);
    for (size_t l = 0; l < net->n_links; l++) {
        k->ifindex_a[l] = ifindex_alloc(k, net->links[l].a);
        k->ifindex_b[l] = ifindex_alloc(k, net->links[l].b);
        /* A veth end whose ifindex equals its peer's looks to the kernel's
         * link watcher like a device without a lower link, whose carrier
         * changes it handles at most once a second: the end would drop
         * packets for up to a second after it came up. */
        if (k->ifindex_b[l] > 0 && k->ifindex_b[l] == k->ifindex_a[l])
            k->ifindex_b[l] = ifindex_alloc(k, net->links[l].b);
    }
}

/* ---- shaping plans ---- */

void emu_tc_shape_request(const struct topo_link_params *p, enum topo_shape_root root,
                          struct topo_shape_request *req)
{
    memset(req, 0, sizeof *req);
    req->rate_bps = p->rate_bps;
    req->delay_ns = p->delay_ns;
    req->jitter_ns = p->jitter_ns;
    req->loss = p->loss;
    req->queue = p->queue;
    req->root = root;
}

/* The plan of a link's qdiscs; an error names the link as `what` (NULL: the
 * cause only). */
static int plan_link(const struct emu_tc *k, const struct topo_link *link,
                     const struct topo_link_params *p, const char *what,
                     struct topo_shape_plan *plan, char *err, size_t errlen)
{
    struct topo_shape_request req;
    struct topo_link_params installed;
    char why[256];
    topo_link_params_install(k->net, link, p, &installed);
    emu_tc_shape_request(&installed, k->opts.root, &req);
    if (topo_shape_plan(&req, k->opts.have_netem, plan, why, sizeof why) < 0) {
        if (what)
            snprintf(err, errlen, "link %s: %s", what, why);
        else
            snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

/* ---- building ---- */

/* IPv6 is kept off per link end (emu_nl_link_conf.no_ipv6, in the request
 * that brings the end up), not with the namespace's conf/default sysctl:
 * every /proc/sys lookup walks one dentry per live namespace under the same
 * name, so a thousand namespaces paid a million compares under a global
 * lock, a tenth of the start's CPU. Every end is therefore made down and
 * brought up by our own request, after its IPv6 is off. */
static int create_namespaces(struct emu_tc *k, char *err, size_t errlen)
{
    unsigned flags = EMU_NETNS_SOCKET | EMU_NETNS_LO_UP | EMU_NETNS_FORWARDING;
    size_t here = 0, n = k->net->n_nodes;
    while (here < n && node_here(k, (int)here))
        here++;
    for (size_t i = here; i < n; i++)
        if (node_here(k, (int)i))
            return snprintf(err, errlen, "network '%s': node %s comes after remote nodes",
                            k->net->name, k->net->nodes[i].name),
                   -1; /* topo/part.h puts a part's remote nodes last */
    return emu_netns_create_many(k->ns, here, flags, 0, err, errlen);
}

/* The local end of cross-machine link l (topo/part.h) as a VXLAN device
 * in its node's namespace, made by sock, the machine's: down, like a veth
 * end, and numbered as one. */
static int create_vxlan_end(struct emu_tc *k, struct nl_sock *sock, size_t l, int underlay,
                            const char *underlay_name, char *err, size_t errlen)
{
    const struct topo_link *link = &k->net->links[l];
    bool at_a = node_here(k, link->a);
    struct emu_nl_vxlan v = {.name = at_a ? link->ifname_a : link->ifname_b,
                             .node_ns_fd = k->ns[at_a ? link->a : link->b].fd,
                             .ifindex = at_a ? k->ifindex_a[l] : k->ifindex_b[l],
                             .vni = link->vni,
                             .local = k->net->underlay_local,
                             .remote = link->underlay_remote,
                             .underlay_ifindex = underlay};
    char what[80], why[512];
    topo_link_describe(k->net, link, what, sizeof what);
    if (emu_nl_vxlan_add(sock, &v, underlay_name, why, sizeof why) == 0) return 0;
    /* EEXIST: the VNI is another run's on this machine (part.h) */
    return snprintf(err, errlen, "link %s: %s", what, why), -1;
}

static int create_vxlan_ends(struct emu_tc *k, struct nl_sock *sock, char *err, size_t errlen)
{
    int underlay = 0;
    char name[IF_NAMESIZE + 16];
    for (size_t l = 0; l < k->net->n_links; l++) {
        if (!k->net->links[l].vni) continue;
        if (!underlay) {
            char why[256];
            underlay = emu_nl_underlay_find(sock, k->net->underlay_local, name, sizeof name, why,
                                            sizeof why);
            if (underlay < 0)
                return snprintf(err, errlen, "network '%s': %s", k->net->name, why), -1;
        }
        if (create_vxlan_end(k, sock, l, underlay, name, err, errlen) < 0) return -1;
    }
    return 0;
}

/* The user backend's cut links ride linkd's UDP sockets, whose packets
 * are as large as a VXLAN device's (emu/linkd/underlay.h): the same
 * underlay and the same MTU rule as create_vxlan_ends, checked before
 * linkd makes anything. */
int emu_tc_underlay_check(const struct emu_tc *k, char *err, size_t errlen)
{
    size_t l = 0;
    while (l < k->net->n_links && !k->net->links[l].vni)
        l++;
    if (l == k->net->n_links) return 0;
    struct nl_sock *sock = emu_nl_open(err, errlen);
    if (!sock) return -1;
    char name[IF_NAMESIZE + 16], what[88], why[256];
    snprintf(what, sizeof what, "link ");
    topo_link_describe(k->net, &k->net->links[l], what + 5, sizeof what - 5);
    int underlay =
        emu_nl_underlay_find(sock, k->net->underlay_local, name, sizeof name, why, sizeof why);
    int mtu = underlay < 0 ? -1 : emu_nl_link_mtu(sock, underlay, name, why, sizeof why);
    int rc = mtu < 0 ? -1
                     : emu_vxlan_mtu_check(what, TOPO_VXLAN_INNER_MTU, name, (unsigned)mtu, why,
                                           sizeof why);
    emu_nl_close(sock);
    if (rc < 0) snprintf(err, errlen, "network '%s': %s", k->net->name, why);
    return rc;
}

/* Every veth from one host-namespace socket, both ends down: each comes up
 * with its configuration in its own namespace (add_link_end); a
 * cross-machine link's end here is a VXLAN device instead. */
static int create_veths(struct emu_tc *k, char *err, size_t errlen)
{
    const struct topo_network *net = k->net;
    struct nl_sock *sock = emu_nl_open(err, errlen);
    if (!sock) return -1;
    struct emu_nl_batch batch;
    emu_nl_batch_init(&batch, sock);
    for (size_t l = 0; l < net->n_links; l++) {
        const struct topo_link *link = &net->links[l];
        if (link->vni) continue; /* a cross-machine link: create_vxlan_ends */
        struct emu_nl_veth_end a = {k->ns[link->a].fd, link->ifname_a, k->ifindex_a[l]};
        struct emu_nl_veth_end b = {k->ns[link->b].fd, link->ifname_b, k->ifindex_b[l]};
        emu_nl_batch_add(&batch, emu_nl_veth_build(&a, &b, 0, 0), "link %s-%s",
                         net->nodes[link->a].name, net->nodes[link->b].name);
    }
    int rc = emu_nl_batch_run(&batch, err, errlen);
    emu_nl_batch_free(&batch);
    if (rc == 0) rc = create_vxlan_ends(k, sock, err, errlen);
    emu_nl_close(sock);
    return rc;
}

static int run_batch(struct emu_nl_batch *b, char *err, size_t errlen)
{
    int rc = emu_nl_batch_run(b, err, errlen);
    emu_nl_batch_free(b);
    return rc;
}

static void add_ipv6_off(struct emu_nl_batch *b, int ifindex, const char *node, const char *ifname)
{
    if (emu_nl_host_has_ipv6())
        emu_nl_batch_add(b, emu_nl_link_ipv6_off_build(ifindex), "node %s: IPv6 off on %s", node,
                         ifname);
}

/* A switch's namespace holds a bridge and its ports, no process and no
 * address: IPv6 goes off there for every device made afterwards
 * (conf/default/disable_ipv6), so neither the bridge nor its ports need a
 * request of their own for it, and the kernel keeps no IPv6 state for them
 * (no multicast route per port, whose table every port's up and down would
 * walk: quadratic at a thousand ports). One /proc/sys write per switch:
 * cheap, unlike one per namespace (see create_namespaces). */
static int switch_ipv6_off(struct emu_tc *k, int node, char *err, size_t errlen)
{
    int saved;
    char leave_err[256];
    if (!emu_nl_host_has_ipv6()) return 0;
    if (emu_netns_enter(k->ns[node].fd, &saved, err, errlen) < 0) return -1;
    int rc = emu_netns_sysctl_write("net/ipv6/conf/default/disable_ipv6", "1", err, errlen);
    if (emu_netns_leave(&saved, leave_err, sizeof leave_err) < 0) {
        snprintf(err, errlen, "%s", leave_err);
        rc = -1;
    }
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "switch %s: %s", k->net->nodes[node].name, err);
        snprintf(err, errlen, "%s", why);
    }
    return rc;
}

/* Bridges exist before any link, so an ifindex the kernel picks for a link
 * made by someone else (linkd's TAPs) cannot take a bridge's number. Each
 * is made down, in a namespace without IPv6, and comes up, before its
 * ports. */
static int create_bridges(struct emu_tc *k, char *err, size_t errlen)
{
    const struct topo_network *net = k->net;
    for (size_t i = 0; i < net->n_nodes; i++) {
        if (net->nodes[i].kind != TOPO_NODE_SWITCH || !node_here(k, (int)i)) continue;
        if (switch_ipv6_off(k, (int)i, err, errlen) < 0) return -1;
        struct emu_nl_batch b;
        struct emu_nl_link_conf up = {.ifindex = k->bridge_ifindex[i], .up = 1};
        emu_nl_batch_init(&b, k->ns[i].sock);
        emu_nl_batch_add(&b, emu_nl_bridge_build("bridge", -1, up.ifindex, 0), "switch %s: bridge",
                         net->nodes[i].name);
        emu_nl_batch_add(&b, emu_nl_link_node_conf_build(&up), "switch %s: bridge up",
                         net->nodes[i].name);
        if (run_batch(&b, err, errlen) < 0) return -1;
    }
    return 0;
}

/* One end of a link, at node: at a host, IPv6 off (a request of its own,
 * nl.h says why; a switch has none, see switch_ipv6_off), then in one request a host's end becomes
 * a router's interface, a switch's end a port of its bridge, and it comes up (both ends are made
 * down). Then a host's end gets its address. */
static void add_link_end(struct emu_tc *k, int node, int l, struct emu_nl_batch *b)
{
    const struct topo_network *net = k->net;
    const struct topo_link *link = &net->links[l];
    const char *name = net->nodes[node].name;
    bool is_a = link->a == node, host = net->nodes[node].kind == TOPO_NODE_HOST;
    int ifindex = is_a ? k->ifindex_a[l] : k->ifindex_b[l];
    const char *ifname = is_a ? link->ifname_a : link->ifname_b;
    uint32_t addr = is_a ? link->addr_a : link->addr_b;
    struct emu_nl_link_conf conf = {ifindex, host, host ? 0 : k->bridge_ifindex[node], 1};
    if (host) add_ipv6_off(b, ifindex, name, ifname);
    emu_nl_batch_add(b, emu_nl_link_node_conf_build(&conf), "node %s: %s%s", name, ifname,
                     host ? " as a router's interface" : " as a port");
    if (host && addr)
        emu_nl_batch_add(b, emu_nl_addr_build(ifindex, addr, link->prefix_len),
                         "node %s: address of %s", name, ifname);
}

static void add_link_ends(struct emu_tc *k, int node, struct emu_nl_batch *b)
{
    for (size_t l = 0; l < k->net->n_links; l++)
        if (k->net->links[l].a == node || k->net->links[l].b == node)
            add_link_end(k, node, (int)l, b);
}

static int link_ifindex_toward(const struct emu_tc *k, int link, int node)
{
    return k->net->links[link].a == node ? k->ifindex_a[link] : k->ifindex_b[link];
}

/* ALL_LINKS: every route of the list; otherwise (a reroute at run time on
 * the kernel backend) not those that leave by a link set down, which the
 * kernel refuses (their interface is down) and link up replays, except by
 * link `keep` (the moved one, which is up whatever the model says). */
#define ALL_LINKS (-2)

static void add_routes_but(struct emu_tc *k, int node, const struct topo_node_routes *nr,
                           int replace, int keep, struct emu_nl_batch *b)
{
    const struct topo_network *net = k->net;
    for (size_t i = 0; i < nr->n_routes; i++) {
        const struct topo_route *r = &nr->routes[i];
        if (keep != ALL_LINKS && k->shaped && r->link != keep && !net->links[r->link].up) continue;
        /* Sources are node addresses, so replies find their way back along
         * routes that only know node addresses. */
        struct emu_nl_route rt = {
            .dst = r->dst,
            .dst_len = r->dst_len,
            .gateway = r->gateway,
            .ifindex = link_ifindex_toward(k, r->link, node),
            .pref_src = net->nodes[node].node_addr,
            .rto_min_ms = topo_tcp_rto_min_metric_ms(&net->nodes[node].tcp, net->dilation),
            .init_cwnd = net->nodes[node].tcp.init_cwnd};
        snprintf(rt.cc, sizeof rt.cc, "%s", net->nodes[node].tcp.cc);
        char dst[TOPO_NAME_MAX] =
            "default"; /* a part's route to another machine's host: its address */
        if (r->dst_node >= 0)
            snprintf(dst, sizeof dst, "%s", net->nodes[r->dst_node].name);
        else if (r->dst_len)
            topo_addr_format(r->dst, dst, sizeof dst);
        emu_nl_batch_add(b, emu_nl_route_build(&rt, replace), "node %s: route to %s",
                         net->nodes[node].name, dst);
    }
}

static void add_routes(struct emu_tc *k, int node, const struct topo_node_routes *nr, int replace,
                       struct emu_nl_batch *b)
{
    add_routes_but(k, node, nr, replace, ALL_LINKS, b);
}

/* Shapes node's egress of every link it ends, from the link's parameters. */
static int add_shaping(struct emu_tc *k, int node, struct emu_nl_batch *b, char *err, size_t errlen)
{
    const struct topo_network *net = k->net;
    for (size_t l = 0; l < net->n_links; l++) {
        const struct topo_link *link = &net->links[l];
        if (link->a != node && link->b != node) continue;
        char what[80];
        topo_link_describe(net, link, what, sizeof what);
        struct topo_shape_plan *plan = link->a == node ? &k->plan_a[l] : &k->plan_b[l];
        if (plan_link(k, link, &link->params, what, plan, err, errlen) < 0) return -1;
        struct nl_msg *msgs[3];
        int n = emu_nl_shape_build(plan, link_ifindex_toward(k, (int)l, node), 0, msgs);
        if (n < 0) return snprintf(err, errlen, "link %s: out of memory", what), -1;
        for (int i = 0; i < n; i++)
            emu_nl_batch_add(b, msgs[i], "link %s: qdisc on %s's end", what, net->nodes[node].name);
    }
    return 0;
}

/* Pass 1: interfaces up, addresses, bridges. Routes need every link's far
 * end up (a gateway behind a link without carrier is refused), hence two passes. */
static int configure_interfaces(struct emu_tc *k, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &k->net->nodes[node];
    struct emu_nl_batch b;
    emu_nl_batch_init(&b, k->ns[node].sock);
    add_link_ends(k, node, &b);
    if (n->kind == TOPO_NODE_HOST)
        emu_nl_batch_add(&b, emu_nl_addr_build(EMU_NL_LOOPBACK_IFINDEX, n->node_addr, 32),
                         "node %s: node address", n->name);
    return run_batch(&b, err, errlen);
}

/* A host's TCP sysctls (topo/tcp.h), written inside its namespace, and
 * under dilation the TSO sizing that keeps its bursts the emulated size
 * (topo_tcp_tso_rtt_log): one more namespace write per host, only when
 * dilated. */
static int configure_tcp(struct emu_tc *k, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &k->net->nodes[node];
    int saved;
    char why[256];
    if (n->kind != TOPO_NODE_HOST) return 0;
    unsigned tso_rtt_log = topo_tcp_tso_rtt_log(k->net->dilation);
    if (!topo_tcp_any(&n->tcp) && !tso_rtt_log) return 0;
    if (emu_netns_enter(k->ns[node].fd, &saved, why, sizeof why) < 0)
        return snprintf(err, errlen, "node %s: %s", n->name, why), -1;
    int rc = emu_tcp_apply_sysctls(&n->tcp, tso_rtt_log, why, sizeof why);
    char leave_err[256];
    if (emu_netns_leave(&saved, leave_err, sizeof leave_err) < 0) {
        snprintf(why, sizeof why, "%s", leave_err);
        rc = -1;
    }
    if (rc < 0) snprintf(err, errlen, "node %s: tcp: %s", n->name, why);
    return rc;
}

/* Pass 2: routes, TCP settings and shaping. */
static int configure_routes(struct emu_tc *k, int node, const struct topo_routing *routing,
                            char *err, size_t errlen)
{
    if (configure_tcp(k, node, err, errlen) < 0) return -1;
    struct emu_nl_batch b;
    emu_nl_batch_init(&b, k->ns[node].sock);
    if (k->net->nodes[node].kind == TOPO_NODE_HOST)
        add_routes(k, node, &routing->nodes[node], 0, &b);
    if (k->shaped && add_shaping(k, node, &b, err, errlen) < 0) {
        emu_nl_batch_free(&b);
        return -1;
    }
    return run_batch(&b, err, errlen);
}

/* ---- waiting for the links to run ---- */

/* A link end counts once the kernel has it running: up, with carrier, and
 * processed by its link watcher, which is what attaches the end's qdiscs
 * and puts a bridge port into forwarding. That happens asynchronously after
 * "up" (on a busy host, seconds after), and until then the end drops every
 * packet: a start that returned earlier would lose a scenario's first
 * packets (a SYN retransmitted a second later, a ping that fails). */
#define RUNNING_TIMEOUT_S 10.0

struct running_check {
    const struct emu_tc *k;
    int node;
    int pending; /* link ends of node not running yet */
    int example; /* one of them, for the error */
};

static int link_end_at(const struct emu_tc *k, int node, int ifindex)
{
    for (size_t l = 0; l < k->net->n_links; l++) {
        const struct topo_link *link = &k->net->links[l];
        if ((link->a == node && k->ifindex_a[l] == ifindex) ||
            (link->b == node && k->ifindex_b[l] == ifindex))
            return (int)l;
    }
    return -1;
}

static void count_not_running(const char *name, int ifindex, unsigned flags, void *ctx)
{
    struct running_check *c = ctx;
    (void)name;
    if (flags & IFF_RUNNING) return;
    int link = link_end_at(c->k, c->node, ifindex);
    if (link < 0) return; /* lo, a bridge: not a link end */
    c->pending++;
    c->example = link;
}

static int not_running_error(struct emu_tc *k, int node, const struct running_check *c, char *err,
                             size_t errlen)
{
    char what[80];
    topo_link_describe(k->net, &k->net->links[c->example], what, sizeof what);
    return snprintf(err, errlen,
                    "link %s: node %s's end is not running %.0f s after it was set up "
                    "(%d such links there)",
                    what, k->net->nodes[node].name, RUNNING_TIMEOUT_S, c->pending),
           -1;
}

/* Sleeps until the kernel announces a link change in the watched namespace
 * (RTNLGRP_LINK) or `left` seconds pass, then drops the announcements: the
 * caller lists the links again. */
static void await_link_change(struct nl_sock *watch, double left)
{
    int fd = nl_socket_get_fd(watch);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) return;
    char buf[8192];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        continue;
}

/* Runs on a configure thread, never on the controller's loop. The common
 * case costs one listing: every end already runs. Otherwise a socket in the
 * node's namespace subscribes to its link announcements before the next
 * listing, so no change between the two is missed, and the thread sleeps
 * until one comes (no polling). */
static int wait_running(struct emu_tc *k, int node, char *err, size_t errlen)
{
    double deadline = mono_s() + RUNNING_TIMEOUT_S;
    struct nl_sock *watch = NULL;
    int rc;
    for (;;) {
        struct running_check c = {k, node, 0, -1};
        rc = emu_nl_link_list(k->ns[node].sock, count_not_running, &c, err, errlen);
        if (rc < 0 || c.pending == 0) break;
        if (!watch) {
            watch = emu_netns_nl_open(k->ns[node].fd, err, errlen);
            if (!watch) return -1;
            if (nl_socket_add_membership(watch, RTNLGRP_LINK) < 0) {
                emu_nl_close(watch);
                return snprintf(err, errlen, "node %s: cannot watch its links (RTNLGRP_LINK)",
                                k->net->nodes[node].name),
                       -1;
            }
            continue; /* subscribed: list again before sleeping */
        }
        double left = deadline - mono_s();
        if (left <= 0) {
            rc = not_running_error(k, node, &c, err, errlen);
            break;
        }
        await_link_change(watch, left);
    }
    if (watch) emu_nl_close(watch);
    return rc < 0 ? -1 : 0;
}

int emu_tc_create(const struct topo_network *net, const struct emu_tc_options *opts,
                  struct emu_tc **out, char *err, size_t errlen)
{
    struct emu_tc *k = kernel_alloc(net);
    if (!k) return snprintf(err, errlen, "network '%s': out of memory", net->name), -1;
    k->opts = *opts;
    double t0 = mono_s();
    if (create_namespaces(k, err, errlen) < 0) {
        emu_tc_destroy(k);
        return -1;
    }
    number_interfaces(k);
    if (create_bridges(k, err, errlen) < 0) {
        emu_tc_destroy(k);
        return -1;
    }
    k->timing.namespaces = mono_s() - t0;
    *out = k;
    return 0;
}

void emu_tc_set_options(struct emu_tc *k, const struct emu_tc_options *opts)
{
    k->opts = *opts;
}

void emu_tc_set_link_ifindex(struct emu_tc *k, int link, int ifindex_a, int ifindex_b)
{
    k->ifindex_a[link] = ifindex_a;
    k->ifindex_b[link] = ifindex_b;
}

/* ---- configuring nodes on several threads ----
 *
 * Every node has its own namespace socket and its own share of the plans,
 * so nodes can be configured side by side: the kernel work behind each
 * request (qdiscs, ports, routes) then runs on every core. */
#define CONFIGURE_THREADS_MAX 4

enum configure_pass { PASS_INTERFACES, PASS_ROUTES, PASS_RUNNING };

struct configure_job {
    struct emu_tc *k;
    enum configure_pass pass;
    size_t first, step; /* nodes first, first + step, ... */
    int rc;
    char err[512];
};

static void *configure_worker(void *p)
{
    struct configure_job *j = p;
    const struct topo_network *net = j->k->net;
    for (size_t i = j->first; i < net->n_nodes && j->rc == 0; i += j->step)
        j->rc = !node_here(j->k, (int)i) ? 0
                : j->pass == PASS_INTERFACES
                    ? configure_interfaces(j->k, (int)i, j->err, sizeof j->err)
                : j->pass == PASS_ROUTES
                    ? configure_routes(j->k, (int)i, j->k->routing, j->err, sizeof j->err)
                    : wait_running(j->k, (int)i, j->err, sizeof j->err);
    return NULL;
}

static int configure_pass(struct emu_tc *k, enum configure_pass pass, char *err, size_t errlen)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = cores > 1 ? (size_t)cores : 1;
    if (n > CONFIGURE_THREADS_MAX) n = CONFIGURE_THREADS_MAX;
    if (n > k->net->n_nodes / 16 + 1) n = k->net->n_nodes / 16 + 1; /* small nets: no threads */
    struct configure_job jobs[CONFIGURE_THREADS_MAX];
    pthread_t threads[CONFIGURE_THREADS_MAX];
    bool started[CONFIGURE_THREADS_MAX] = {false};
    for (size_t t = 0; t < n; t++) {
        jobs[t] = (struct configure_job){k, pass, t, n, 0, ""};
        /* Job 0 runs here; the others on threads (or here, if a thread cannot start). */
        started[t] = t > 0 && pthread_create(&threads[t], NULL, configure_worker, &jobs[t]) == 0;
    }
    configure_worker(&jobs[0]);
    for (size_t t = 1; t < n; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            configure_worker(&jobs[t]);
    }
    for (size_t t = 0; t < n; t++)
        if (jobs[t].rc < 0) return snprintf(err, errlen, "%s", jobs[t].err), -1;
    return 0;
}

int emu_tc_configure(struct emu_tc *k, const struct topo_routing *routing, bool shape, char *err,
                     size_t errlen)
{
    k->routing = routing;
    k->shaped = shape;
    double t0 = mono_s();
    if (configure_pass(k, PASS_INTERFACES, err, errlen) < 0) return -1;
    double t1 = mono_s();
    if (configure_pass(k, PASS_ROUTES, err, errlen) < 0) return -1;
    double t2 = mono_s();
    if (configure_pass(k, PASS_RUNNING, err, errlen) < 0) return -1;
    double t3 = mono_s();
    k->timing.interfaces = t1 - t0;
    k->timing.routes = t2 - t1;
    k->timing.running = t3 - t2;
    k->timing.configure = t3 - t0;
    return 0;
}

int emu_tc_add_veths(struct emu_tc *k, char *err, size_t errlen)
{
    double t0 = mono_s();
    int rc = create_veths(k, err, errlen);
    k->timing.links = mono_s() - t0;
    return rc;
}

int emu_tc_build(const struct topo_network *net, const struct topo_routing *routing,
                 const struct emu_tc_options *opts, struct emu_tc **out, char *err, size_t errlen)
{
    struct emu_tc *k;
    if (emu_tc_create(net, opts, &k, err, errlen) < 0) return -1;
    if (emu_tc_add_veths(k, err, errlen) < 0 ||
        emu_tc_configure(k, routing, true, err, errlen) < 0) {
        emu_tc_destroy(k);
        return -1;
    }
    *out = k;
    return 0;
}

/* ---- runtime ---- */

int emu_tc_link_set(struct emu_tc *k, int index, const struct topo_link_params *params, char *err,
                    size_t errlen)
{
    return emu_tc_link_set_dir(k, index, EMU_TC_BOTH, params, err, errlen);
}

int emu_tc_link_check(const struct emu_tc *k, const struct topo_link_params *params, char *err,
                      size_t errlen)
{
    struct topo_shape_plan plan;
    return plan_link(k, NULL, params, NULL, &plan, err, errlen);
}

/* Direction a to b is shaped by end a's egress qdiscs, b to a by end b's. */
int emu_tc_link_set_dir(struct emu_tc *k, int index, int dir, const struct topo_link_params *params,
                        char *err, size_t errlen)
{
    const struct topo_link *link = &k->net->links[index];
    struct topo_shape_plan to_a, to_b;
    /* The caller names the link (lua/l_link.c): the cause only. */
    if (plan_link(k, link, params, NULL, &to_a, err, errlen) < 0) return -1;
    to_b = to_a;
    if (dir != 1 && node_here(k, link->a)) { /* a remote end is shaped on its machine */
        if (emu_nl_shape_change(k->ns[link->a].sock, k->ifindex_a[index], link->ifname_a,
                                &k->plan_a[index], &to_a, err, errlen) < 0)
            return -1;
        k->plan_a[index] = to_a;
    }
    if (dir != 0 && node_here(k, link->b)) {
        if (emu_nl_shape_change(k->ns[link->b].sock, k->ifindex_b[index], link->ifname_b,
                                &k->plan_b[index], &to_b, err, errlen) < 0)
            return -1;
        k->plan_b[index] = to_b;
    }
    return 0;
}

/* node's blackholes towards every host of the other group of a partition
 * (replace: they take the place of host routes to those addresses). */
static void add_blackholes(struct emu_tc *k, int node, const unsigned char *side,
                           struct emu_nl_batch *b)
{
    const struct topo_network *net = k->net;
    for (size_t j = 0; j < net->n_nodes; j++) {
        if (!side[j] || side[j] == side[node] || net->nodes[j].kind != TOPO_NODE_HOST) continue;
        struct emu_nl_route rt = {.dst = net->nodes[j].node_addr, .dst_len = 32, .blackhole = 1};
        emu_nl_batch_add(b, emu_nl_route_build(&rt, 1), "node %s: blackhole to %s",
                         net->nodes[node].name, net->nodes[j].name);
    }
}

/* An interface that goes down takes the routes through it along; bringing
 * it back replays its two nodes' routes (replace: the others still exist),
 * and a partition's blackholes after them. keep: the link coming up (its
 * model still says down), or ALL_LINKS. */
static int replay_routes(struct emu_tc *k, int node, int keep, char *err, size_t errlen)
{
    if (!host_here(k, node)) return 0;
    struct emu_nl_batch b;
    emu_nl_batch_init(&b, k->ns[node].sock);
    add_routes_but(k, node, &k->routing->nodes[node], 1, keep, &b);
    for (size_t p = 0; p < k->n_partitions; p++)
        if (k->partitions[p][node]) add_blackholes(k, node, k->partitions[p], &b);
    return run_batch(&b, err, errlen);
}

static int partition_apply(struct emu_tc *k, const unsigned char *side, char *err, size_t errlen)
{
    for (size_t i = 0; i < k->net->n_nodes; i++) {
        if (!side[i] || !host_here(k, (int)i)) continue;
        struct emu_nl_batch b;
        emu_nl_batch_init(&b, k->ns[i].sock);
        add_blackholes(k, (int)i, side, &b);
        if (run_batch(&b, err, errlen) < 0) return -1;
    }
    return 0;
}

static bool touched_by(unsigned char *const *parts, size_t n_parts, size_t node)
{
    for (size_t p = 0; p < n_parts; p++)
        if (parts[p][node]) return true;
    return false;
}

/* Deletes node's blackholes, each once: partitions that overlap (the same
 * pair cut twice) installed one route, and a second delete of it would
 * fail and stop the heal halfway. cut: scratch of n_nodes bytes. */
static int heal_node(struct emu_tc *k, int node, unsigned char *const *parts, size_t n_parts,
                     unsigned char *cut, char *err, size_t errlen)
{
    const struct topo_network *net = k->net;
    memset(cut, 0, net->n_nodes);
    for (size_t p = 0; p < n_parts; p++)
        for (size_t j = 0; parts[p][node] && j < net->n_nodes; j++)
            if (parts[p][j] && parts[p][j] != parts[p][node]) cut[j] = 1;
    struct emu_nl_batch b;
    emu_nl_batch_init(&b, k->ns[node].sock);
    for (size_t j = 0; j < net->n_nodes; j++) {
        if (!cut[j] || net->nodes[j].kind != TOPO_NODE_HOST) continue;
        struct emu_nl_route rt = {.dst = net->nodes[j].node_addr, .dst_len = 32, .blackhole = 1};
        emu_nl_batch_add(&b, emu_nl_route_delete_build(&rt), "node %s: heal to %s",
                         net->nodes[node].name, net->nodes[j].name);
    }
    return run_batch(&b, err, errlen);
}

size_t emu_tc_partitions(const struct emu_tc *k)
{
    return k->n_partitions;
}

bool emu_tc_separated(const struct emu_tc *k, int a, int b)
{
    for (size_t p = 0; p < k->n_partitions; p++) {
        const unsigned char *side = k->partitions[p];
        if (side[a] && side[b] && side[a] != side[b]) return true;
    }
    return false;
}

/* Whether partition p cuts the same two groups as side (either way round). */
bool emu_tc_same_cut(const unsigned char *p, const unsigned char *side, size_t n)
{
    bool same = true, swapped = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char flip = side[i] ? (unsigned char)(3 - side[i]) : 0;
        same = same && p[i] == side[i];
        swapped = swapped && p[i] == flip;
    }
    return same || swapped;
}

int emu_tc_partition(struct emu_tc *k, const unsigned char *side, char *err, size_t errlen)
{
    if (!side) return emu_tc_heal(k, NULL, NULL, err, errlen);
    size_t n = k->net->n_nodes;
    unsigned char *copy = malloc(n);
    unsigned char **grown = realloc(k->partitions, (k->n_partitions + 1) * sizeof *grown);
    if (!copy || !grown) {
        free(copy);
        if (grown) k->partitions = grown;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(copy, side, n);
    k->partitions = grown;
    k->partitions[k->n_partitions++] = copy;
    return partition_apply(k, side, err, errlen);
}

/* Moves the partitions that match (every one when match is NULL) out of
 * k's list into *out; returns how many moved, -1 when out of memory. */
static ssize_t take_partitions(struct emu_tc *k, const unsigned char *match, unsigned char ***out)
{
    unsigned char **taken = malloc((k->n_partitions ? k->n_partitions : 1) * sizeof *taken);
    if (!taken) return -1;
    size_t n_taken = 0, n_kept = 0;
    for (size_t p = 0; p < k->n_partitions; p++) {
        if (!match || emu_tc_same_cut(k->partitions[p], match, k->net->n_nodes))
            taken[n_taken++] = k->partitions[p];
        else
            k->partitions[n_kept++] = k->partitions[p];
    }
    k->n_partitions = n_kept;
    *out = taken;
    return (ssize_t)n_taken;
}

int emu_tc_heal(struct emu_tc *k, const unsigned char *side, size_t *healed, char *err,
                size_t errlen)
{
    /* The healed partitions' blackholes go, then every node they touched
     * gets its routes back (replay adds the blackholes of the partitions
     * that stay, which a shared route deleted here had served too). */
    size_t n = k->net->n_nodes;
    unsigned char **was;
    ssize_t n_was = take_partitions(k, side, &was);
    unsigned char *cut = malloc(n ? n : 1);
    int rc = n_was >= 0 && cut ? 0 : (snprintf(err, errlen, "out of memory"), -1);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!touched_by(was, (size_t)n_was, i) || !host_here(k, (int)i)) continue;
        rc = heal_node(k, (int)i, was, (size_t)n_was, cut, err, errlen);
        if (rc == 0) rc = replay_routes(k, (int)i, ALL_LINKS, err, errlen);
    }
    free(cut);
    for (ssize_t p = 0; p < n_was; p++)
        free(was[p]);
    if (n_was >= 0) free(was);
    if (healed) *healed = n_was > 0 ? (size_t)n_was : 0;
    return rc;
}

/* ---- a link end that moves (handover) ---- */

/* Shapes node's egress of link l (a moved end has lost its qdiscs). */
static int shape_link_end(struct emu_tc *k, int node, int l, struct emu_nl_batch *b, char *err,
                          size_t errlen)
{
    const struct topo_link *link = &k->net->links[l];
    char what[80];
    topo_link_describe(k->net, link, what, sizeof what);
    struct topo_shape_plan *plan = link->a == node ? &k->plan_a[l] : &k->plan_b[l];
    if (plan_link(k, link, &link->params, what, plan, err, errlen) < 0) return -1;
    struct nl_msg *msgs[3];
    int n = emu_nl_shape_build(plan, link_ifindex_toward(k, l, node), 0, msgs);
    if (n < 0) return snprintf(err, errlen, "link %s: out of memory", what), -1;
    for (int i = 0; i < n; i++)
        emu_nl_batch_add(b, msgs[i], "link %s: qdisc on %s's end", what, k->net->nodes[node].name);
    return 0;
}

int emu_tc_link_move(struct emu_tc *k, int l, bool end_a, int from, char *err, size_t errlen)
{
    const struct topo_link *link = &k->net->links[l];
    int to = end_a ? link->a : link->b, stays = end_a ? link->b : link->a;
    int *ifindex = end_a ? &k->ifindex_a[l] : &k->ifindex_b[l];
    const char *ifname = end_a ? link->ifname_a : link->ifname_b;
    int new_ifindex = emu_netns_ifindex_alloc(&k->ns[to]);
    struct emu_nl_batch b;
    emu_nl_batch_init(&b, k->ns[from].sock);
    emu_nl_batch_add(&b, emu_nl_link_move_build(*ifindex, k->ns[to].fd, new_ifindex, ifname),
                     "node %s: move its end of the link to %s to node %s", k->net->nodes[from].name,
                     k->net->nodes[stays].name, k->net->nodes[to].name);
    if (run_batch(&b, err, errlen) < 0) return -1;
    *ifindex = new_ifindex;
    emu_nl_batch_init(&b, k->ns[to].sock);
    add_link_end(k, to, l, &b);
    if (k->shaped && shape_link_end(k, to, l, &b, err, errlen) < 0) {
        emu_nl_batch_free(&b);
        return -1;
    }
    if (run_batch(&b, err, errlen) < 0) return -1;
    /* the end that stayed may have been set down for the gap */
    int stays_ifindex = end_a ? k->ifindex_b[l] : k->ifindex_a[l];
    const char *stays_ifname = end_a ? link->ifname_b : link->ifname_a;
    if (emu_nl_link_set_up(k->ns[stays].sock, stays_ifindex, 1, stays_ifname, err, errlen) < 0)
        return -1;
    if (wait_running(k, to, err, errlen) < 0) return -1;
    return wait_running(k, stays, err, errlen);
}

/* A host route to node `to` along node's path now. An old host route to
 * it (of a routing before the move, or of an earlier reroute) would
 * otherwise stay, pointing where `to` was; other destinations' paths do not
 * change when a leaf moves, so that route is the only one that can go stale. */
static void add_route_to(struct emu_tc *k, int node, int to, int keep, struct emu_nl_batch *b)
{
    struct topo_route host;
    if (!topo_route_host_to(k->net, &k->routing->nodes[node], to, &host)) return;
    struct topo_node_routes one = {&host, 1};
    add_routes_but(k, node, &one, 1, keep, b);
}

int emu_tc_reroute(struct emu_tc *k, int moved, int leaf, char *err, size_t errlen)
{
    for (size_t i = 0; i < k->net->n_nodes; i++) {
        if (!host_here(k, (int)i)) continue;
        struct emu_nl_batch b;
        emu_nl_batch_init(&b, k->ns[i].sock);
        add_routes_but(k, (int)i, &k->routing->nodes[i], 1, moved, &b);
        if ((int)i != leaf) add_route_to(k, (int)i, leaf, moved, &b);
        for (size_t p = 0; p < k->n_partitions; p++)
            if (k->partitions[p][i]) add_blackholes(k, (int)i, k->partitions[p], &b);
        if (run_batch(&b, err, errlen) < 0) return -1;
    }
    return 0;
}

int emu_tc_routes_put(struct emu_tc *k, const struct topo_route_change *changes, size_t n,
                      int moved, char *err, size_t errlen)
{
    for (size_t i = 0, end; i < n; i = end) {
        int node = changes[i].node;
        for (end = i; end < n && changes[end].node == node; end++)
            ;
        if (!host_here(k, node)) continue;
        struct emu_nl_batch b;
        emu_nl_batch_init(&b, k->ns[node].sock);
        for (size_t c = i; c < end; c++) {
            struct topo_node_routes one = {(struct topo_route *)&changes[c].route, 1};
            add_routes_but(k, node, &one, 1, moved, &b);
        }
        for (size_t p = 0; p < k->n_partitions; p++)
            if (k->partitions[p][node]) add_blackholes(k, node, k->partitions[p], &b);
        if (run_batch(&b, err, errlen) < 0) return -1;
    }
    return 0;
}

int emu_tc_link_updown(struct emu_tc *k, int index, bool up, char *err, size_t errlen)
{
    const struct topo_link *link = &k->net->links[index];
    if ((node_here(k, link->a) && emu_nl_link_set_up(k->ns[link->a].sock, k->ifindex_a[index], up,
                                                     link->ifname_a, err, errlen) < 0) ||
        (node_here(k, link->b) && emu_nl_link_set_up(k->ns[link->b].sock, k->ifindex_b[index], up,
                                                     link->ifname_b, err, errlen) < 0))
        return -1;
    if (!up) return 0;
    if (replay_routes(k, link->a, index, err, errlen) < 0) return -1;
    return replay_routes(k, link->b, index, err, errlen);
}
