/* nl_link.c — veth pairs, bridges, ports, up/down, delete, lookup (see nl.h).
 *
 * A veth pair is created with each end directly in its own namespace: the
 * main end carries IFLA_NET_NS_FD, and so does the peer's ifinfomsg inside
 * VETH_INFO_PEER (libnl's veth module writes the peer's attributes there).
 * Nothing is created in the caller's namespace and then moved, which would
 * cost a second request per end and briefly expose the name to the host. */
#include "emu/nl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <net/if.h>
#include <linux/rtnetlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <linux/ip.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet.h>
#include <netlink/route/link/inet6.h>
#include <linux/if_link.h>
#include <pthread.h>
#include <unistd.h>
#include <netlink/route/link/veth.h>

/* The kernel's dev_valid_name(), checked here for a clearer message. */
static int link_name_check(const char *name, char *err, size_t errlen)
{
    size_t len = name ? strlen(name) : 0;

    if (len == 0 || len > EMU_NL_IFNAME_MAX) {
        snprintf(err, errlen, "bad interface name \"%s\": must be 1 to %d characters",
                 name ? name : "", EMU_NL_IFNAME_MAX);
        return -1;
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        snprintf(err, errlen, "bad interface name \"%s\"", name);
        return -1;
    }
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == ':' || isspace((unsigned char)*p) || !isprint((unsigned char)*p)) {
            snprintf(err, errlen, "bad interface name \"%s\": no '/', ':' or spaces allowed", name);
            return -1;
        }
    return 0;
}

/* Sets what both ends of a new veth take. One queue each way, asked for:
 * by default a veth gets one per possible CPU and the kernel then cuts
 * the real number down to one (veth_init_queues), and each cut waits for
 * an expedited RCU grace period. At 1000 links that wait was most of the
 * time the veths took (2 CPUs: 0.3-0.5 s), and the extra queues cost sysfs
 * objects at creation and teardown. One queue is what a veth uses anyway. */
static void link_configure(struct rtnl_link *link, const char *name, int ns_fd, int ifindex,
                           unsigned mtu, int up)
{
    rtnl_link_set_num_tx_queues(link, 1);
    rtnl_link_set_num_rx_queues(link, 1);
    rtnl_link_set_name(link, name);
    if (ns_fd >= 0) rtnl_link_set_ns_fd(link, ns_fd);
    if (ifindex > 0) rtnl_link_set_ifindex(link, ifindex);
    if (mtu > 0) rtnl_link_set_mtu(link, mtu);
    if (up) rtnl_link_set_flags(link, IFF_UP);
}

struct nl_msg *emu_nl_veth_build(const struct emu_nl_veth_end *a, const struct emu_nl_veth_end *b,
                                 unsigned mtu, int up)
{
    struct rtnl_link *link = rtnl_link_veth_alloc(), *peer;
    struct nl_msg *msg = NULL;

    if (!link) return NULL;
    peer = rtnl_link_veth_get_peer(link); /* takes a reference */
    link_configure(link, a->name, a->ns_fd, a->ifindex, mtu, up);
    /* Never the peer: the kernel opens it before the pair is joined, and
     * veth_open() then fails with ENOTCONN. */
    link_configure(peer, b->name, b->ns_fd, b->ifindex, mtu, 0);
    if (rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, &msg) < 0) msg = NULL;
    rtnl_link_put(peer);
    rtnl_link_put(link); /* frees the peer with it */
    return msg;
}

int emu_nl_veth_add(struct nl_sock *sock, const struct emu_nl_veth_end *a,
                    const struct emu_nl_veth_end *b, unsigned mtu, int up, char *err, size_t errlen)
{
    if (link_name_check(a->name, err, errlen) < 0 || link_name_check(b->name, err, errlen) < 0)
        return -1;
    return emu_nl_run(sock, emu_nl_veth_build(a, b, mtu, up), err, errlen, "create veth %s/%s",
                      a->name, b->name);
}

/* Built by hand: libnl's bridge type writes no IFLA_INFO_DATA. Multicast
 * snooping is off: an emulated switch floods multicast like a plain hub
 * does broadcasts, and each port of a snooping bridge gets query timers and
 * group state (a thousand ports' worth at start and again at teardown). */
