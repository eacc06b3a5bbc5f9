/* nl_vxlan.c — a cross-machine link end as a VXLAN device (see nl_vxlan.h).
 *
 * Built by hand, as the bridge is: libnl 3.7's vxlan module has no
 * namespace fd. One request does what `ip link add ... type vxlan` and
 * `ip link set netns` would do in two: the kernel creates the device in
 * the namespace of IFLA_NET_NS_FD but configures it in the sender's
 * (rtnl_newlink's source namespace), so IFLA_VXLAN_LINK names a device of
 * the machine's namespace and the UDP socket opens there. The node then
 * holds an Ethernet device and nothing of the underlay: it cannot see or
 * reach the machine's addresses. */
#include "emu/nl_vxlan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/link.h>

#include "emu/nl.h"

static int vxlan_valid(const struct emu_nl_vxlan *vxlan)
{
    size_t len = vxlan->name ? strlen(vxlan->name) : 0;
    return len > 0 && len <= EMU_NL_IFNAME_MAX && vxlan->vni >= 1 &&
           vxlan->vni <= TOPO_VXLAN_VNI_MAX && vxlan->underlay_ifindex > 0 && vxlan->remote != 0;
}

/* IFLA_INFO_DATA of kind "vxlan". Learning is off: the only destination
 * is the default (all-zeros) forwarding entry that IFLA_VXLAN_GROUP with a
 * unicast address makes, so every frame, broadcasts included, goes to the
 * other machine, and no entry is learnt from what arrives. */
static int vxlan_put_data(struct nl_msg *msg, const struct emu_nl_vxlan *vxlan)
{
    uint16_t port = vxlan->port ? vxlan->port : TOPO_VXLAN_PORT;

    return nla_put_u32(msg, IFLA_VXLAN_ID, vxlan->vni) < 0 ||
                   nla_put_u32(msg, IFLA_VXLAN_GROUP, htonl(vxlan->remote)) < 0 ||
                   (vxlan->local && nla_put_u32(msg, IFLA_VXLAN_LOCAL, htonl(vxlan->local)) < 0) ||
                   nla_put_u32(msg, IFLA_VXLAN_LINK, (uint32_t)vxlan->underlay_ifindex) < 0 ||
                   nla_put_u16(msg, IFLA_VXLAN_PORT, htons(port)) < 0 ||
                   nla_put_u8(msg, IFLA_VXLAN_LEARNING, 0) < 0
               ? -1
               : 0;
}

struct nl_msg *emu_nl_vxlan_build(const struct emu_nl_vxlan *vxlan)
{
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC,
                            .ifi_index = vxlan->ifindex > 0 ? vxlan->ifindex : 0};
    unsigned mtu = vxlan->mtu ? vxlan->mtu : TOPO_VXLAN_INNER_MTU;
    struct nlattr *info, *data;
    struct nl_msg *msg;

    if (!vxlan_valid(vxlan)) return NULL;
    msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    if (!msg) return NULL;
    if (nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) < 0 ||
        nla_put_string(msg, IFLA_IFNAME, vxlan->name) < 0 || nla_put_u32(msg, IFLA_MTU, mtu) < 0 ||
        nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)vxlan->node_ns_fd) < 0 ||
        !(info = nla_nest_start(msg, IFLA_LINKINFO)) ||
        nla_put_string(msg, IFLA_INFO_KIND, "vxlan") < 0 ||
        !(data = nla_nest_start(msg, IFLA_INFO_DATA)) || vxlan_put_data(msg, vxlan) < 0) {
        nlmsg_free(msg);
        return NULL;
    }
    nla_nest_end(msg, data);
    nla_nest_end(msg, info);
    return msg;
}

int emu_vxlan_mtu_check(const char *what, unsigned inner_mtu, const char *underlay_name,
                        unsigned underlay_mtu, char *err, size_t errlen)
{
    if (underlay_mtu >= inner_mtu + TOPO_VXLAN_OVERHEAD) return 0;
    snprintf(err, errlen,
             "%s: underlay %s has MTU %u, below the %u that a %u-byte packet needs "
             "over VXLAN (%d bytes of headers): raise the underlay's MTU",
             what, underlay_name, underlay_mtu, inner_mtu + TOPO_VXLAN_OVERHEAD, inner_mtu,
             TOPO_VXLAN_OVERHEAD);
    return -1;
}

