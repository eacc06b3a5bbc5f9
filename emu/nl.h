/* nl.h — the rtnetlink layer of the kernel backend (libnl-3 / libnl-route-3).
 *
 * Provides, one module per job:
 *   nl.c        sockets, sending a request and checking its ack (with the
 *               kernel's extended-ack text), batches of requests
 *   nl_link.c   veth pairs placed straight into their namespaces, bridges,
 *               enslaving, link up/down, delete, ifindex lookup
 *   nl_addr.c   IPv4 addresses, the loopback node address
 *   nl_route.c  IPv4 routes (host, subnet, default; via a gateway)
 *   nl_qdisc.c  the qdisc trees of topo/shape.h: apply, change, clear
 *   nl_probe.c  which link types and qdiscs this kernel has
 *   nl_stats.c  every link's counters of a namespace (RTM_GETLINK stats64)
 *   nl_vxlan.c  a cross-machine link end as a VXLAN device (nl_vxlan.h)
 * Every request is built apart from being sent (emu_nl_*_build return an
 * nl_msg the caller may send alone or in a batch; unit tests check the bytes).
 *
 * Conventions: addresses are IPv4 in host byte order, as topo/network.h keeps
 * them (10.0.0.1 is 0x0a000001); every function returns 0 (or a non-negative value) on success and
 * -1 with a one-line message in err naming the object and the errno text.
 * Builders return NULL only when out of memory or given bad arguments. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "topo/shape.h"
#include "topo/tcp.h"

struct nl_sock;
struct nl_msg;

/* ---- nl.c: sockets, acks, batches ---- */

#define EMU_NL_EXTACK_MAX 128 /* kernel extended-ack messages are short */
#define EMU_NL_WHAT_MAX 80    /* the object a batched request is about */

/* An rtnetlink socket in the calling thread's current namespace, with
 * extended acks on and buffers big enough for a window of batched acks. */
struct nl_sock *emu_nl_open(char *err, size_t errlen);
void emu_nl_close(struct nl_sock *sock);

/* Sends one request with NLM_F_ACK and waits for its ack (seq and port
 * checked). Returns 0 or a negative errno; the kernel's extended-ack text, if
 * any, goes to extack. Does not take ownership of msg. */
int emu_nl_talk(struct nl_sock *sock, struct nl_msg *msg, char *extack, size_t extack_len);

/* The same for a request that also gets replies (a GET, or a dump with
 * NLM_F_DUMP, which ends with NLMSG_DONE instead of an ack): on_reply sees
 * every reply message, before the request completes. */
struct nlmsghdr;
typedef void (*emu_nl_reply_fn)(const struct nlmsghdr *reply, void *ctx);
int emu_nl_request(struct nl_sock *sock, struct nl_msg *msg, emu_nl_reply_fn on_reply, void *ctx,
                   char *extack, size_t extack_len);