struct nl_msg *emu_nl_bridge_build(const char *name, int ns_fd, int ifindex, int up)
{
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC,
                            .ifi_index = ifindex > 0 ? ifindex : 0,
                            .ifi_flags = up ? IFF_UP : 0,
                            .ifi_change = up ? IFF_UP : 0};
    struct nlattr *info, *data;
    if (!msg) return NULL;
    if (nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) < 0 ||
        nla_put_string(msg, IFLA_IFNAME, name) < 0 ||
        (ns_fd >= 0 && nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)ns_fd) < 0) ||
        !(info = nla_nest_start(msg, IFLA_LINKINFO)) ||
        nla_put_string(msg, IFLA_INFO_KIND, "bridge") < 0 ||
        !(data = nla_nest_start(msg, IFLA_INFO_DATA)) ||
        nla_put_u8(msg, IFLA_BR_MCAST_SNOOPING, 0) < 0) {
        nlmsg_free(msg);
        return NULL;
    }
    nla_nest_end(msg, data);
    nla_nest_end(msg, info);
    return msg;
}

int emu_nl_bridge_add(struct nl_sock *sock, const char *name, int ns_fd, int ifindex, int up,
                      char *err, size_t errlen)
{
    if (link_name_check(name, err, errlen) < 0) return -1;
    return emu_nl_run(sock, emu_nl_bridge_build(name, ns_fd, ifindex, up), err, errlen,
                      "create bridge %s", name);
}

/* RTM_NEWLINK without NLM_F_CREATE on an existing ifindex changes that link
 * (what `ip link set` sends); `edit` sets the change on the link object. */
static struct nl_msg *link_change_build(int ifindex, void (*edit)(struct rtnl_link *, int),
                                        int value)
{
    struct rtnl_link *link = rtnl_link_alloc();
    struct nl_msg *msg = NULL;

    if (!link) return NULL;
    rtnl_link_set_ifindex(link, ifindex);
    edit(link, value);
    if (rtnl_link_build_add_request(link, 0, &msg) < 0) msg = NULL;
    rtnl_link_put(link);
    return msg;
}

static void link_edit_master(struct rtnl_link *link, int master)
{
    rtnl_link_set_master(link, master);
}

static void link_edit_updown(struct rtnl_link *link, int up)
{
    if (up)
        rtnl_link_set_flags(link, IFF_UP);
    else
        rtnl_link_unset_flags(link, IFF_UP); /* ifi_change = IFF_UP, ifi_flags = 0 */
}

/* "veth0" or "ifindex 7" for messages. */
static const char *link_label(const char *name, int ifindex, char *buf, size_t buflen)
{
    if (name && *name) return name;
    snprintf(buf, buflen, "ifindex %d", ifindex);
    return buf;
}

static pthread_once_t ipv6_once = PTHREAD_ONCE_INIT;
static int ipv6_present;

static void ipv6_probe(void)
{
    ipv6_present = access("/proc/sys/net/ipv6", F_OK) == 0;
}

int emu_nl_host_has_ipv6(void)
{
    pthread_once(&ipv6_once, ipv6_probe);
    return ipv6_present;
}

struct nl_msg *emu_nl_link_node_conf_build(const struct emu_nl_link_conf *conf)
{
    struct rtnl_link *link = rtnl_link_alloc();
    struct nl_msg *msg = NULL;

    if (!link) return NULL;
    rtnl_link_set_ifindex(link, conf->ifindex);
    if (conf->router) {
        rtnl_link_inet_set_conf(link, IPV4_DEVCONF_FORWARDING, 1);
        rtnl_link_inet_set_conf(link, IPV4_DEVCONF_RP_FILTER, 0);
        rtnl_link_inet_set_conf(link, IPV4_DEVCONF_SEND_REDIRECTS, 0);
        rtnl_link_inet_set_conf(link, IPV4_DEVCONF_ACCEPT_REDIRECTS, 0);
    }
    if (conf->master_ifindex > 0) rtnl_link_set_master(link, conf->master_ifindex);
    if (conf->up) rtnl_link_set_flags(link, IFF_UP);
    if (rtnl_link_build_add_request(link, 0, &msg) < 0) msg = NULL;
    rtnl_link_put(link);
    return msg;
}

struct nl_msg *emu_nl_link_ipv6_off_build(int ifindex)
{
    struct rtnl_link *link = rtnl_link_alloc();
    struct nl_msg *msg = NULL;

    if (!link) return NULL;
    rtnl_link_set_ifindex(link, ifindex);
    if (rtnl_link_inet6_set_addr_gen_mode(link, IN6_ADDR_GEN_MODE_NONE) < 0 ||
        rtnl_link_build_add_request(link, 0, &msg) < 0)
        msg = NULL;
    rtnl_link_put(link);
    return msg;
}

struct nl_msg *emu_nl_link_master_build(int ifindex, int master_ifindex)
{
    return link_change_build(ifindex, link_edit_master, master_ifindex);
}

int emu_nl_link_set_master(struct nl_sock *sock, int ifindex, int master_ifindex, const char *name,
                           char *err, size_t errlen)
{
    char label[32];
    return emu_nl_run(sock, emu_nl_link_master_build(ifindex, master_ifindex), err, errlen,
                      "attach %s to bridge ifindex %d",
                      link_label(name, ifindex, label, sizeof label), master_ifindex);
}