static void mtu_on_reply(const struct nlmsghdr *reply, void *ctx)
{
    struct nlattr *mtu;

    if (reply->nlmsg_type != RTM_NEWLINK ||
        reply->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
        return;
    mtu = nlmsg_find_attr((struct nlmsghdr *)reply, sizeof(struct ifinfomsg), IFLA_MTU);
    if (mtu && nla_len(mtu) >= (int)sizeof(uint32_t)) *(int *)ctx = (int)nla_get_u32(mtu);
}

int emu_nl_link_mtu(struct nl_sock *sock, int ifindex, const char *name, char *err, size_t errlen)
{
    char extack[EMU_NL_EXTACK_MAX] = "";
    struct nl_msg *msg = NULL;
    int mtu = 0, error;

    if (rtnl_link_build_get_request(ifindex, NULL, &msg) < 0)
        return emu_nl_fail(err, errlen, -ENOMEM, NULL, "MTU of %s", name);
    error = emu_nl_request(sock, msg, mtu_on_reply, &mtu, extack, sizeof extack);
    nlmsg_free(msg);
    if (error == 0 && mtu <= 0) error = -ENODEV;
    if (error < 0) return emu_nl_fail(err, errlen, error, extack, "MTU of %s", name);
    return mtu;
}

int emu_nl_vxlan_add(struct nl_sock *machine_sock, const struct emu_nl_vxlan *vxlan,
                     const char *underlay_name, char *err, size_t errlen)
{
    unsigned inner = vxlan->mtu ? vxlan->mtu : TOPO_VXLAN_INNER_MTU;
    int underlay_mtu;

    if (!vxlan_valid(vxlan)) {
        snprintf(err, errlen,
                 "vxlan %s: needs a name of 1 to %d characters, a VNI of 1 to %d (got %u), "
                 "a remote address and an underlay device",
                 vxlan->name ? vxlan->name : "(null)", EMU_NL_IFNAME_MAX, TOPO_VXLAN_VNI_MAX,
                 vxlan->vni);
        return -1;
    }
    char what[EMU_NL_IFNAME_MAX + 8];
    snprintf(what, sizeof what, "vxlan %s", vxlan->name);
    underlay_mtu =
        emu_nl_link_mtu(machine_sock, vxlan->underlay_ifindex, underlay_name, err, errlen);
    if (underlay_mtu < 0 ||
        emu_vxlan_mtu_check(what, inner, underlay_name, (unsigned)underlay_mtu, err, errlen) < 0)
        return -1;
    return emu_nl_run(machine_sock, emu_nl_vxlan_build(vxlan), err, errlen,
                      "create vxlan %s (VNI %u)", vxlan->name, vxlan->vni);
}

/* ---- the underlay device: the one holding the machine's address ---- */

struct addr_owner {
    uint32_t addr; /* network byte order */
    int ifindex;
};

static void owner_on_reply(const struct nlmsghdr *reply, void *ctx)
{
    struct addr_owner *o = ctx;
    const struct ifaddrmsg *ifa = nlmsg_data(reply);
    struct nlattr *local;

    if (reply->nlmsg_type != RTM_NEWADDR || reply->nlmsg_len < NLMSG_LENGTH(sizeof *ifa) ||
        ifa->ifa_family != AF_INET)
        return;
    local = nlmsg_find_attr((struct nlmsghdr *)reply, sizeof *ifa, IFA_LOCAL);
    if (!local) local = nlmsg_find_attr((struct nlmsghdr *)reply, sizeof *ifa, IFA_ADDRESS);
    if (local && nla_len(local) >= 4 && nla_get_u32(local) == o->addr && !o->ifindex)
        o->ifindex = (int)ifa->ifa_index;
}

struct name_of {
    int ifindex;
    char *name;
    size_t len;
};

static void name_on_link(const char *name, int ifindex, unsigned flags, void *ctx)
{
    struct name_of *n = ctx;
    (void)flags;
    if (ifindex == n->ifindex) snprintf(n->name, n->len, "%s", name);
}

int emu_nl_underlay_find(struct nl_sock *sock, uint32_t local, char *name, size_t namelen,
                         char *err, size_t errlen)
{
    struct ifaddrmsg ifa = {.ifa_family = AF_INET};
    struct addr_owner owner = {htonl(local), 0};
    char extack[EMU_NL_EXTACK_MAX] = "", text[INET_ADDRSTRLEN];
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETADDR, NLM_F_DUMP);
    int error = -ENOMEM;

    if (msg && nlmsg_append(msg, &ifa, sizeof ifa, NLMSG_ALIGNTO) == 0)
        error = emu_nl_request(sock, msg, owner_on_reply, &owner, extack, sizeof extack);
    if (msg) nlmsg_free(msg);
    inet_ntop(AF_INET, &owner.addr, text, sizeof text);
    if (error < 0) return emu_nl_fail(err, errlen, error, extack, "find underlay %s", text);
    if (!owner.ifindex)
        return snprintf(err, errlen, "underlay address %s is on no interface of this machine",
                        text),
               -1;
    struct name_of n = {owner.ifindex, name, namelen};
    snprintf(name, namelen, "ifindex %d", owner.ifindex);
    if (emu_nl_link_list(sock, name_on_link, &n, err, errlen) < 0) return -1;
    return owner.ifindex;
}