/* Formats "<what>: <strerror(-error)>[ (<extack>)]" into err; returns -1. */
int emu_nl_fail(char *err, size_t errlen, int error, const char *extack, const char *what_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Sends msg and formats the failure naming what; frees msg in every case. */
int emu_nl_run(struct nl_sock *sock, struct nl_msg *msg, char *err, size_t errlen,
               const char *what_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Many requests on one socket: sent in windows of up to EMU_NL_WINDOW
 * messages per sendmsg(), every ack collected. The kernel carries on after a
 * failed request, so run() reports the first failure and the failure count. */
#define EMU_NL_WINDOW 64

struct emu_nl_batch_entry {
    struct nl_msg *msg;
    int error; /* 0 or negative errno once run */
    char what[EMU_NL_WHAT_MAX];
    char extack[EMU_NL_EXTACK_MAX];
};

struct emu_nl_batch {
    struct nl_sock *sock;
    struct emu_nl_batch_entry *entries;
    size_t count, capacity;
    int oom; /* an add failed: run() reports it */
};

void emu_nl_batch_init(struct emu_nl_batch *batch, struct nl_sock *sock);
/* Takes ownership of msg (NULL msg = a builder failed: recorded as ENOMEM). */
void emu_nl_batch_add(struct emu_nl_batch *batch, struct nl_msg *msg, const char *what_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends everything added; returns 0 when every request succeeded. */
int emu_nl_batch_run(struct emu_nl_batch *batch, char *err, size_t errlen);
/* Frees the messages; the batch may be reused after emu_nl_batch_init(). */
void emu_nl_batch_free(struct emu_nl_batch *batch);

/* ---- nl_link.c: links ---- */

#define EMU_NL_IFNAME_MAX 15 /* IFNAMSIZ - 1 */

/* One end of a veth pair. */
struct emu_nl_veth_end {
    int ns_fd;        /* namespace to create it in; -1 = the socket's own */
    const char *name; /* at most 15 characters */
    int ifindex;      /* ifindex to give it; 0 = the kernel picks */
};

/* A veth pair with each end created directly in its namespace
 * (IFLA_NET_NS_FD on the main end and inside VETH_INFO_PEER), with MTU
 * (0 = default) and, if up, end a administratively up. End b cannot be set
 * up in the same request (the kernel opens the peer before the pair is
 * joined: ENOTCONN), so bring it up from b's namespace, e.g. together with
 * its address: emu_nl_link_updown_build() and emu_nl_addr_build() in one
 * batch on that namespace's socket. */
struct nl_msg *emu_nl_veth_build(const struct emu_nl_veth_end *a, const struct emu_nl_veth_end *b,
                                 unsigned mtu, int up);
int emu_nl_veth_add(struct nl_sock *sock, const struct emu_nl_veth_end *a,
                    const struct emu_nl_veth_end *b, unsigned mtu, int up, char *err,
                    size_t errlen);

/* A Linux bridge in ns_fd (-1 = the socket's namespace). STP stays off, the
 * kernel's default, so a port forwards as soon as it is up. */
struct nl_msg *emu_nl_bridge_build(const char *name, int ns_fd, int ifindex, int up);
int emu_nl_bridge_add(struct nl_sock *sock, const char *name, int ns_fd, int ifindex, int up,
                      char *err, size_t errlen);

/* Makes ifindex a port of bridge master_ifindex (0 = release it). */
struct nl_msg *emu_nl_link_master_build(int ifindex, int master_ifindex);
int emu_nl_link_set_master(struct nl_sock *sock, int ifindex, int master_ifindex, const char *name,
                           char *err, size_t errlen);

/* Administrative up/down; name (may be NULL) only labels errors. */
struct nl_msg *emu_nl_link_updown_build(int ifindex, int up);
int emu_nl_link_set_up(struct nl_sock *sock, int ifindex, int up, const char *name, char *err,
                       size_t errlen);

/* Settings of a node's interface in one request: with router, its IPv4
 * devconf (IFLA_AF_SPEC) makes it a router's: forwarding on, no
 * reverse-path filter (routes may be asymmetric), neither sending nor
 * accepting ICMP redirects (a forwarding interface accepts one only if
 * conf/all does too, which the kernel ANDs; sending is ORed with conf/all,
 * left as it is: a redirect that nobody accepts changes nothing). Through
 * netlink rather than /proc/sys, where every lookup costs O(namespaces) in
 * the kernel (the dcache keeps one entry per namespace under each name).
 * master_ifindex (> 0) makes it a port of that bridge; up brings it up. */
struct emu_nl_link_conf {
    int ifindex;
    int router;
    int master_ifindex;
    int up;
};
struct nl_msg *emu_nl_link_node_conf_build(const struct emu_nl_link_conf *conf);
/* Keeps IPv6 quiet on a link: no link-local address (addr_gen_mode none),
 * hence no DAD, router solicitations or MLD reports on it. A request of its
 * own that must come before the one bringing the link up: the kernel
 * applies a request's IFLA_AF_SPEC after its flags, and an end whose peer
 * is up gets its link-local address at "up". NULL on a kernel without IPv6
 * (nothing to do) or when out of memory: check emu_nl_host_has_ipv6(). */
struct nl_msg *emu_nl_link_ipv6_off_build(int ifindex);
/* Whether this kernel has IPv6 at all. */
int emu_nl_host_has_ipv6(void);

/* Deletes a link (for a veth, both ends go). */
struct nl_msg *emu_nl_link_delete_build(int ifindex);
/* Moves device ifindex (of the socket's namespace) into namespace ns_fd,
 * renamed new_name, numbered new_ifindex there (0: the kernel picks). */
struct nl_msg *emu_nl_link_move_build(int ifindex, int ns_fd, int new_ifindex,
                                      const char *new_name);
int emu_nl_link_delete(struct nl_sock *sock, int ifindex, const char *name, char *err,
                       size_t errlen);

/* ifindex of name in the socket's namespace, or -1 (err says why). */
int emu_nl_link_index(struct nl_sock *sock, const char *name, char *err, size_t errlen);

/* Calls fn for every link of the socket's namespace (one dump request):
 * cheaper than a lookup per name when a namespace has many links. flags are
 * the link's IFF_* flags (IFF_RUNNING: up with carrier, and activated). */
typedef void (*emu_nl_link_fn)(const char *name, int ifindex, unsigned flags, void *ctx);
int emu_nl_link_list(struct nl_sock *sock, emu_nl_link_fn fn, void *ctx, char *err, size_t errlen);

/* ---- nl_stats.c: link counters ---- */

/* One link's counters as the kernel reports them (IFLA_STATS64). For a
 * veth end, tx_* count what this end handed to its peer (after this end's
 * qdiscs) and rx_* what the peer handed to it, so one end tells both
 * directions; *_dropped count what the veth could not hand over (the peer
 * down, its backlog full). flags are the IFF_* flags (IFF_LOWER_UP: the
 * peer end is up too). */
struct emu_nl_link_stats {
    int ifindex;
    unsigned flags;
    uint64_t rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped, tx_dropped;
};
typedef void (*emu_nl_link_stats_fn)(const struct emu_nl_link_stats *stats, void *ctx);

/* The dump request whose replies carry every link of the socket's
 * namespace with its counters. */
struct nl_msg *emu_nl_link_stats_build(void);
/* One reply of that dump: 0 and *out filled for an RTM_NEWLINK that holds
 * IFLA_STATS64, -1 for anything else. */
int emu_nl_link_stats_parse(const struct nlmsghdr *reply, struct emu_nl_link_stats *out);
/* Sends the dump and calls fn for every link it reports. Blocks until the
 * kernel has answered: call it off the event loop. */
int emu_nl_link_stats(struct nl_sock *sock, emu_nl_link_stats_fn fn, void *ctx, char *err,
                      size_t errlen);

/* ---- nl_addr.c: addresses ---- */

#define EMU_NL_LOOPBACK_IFINDEX 1 /* lo is ifindex 1 in every namespace */

struct nl_msg *emu_nl_addr_build(int ifindex, uint32_t addr, unsigned prefix_len);
int emu_nl_addr_add(struct nl_sock *sock, int ifindex, uint32_t addr, unsigned prefix_len,
                    const char *name, char *err, size_t errlen);

/* Brings ifindex up and, if addr != 0, gives it addr/prefix_len: both in
 * one sendmsg(). The usual second step for the b end of a new veth. */
int emu_nl_interface_up(struct nl_sock *sock, int ifindex, const char *name, uint32_t addr,
                        unsigned prefix_len, char *err, size_t errlen);

/* Brings lo up and, if node_addr != 0, gives it node_addr/32. */
int emu_nl_loopback_setup(struct nl_sock *sock, uint32_t node_addr, char *err, size_t errlen);

/* ---- nl_route.c: routes ---- */

struct emu_nl_route {
    uint32_t dst;             /* network */
    unsigned dst_len;         /* 32 = host route, 0 = default route */
    uint32_t gateway;         /* 0 = destination directly on ifindex */
    int ifindex;              /* outgoing interface; 0 = resolve from the gateway */
    uint32_t pref_src;        /* source for locally sent packets (the node address); 0 = any */
    int onlink;               /* gateway is on ifindex even without a covering subnet route */
    int blackhole;            /* drop what matches, silently (a partition); no next hop */
    unsigned rto_min_ms;      /* RTAX_RTO_MIN, locked (topo/tcp.h); 0 = the kernel's */
    unsigned init_cwnd;       /* RTAX_INITCWND; 0 = the kernel's */
    char cc[TOPO_TCP_CC_MAX]; /* RTAX_CC_ALGO; "" = the namespace's default */
};

/* replace: NLM_F_REPLACE instead of NLM_F_EXCL (re-routing at runtime). */
struct nl_msg *emu_nl_route_build(const struct emu_nl_route *route, int replace);
int emu_nl_route_add(struct nl_sock *sock, const struct emu_nl_route *route, int replace, char *err,
                     size_t errlen);
struct nl_msg *emu_nl_route_delete_build(const struct emu_nl_route *route);
int emu_nl_route_delete(struct nl_sock *sock, const struct emu_nl_route *route, char *err,
                        size_t errlen);

/* ---- nl_qdisc.c: shaping ---- */

/* The messages that install plan on ifindex's egress, in order (root, class,
 * leaf): at most 3. Returns how many, or -1 when out of memory (none left
 * allocated). change: modify the existing tree's parameters instead. */
int emu_nl_shape_build(const struct topo_shape_plan *plan, int ifindex, int change,
                       struct nl_msg *msgs[3]);

/* Installs plan (nothing for TOPO_SHAPE_LEAF_NONE). The interface must have
 * no root qdisc of ours yet. */
int emu_nl_shape_apply(struct nl_sock *sock, int ifindex, const char *name,
                       const struct topo_shape_plan *plan, char *err, size_t errlen);

/* Moves from plan `from` (what is installed) to `to` at runtime: a parameter
 * change when both have the same tree, else clear and apply. */
int emu_nl_shape_change(struct nl_sock *sock, int ifindex, const char *name,
                        const struct topo_shape_plan *from, const struct topo_shape_plan *to,
                        char *err, size_t errlen);

/* Whether the kernel knows qdisc `kind`: asks for one with empty options on
 * ifindex's root, which a known kind refuses as invalid (EINVAL) and an
 * unknown one as unknown (ENOENT). 0 when known, else -1 with why in err.
 * A kind that accepted empty options is removed again. */
int emu_nl_qdisc_kind_known(struct nl_sock *sock, int ifindex, const char *kind, char *err,
                            size_t errlen);

/* Removes the root qdisc (and so the whole tree); no tree is not an error. */
int emu_nl_shape_clear(struct nl_sock *sock, int ifindex, const char *name, char *err,
                       size_t errlen);

/* ---- nl_probe.c: kernel features ---- */

enum emu_nl_feature {
    EMU_NL_FEATURE_VETH,
    EMU_NL_FEATURE_BRIDGE,
    EMU_NL_FEATURE_TUN,
    EMU_NL_FEATURE_HTB,
    EMU_NL_FEATURE_TBF,
    EMU_NL_FEATURE_NETEM,
    EMU_NL_FEATURE_RED, /* a marking qdisc: what ecn_threshold would need on veths */
    EMU_NL_FEATURE_COUNT
};

struct emu_nl_features {
    int available[EMU_NL_FEATURE_COUNT];
    char reason[EMU_NL_FEATURE_COUNT][EMU_NL_EXTACK_MAX + 64]; /* why not, when not */
};

/* "veth", "bridge", "tun", "htb", "tbf", "netem", "red". */
const char *emu_nl_feature_name(enum emu_nl_feature feature);

/* Tries each feature in a scratch namespace that vanishes afterwards.
 * Returns -1 only when the probe cannot run at all (e.g. no CAP_SYS_ADMIN to
 * create a namespace); a missing feature is reported in features. */
int emu_nl_probe(struct emu_nl_features *features, char *err, size_t errlen);