struct nl_msg *emu_nl_link_updown_build(int ifindex, int up)
{
    return link_change_build(ifindex, link_edit_updown, up);
}

int emu_nl_link_set_up(struct nl_sock *sock, int ifindex, int up, const char *name, char *err,
                       size_t errlen)
{
    char label[32];
    return emu_nl_run(sock, emu_nl_link_updown_build(ifindex, up), err, errlen, "set %s %s",
                      link_label(name, ifindex, label, sizeof label), up ? "up" : "down");
}

/* RTM_NEWLINK on an existing device with IFLA_NET_NS_FD: the kernel moves
 * it (down, addresses and qdiscs gone) into that namespace, under new_name
 * and as new_ifindex there (IFLA_NEW_IFINDEX), so that no lookup is needed
 * afterwards. A veth keeps its peer, a TAP its file descriptor. */
struct nl_msg *emu_nl_link_move_build(int ifindex, int ns_fd, int new_ifindex, const char *new_name)
{
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex};
    if (!msg) return NULL;
    if (nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) < 0 ||
        nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)ns_fd) < 0 ||
        nla_put_string(msg, IFLA_IFNAME, new_name) < 0 ||
        (new_ifindex > 0 && nla_put_s32(msg, IFLA_NEW_IFINDEX, new_ifindex) < 0)) {
        nlmsg_free(msg);
        return NULL;
    }
    return msg;
}

struct nl_msg *emu_nl_link_delete_build(int ifindex)
{
    struct rtnl_link *link = rtnl_link_alloc();
    struct nl_msg *msg = NULL;

    if (!link) return NULL;
    rtnl_link_set_ifindex(link, ifindex);
    if (rtnl_link_build_delete_request(link, &msg) < 0) msg = NULL;
    rtnl_link_put(link);
    return msg;
}

int emu_nl_link_delete(struct nl_sock *sock, int ifindex, const char *name, char *err,
                       size_t errlen)
{
    char label[32];
    return emu_nl_run(sock, emu_nl_link_delete_build(ifindex), err, errlen, "delete %s",
                      link_label(name, ifindex, label, sizeof label));
}

static void link_on_reply(const struct nlmsghdr *reply, void *ctx)
{
    const struct ifinfomsg *ifi = NLMSG_DATA(reply);
    if (reply->nlmsg_type == RTM_NEWLINK && reply->nlmsg_len >= NLMSG_LENGTH(sizeof *ifi))
        *(int *)ctx = ifi->ifi_index;
}

int emu_nl_link_index(struct nl_sock *sock, const char *name, char *err, size_t errlen)
{
    char extack[EMU_NL_EXTACK_MAX];
    struct nl_msg *msg = NULL;
    int ifindex = 0, error;

    if (link_name_check(name, err, errlen) < 0) return -1;
    if (rtnl_link_build_get_request(0, name, &msg) < 0)
        return emu_nl_fail(err, errlen, -ENOMEM, NULL, "look up interface %s", name);
    error = emu_nl_request(sock, msg, link_on_reply, &ifindex, extack, sizeof extack);
    nlmsg_free(msg);
    if (error == 0 && ifindex <= 0) error = -ENODEV;
    if (error < 0) return emu_nl_fail(err, errlen, error, extack, "look up interface %s", name);
    return ifindex;
}

struct link_list {
    emu_nl_link_fn fn;
    void *ctx;
};

static void link_list_on_reply(const struct nlmsghdr *reply, void *ctx)
{
    struct link_list *list = ctx;
    const struct ifinfomsg *ifi = NLMSG_DATA(reply);
    struct nlattr *name;

    if (reply->nlmsg_type != RTM_NEWLINK || reply->nlmsg_len < NLMSG_LENGTH(sizeof *ifi)) return;
    name = nlmsg_find_attr((struct nlmsghdr *)reply, sizeof *ifi, IFLA_IFNAME);
    list->fn(name ? (const char *)nla_data(name) : "", ifi->ifi_index, ifi->ifi_flags, list->ctx);
}

int emu_nl_link_list(struct nl_sock *sock, emu_nl_link_fn fn, void *ctx, char *err, size_t errlen)
{
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    struct link_list list = {.fn = fn, .ctx = ctx};
    char extack[EMU_NL_EXTACK_MAX] = "";
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_DUMP);
    int error = -ENOMEM;

    if (msg && nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) == 0)
        error = emu_nl_request(sock, msg, link_list_on_reply, &list, extack, sizeof extack);
    if (msg) nlmsg_free(msg);
    return error < 0 ? emu_nl_fail(err, errlen, error, extack, "list interfaces") : 0;
}
