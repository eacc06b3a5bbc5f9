/* test_nl.c — the rtnetlink request builders of emu/nl_*.c, checked on the
 * bytes they produce (no socket, no root): veth ends placed by namespace fd
 * on both sides, bridge, up/down, address, route, and the qdisc layouts the
 * kernel expects (netem's TCA_OPTIONS covering its trailing attributes,
 * 64-bit HTB rates, bfifo's bare struct), and the link-counter dump
 * request with its replies parsed; the VXLAN device of a cross-machine
 * link (emu/nl_vxlan.h) and its MTU rule. */
#include "check.h"
#include "emu/nl.h"
#include "emu/nl_vxlan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

static struct nlattr *tb[IFLA_MAX + 64];

/* Host byte order, as the API takes addresses. */
static uint32_t ip(const char *text)
{
    return ntohl(inet_addr(text));
}

static void test_veth(void)
{
    struct emu_nl_veth_end a = {.ns_fd = 7, .name = "n1-e0", .ifindex = 12};
    struct emu_nl_veth_end b = {.ns_fd = 9, .name = "n2-e0", .ifindex = 0};
    struct nl_msg *msg = emu_nl_veth_build(&a, &b, 9000, 1);
    struct nlattr *info[IFLA_INFO_MAX + 1], *data[VETH_INFO_MAX + 1], *peer_tb[IFLA_MAX + 1];
    struct nlmsghdr *nlh;
    struct ifinfomsg *ifi, *peer;

    CHECK(msg != NULL);
    if (!msg) return;
    nlh = nlmsg_hdr(msg);
    ifi = NLMSG_DATA(nlh);
    CHECK(nlh->nlmsg_type == RTM_NEWLINK);
    CHECK((nlh->nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL)) == (NLM_F_CREATE | NLM_F_EXCL));
    CHECK(ifi->ifi_index == 12 && (ifi->ifi_flags & IFF_UP));
    CHECK(nlmsg_parse(nlh, sizeof *ifi, tb, IFLA_MAX, NULL) == 0);
    CHECK(tb[IFLA_IFNAME] && strcmp(nla_get_string(tb[IFLA_IFNAME]), "n1-e0") == 0);
    CHECK(tb[IFLA_NET_NS_FD] && nla_get_u32(tb[IFLA_NET_NS_FD]) == 7);
    CHECK(tb[IFLA_MTU] && nla_get_u32(tb[IFLA_MTU]) == 9000);
    CHECK(tb[IFLA_LINKINFO] && nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0);
    CHECK(info[IFLA_INFO_KIND] && strcmp(nla_get_string(info[IFLA_INFO_KIND]), "veth") == 0);
    CHECK(info[IFLA_INFO_DATA] &&
          nla_parse_nested(data, VETH_INFO_MAX, info[IFLA_INFO_DATA], NULL) == 0);
    CHECK(data[VETH_INFO_PEER] && nla_len(data[VETH_INFO_PEER]) >= (int)sizeof *peer);
    if (!data[VETH_INFO_PEER]) return;
    /* The peer is its own ifinfomsg followed by its own attributes. */
    peer = nla_data(data[VETH_INFO_PEER]);
    CHECK(!(peer->ifi_flags & IFF_UP)); /* the kernel could not open it yet */
    CHECK(nla_parse(peer_tb, IFLA_MAX, (struct nlattr *)(peer + 1),
                    nla_len(data[VETH_INFO_PEER]) - (int)sizeof *peer, NULL) == 0);
    CHECK(peer_tb[IFLA_IFNAME] && strcmp(nla_get_string(peer_tb[IFLA_IFNAME]), "n2-e0") == 0);
    CHECK(peer_tb[IFLA_NET_NS_FD] && nla_get_u32(peer_tb[IFLA_NET_NS_FD]) == 9);
    CHECK(peer_tb[IFLA_MTU] && nla_get_u32(peer_tb[IFLA_MTU]) == 9000);
    nlmsg_free(msg);
}

static void test_links(void)
{
    struct nl_msg *msg = emu_nl_bridge_build("sw0", -1, 0, 1);
    struct nlattr *info[IFLA_INFO_MAX + 1];
    struct ifinfomsg *ifi;

    CHECK(msg && nlmsg_parse(nlmsg_hdr(msg), sizeof *ifi, tb, IFLA_MAX, NULL) == 0);
    CHECK(!tb[IFLA_NET_NS_FD]); /* -1: the socket's own namespace */
    CHECK(nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0);
    CHECK(strcmp(nla_get_string(info[IFLA_INFO_KIND]), "bridge") == 0);
    nlmsg_free(msg);

    msg = emu_nl_link_updown_build(5, 0);
    ifi = NLMSG_DATA(nlmsg_hdr(msg));
    CHECK(!(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_CREATE));
    CHECK(ifi->ifi_index == 5 && ifi->ifi_flags == 0 && ifi->ifi_change == IFF_UP);
    nlmsg_free(msg);

    msg = emu_nl_link_master_build(5, 3);
    CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof *ifi, tb, IFLA_MAX, NULL) == 0);
    CHECK(tb[IFLA_MASTER] && nla_get_u32(tb[IFLA_MASTER]) == 3);
    nlmsg_free(msg);

    msg = emu_nl_link_delete_build(5);
    CHECK(nlmsg_hdr(msg)->nlmsg_type == RTM_DELLINK);
    nlmsg_free(msg);
}

static void test_addr_route(void)
{
    struct emu_nl_route route = {.dst = ip("10.1.0.7"),
                                 .dst_len = 32,
                                 .gateway = ip("10.0.0.2"),
                                 .ifindex = 4,
                                 .pref_src = ip("10.1.0.1"),
                                 .onlink = 1};
    struct nl_msg *msg = emu_nl_addr_build(4, ip("10.0.0.1"), 30);
    struct ifaddrmsg *ifa = NLMSG_DATA(nlmsg_hdr(msg));
    struct rtmsg *rtm;

    CHECK(ifa->ifa_index == 4 && ifa->ifa_prefixlen == 30 && ifa->ifa_family == AF_INET);
    CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof *ifa, tb, IFA_MAX, NULL) == 0);
    CHECK(tb[IFA_LOCAL] && nla_get_u32(tb[IFA_LOCAL]) == inet_addr("10.0.0.1"));
    nlmsg_free(msg);
    CHECK(emu_nl_addr_build(4, 0, 33) == NULL);

    msg = emu_nl_route_build(&route, 0);
    rtm = NLMSG_DATA(nlmsg_hdr(msg));
    CHECK(rtm->rtm_dst_len == 32 && rtm->rtm_protocol == RTPROT_STATIC);
    CHECK(rtm->rtm_table == RT_TABLE_MAIN && rtm->rtm_type == RTN_UNICAST);
    CHECK(rtm->rtm_flags & RTNH_F_ONLINK);
    CHECK(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_EXCL);
    CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof *rtm, tb, RTA_MAX, NULL) == 0);
    CHECK(tb[RTA_DST] && nla_get_u32(tb[RTA_DST]) == inet_addr("10.1.0.7"));
    CHECK(tb[RTA_GATEWAY] && nla_get_u32(tb[RTA_GATEWAY]) == inet_addr("10.0.0.2"));
    CHECK(tb[RTA_OIF] && nla_get_u32(tb[RTA_OIF]) == 4);
    CHECK(tb[RTA_PREFSRC] && nla_get_u32(tb[RTA_PREFSRC]) == inet_addr("10.1.0.1"));
    nlmsg_free(msg);

    route = (struct emu_nl_route){.gateway = ip("10.0.0.2"), .ifindex = 4};
    msg = emu_nl_route_build(&route, 1);
    rtm = NLMSG_DATA(nlmsg_hdr(msg));
    CHECK(rtm->rtm_dst_len == 0 && !(rtm->rtm_flags & RTNH_F_ONLINK));
    CHECK(nlmsg_hdr(msg)->nlmsg_flags & NLM_F_REPLACE);
    nlmsg_free(msg);
}

/* The TCA_OPTIONS attribute of a tc message and the tcmsg. */
static struct nlattr *tc_options(struct nl_msg *msg, struct tcmsg **tcm, const char *kind)
{
    *tcm = NLMSG_DATA(nlmsg_hdr(msg));
    CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof **tcm, tb, TCA_MAX, NULL) == 0);
    CHECK(tb[TCA_KIND] && strcmp(nla_get_string(tb[TCA_KIND]), kind) == 0);
    return tb[TCA_OPTIONS];
}

static void free_all(struct nl_msg **msgs, int n)
{
    for (int i = 0; i < n; i++)
        nlmsg_free(msgs[i]);
}

static void test_htb_tree(void)
{
    struct topo_shape_request request = {.rate_bps = 100000000000ULL};
    struct topo_shape_plan plan;
    struct nl_msg *msgs[3];
    struct nlattr *htb[TCA_HTB_MAX + 1], *options;
    struct tcmsg *tcm;
    struct tc_htb_opt *opt;
    struct tc_fifo_qopt *fifo;
    char err[128];
    int n;

    CHECK(topo_shape_plan(&request, 0, &plan, err, sizeof err) == 0);
    n = emu_nl_shape_build(&plan, 3, 0, msgs);
    CHECK(n == 3);
    if (n != 3) return;
    options = tc_options(msgs[0], &tcm, "htb");
    CHECK(tcm->tcm_parent == TC_H_ROOT && tcm->tcm_handle == 0x10000 && tcm->tcm_ifindex == 3);
    CHECK(nla_parse_nested(htb, TCA_HTB_MAX, options, NULL) == 0 && htb[TCA_HTB_INIT]);
    CHECK(((struct tc_htb_glob *)nla_data(htb[TCA_HTB_INIT]))->defcls == 1);

    options = tc_options(msgs[1], &tcm, "htb");
    CHECK(nlmsg_hdr(msgs[1])->nlmsg_type == RTM_NEWTCLASS);
    CHECK(tcm->tcm_parent == 0x10000 && tcm->tcm_handle == 0x10001);
    CHECK(nla_parse_nested(htb, TCA_HTB_MAX, options, NULL) == 0 && htb[TCA_HTB_PARMS]);
    opt = nla_data(htb[TCA_HTB_PARMS]);
    CHECK(opt->rate.rate == UINT32_MAX && opt->ceil.rate == UINT32_MAX); /* saturated */
    CHECK(opt->rate.linklayer == TC_LINKLAYER_ETHERNET);
    CHECK(opt->buffer == plan.rate.buffer_ticks && opt->quantum == plan.rate.quantum);
    CHECK(htb[TCA_HTB_RATE64] && nla_get_u64(htb[TCA_HTB_RATE64]) == 12500000000ULL);
    CHECK(htb[TCA_HTB_CEIL64] && nla_get_u64(htb[TCA_HTB_CEIL64]) == 12500000000ULL);

    options = tc_options(msgs[2], &tcm, "bfifo");
    CHECK(tcm->tcm_parent == 0x10001 && tcm->tcm_handle == 0x100000);
    CHECK(nla_len(options) == sizeof *fifo);
    fifo = nla_data(options);
    CHECK(fifo->limit == plan.queue_bytes);
    free_all(msgs, n);

    /* A change leaves the HTB qdisc alone and carries no CREATE. */
    n = emu_nl_shape_build(&plan, 3, 1, msgs);
    CHECK(n == 2 && nlmsg_hdr(msgs[0])->nlmsg_type == RTM_NEWTCLASS);
    CHECK(!(nlmsg_hdr(msgs[0])->nlmsg_flags & NLM_F_CREATE));
    free_all(msgs, n);
}

static void test_netem_layout(void)
{
    struct topo_shape_request request = {.delay_ns = 10000000, .jitter_ns = 1000000, .loss = 0.01};
    struct topo_shape_plan plan;
    struct nl_msg *msgs[3];
    struct nlattr *options, *netem[TCA_NETEM_MAX + 1];
    struct tc_netem_qopt *opt;
    struct tcmsg *tcm;
    char err[128];
    int n;

    CHECK(topo_shape_plan(&request, 1, &plan, err, sizeof err) == 0);
    n = emu_nl_shape_build(&plan, 3, 0, msgs);
    CHECK(n == 1);
    if (n != 1) return;
    options = tc_options(msgs[0], &tcm, "netem");
    CHECK(tcm->tcm_parent == TC_H_ROOT && tcm->tcm_handle == 0x100000);
    /* The struct, then LATENCY64 and JITTER64 (4 + 8 bytes each), all inside. */
    CHECK(nla_len(options) == (int)(sizeof *opt + 2 * 12));
    opt = nla_data(options);
    CHECK(tcm->tcm_handle == TOPO_SHAPE_LEAF_HANDLE);
    CHECK(opt->latency == 10000000 / 64 && opt->jitter == 1000000 / 64);
    CHECK(opt->loss == plan.netem.loss && opt->limit == plan.netem.limit && opt->gap == 0);
    CHECK(nla_parse(netem, TCA_NETEM_MAX, (struct nlattr *)((char *)opt + sizeof *opt),
                    nla_len(options) - (int)sizeof *opt, NULL) == 0);
    CHECK(netem[TCA_NETEM_LATENCY64] && nla_get_u64(netem[TCA_NETEM_LATENCY64]) == 10000000);
    CHECK(netem[TCA_NETEM_JITTER64] && nla_get_u64(netem[TCA_NETEM_JITTER64]) == 1000000);
    free_all(msgs, n);
}

static void test_tbf_tree(void)
{
    struct topo_shape_request request = {.rate_bps = 100000000, .root = TOPO_SHAPE_ROOT_TBF};
    struct topo_shape_plan plan;
    struct nl_msg *msgs[3];
    struct nlattr *options, *tbf[TCA_TBF_MAX + 1];
    struct tc_tbf_qopt *opt;
    struct tcmsg *tcm;
    char err[128];
    int n;

    CHECK(topo_shape_plan(&request, 0, &plan, err, sizeof err) == 0);
    n = emu_nl_shape_build(&plan, 3, 0, msgs);
    CHECK(n == 1); /* TBF's own fifo is the queue */
    if (n != 1) return;
    options = tc_options(msgs[0], &tcm, "tbf");
    CHECK(nla_parse_nested(tbf, TCA_TBF_MAX, options, NULL) == 0 && tbf[TCA_TBF_PARMS]);
    opt = nla_data(tbf[TCA_TBF_PARMS]);
    CHECK(opt->rate.rate == 12500000 && opt->limit == plan.queue_bytes);
    CHECK(tbf[TCA_TBF_BURST] && nla_get_u32(tbf[TCA_TBF_BURST]) == 12500);
    CHECK(!tbf[TCA_TBF_RATE64]);
    free_all(msgs, n);
}

/* An RTM_NEWLINK reply of ifindex 7 with IFLA_STATS64 of `len` bytes. */
static struct nl_msg *link_reply(int type, size_t len)
{
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = 7, .ifi_flags = IFF_UP};
    struct rtnl_link_stats64 st = {.rx_packets = 1,
                                   .tx_packets = 2,
                                   .rx_bytes = 3000,
                                   .tx_bytes = 4000000000000ull,
                                   .rx_dropped = 5,
                                   .tx_dropped = 6};
    struct nl_msg *msg = nlmsg_alloc_simple(type, NLM_F_MULTI);
    nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO);
    nla_put_string(msg, IFLA_IFNAME, "n1-e0");
    nla_put(msg, IFLA_STATS64, (int)len, &st);
    return msg;
}

static void test_link_stats(void)
{
    struct nl_msg *msg = emu_nl_link_stats_build();
    CHECK(msg != NULL);
    if (!msg) return;
    struct nlmsghdr *nlh = nlmsg_hdr(msg);
    const struct ifinfomsg *ifi = NLMSG_DATA(nlh);
    CHECK(nlh->nlmsg_type == RTM_GETLINK && (nlh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP);
    CHECK(nlh->nlmsg_len == NLMSG_LENGTH(sizeof *ifi) && ifi->ifi_family == AF_UNSPEC);
    nlmsg_free(msg);

    struct emu_nl_link_stats st;
    msg = link_reply(RTM_NEWLINK, sizeof(struct rtnl_link_stats64));
    CHECK(emu_nl_link_stats_parse(nlmsg_hdr(msg), &st) == 0);
    CHECK(st.ifindex == 7 && (st.flags & IFF_UP));
    CHECK(st.rx_packets == 1 && st.tx_packets == 2 && st.rx_bytes == 3000);
    CHECK(st.tx_bytes == 4000000000000ull && st.rx_dropped == 5 && st.tx_dropped == 6);
    nlmsg_free(msg);
    /* an older kernel's shorter struct still holds the fields used */
    msg = link_reply(RTM_NEWLINK, offsetof(struct rtnl_link_stats64, multicast));
    CHECK(emu_nl_link_stats_parse(nlmsg_hdr(msg), &st) == 0 && st.tx_dropped == 6);
    nlmsg_free(msg);
    msg = link_reply(RTM_NEWLINK, offsetof(struct rtnl_link_stats64, rx_dropped));
    CHECK(emu_nl_link_stats_parse(nlmsg_hdr(msg), &st) == -1);
    nlmsg_free(msg);
    msg = link_reply(RTM_NEWADDR, sizeof(struct rtnl_link_stats64));
    CHECK(emu_nl_link_stats_parse(nlmsg_hdr(msg), &st) == -1);
    nlmsg_free(msg);
}

static void test_errors(void)
{
    char err[256];
    CHECK(emu_nl_fail(err, sizeof err, -EEXIST, "", "create veth %s/%s", "a", "b") == -1);
    CHECK_STREQ(err, "create veth a/b: File exists");
    emu_nl_fail(err, sizeof err, -ENOENT, "Specified qdisc kind is unknown", "shape %s", "e0");
    CHECK_STREQ(err, "shape e0: No such file or directory (Specified qdisc kind is unknown)");
    CHECK(emu_nl_veth_add(NULL, &(struct emu_nl_veth_end){.name = "much-too-long-name"},
                          &(struct emu_nl_veth_end){.name = "b"}, 0, 1, err, sizeof err) == -1);
    CHECK_STREQ(err, "bad interface name \"much-too-long-name\": must be 1 to 15 characters");
    CHECK(emu_nl_bridge_add(NULL, "a/b", -1, 0, 1, err, sizeof err) == -1);
    CHECK_STREQ(err, "bad interface name \"a/b\": no '/', ':' or spaces allowed");
}

/* The VXLAN end: made in the node's namespace by fd, its VNI, the remote
 * as the default destination (IFLA_VXLAN_GROUP with a unicast address),
 * local, underlay device, port in network order, learning off, inner MTU. */
static void test_vxlan(void)
{
    struct emu_nl_vxlan vx = {.name = "m2-vx7",
                              .node_ns_fd = 11,
                              .ifindex = 5,
                              .vni = 0x123456,
                              .local = ip("10.250.0.1"),
                              .remote = ip("10.250.0.2"),
                              .underlay_ifindex = 3};
    struct nlattr *info[IFLA_INFO_MAX + 1], *data[IFLA_VXLAN_MAX + 1];
    struct nl_msg *msg = emu_nl_vxlan_build(&vx);
    struct ifinfomsg *ifi;

    CHECK(msg != NULL);
    if (!msg) return;
    ifi = NLMSG_DATA(nlmsg_hdr(msg));
    CHECK(nlmsg_hdr(msg)->nlmsg_type == RTM_NEWLINK && ifi->ifi_index == 5);
    CHECK((nlmsg_hdr(msg)->nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL)) ==
          (NLM_F_CREATE | NLM_F_EXCL));
    CHECK(!(ifi->ifi_flags & IFF_UP));
    CHECK(nlmsg_parse(nlmsg_hdr(msg), sizeof *ifi, tb, IFLA_MAX, NULL) == 0);
    CHECK(strcmp(nla_get_string(tb[IFLA_IFNAME]), "m2-vx7") == 0);
    CHECK(tb[IFLA_NET_NS_FD] && nla_get_u32(tb[IFLA_NET_NS_FD]) == 11);
    CHECK(tb[IFLA_MTU] && nla_get_u32(tb[IFLA_MTU]) == 1500);
    CHECK(nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0);
    CHECK(strcmp(nla_get_string(info[IFLA_INFO_KIND]), "vxlan") == 0);
    CHECK(nla_parse_nested(data, IFLA_VXLAN_MAX, info[IFLA_INFO_DATA], NULL) == 0);
    CHECK(data[IFLA_VXLAN_ID] && nla_get_u32(data[IFLA_VXLAN_ID]) == 0x123456);
    CHECK(data[IFLA_VXLAN_GROUP] && nla_get_u32(data[IFLA_VXLAN_GROUP]) == inet_addr("10.250.0.2"));
    CHECK(data[IFLA_VXLAN_LOCAL] && nla_get_u32(data[IFLA_VXLAN_LOCAL]) == inet_addr("10.250.0.1"));
    CHECK(data[IFLA_VXLAN_LINK] && nla_get_u32(data[IFLA_VXLAN_LINK]) == 3);
    CHECK(data[IFLA_VXLAN_PORT] && nla_get_u16(data[IFLA_VXLAN_PORT]) == htons(4789));
    CHECK(data[IFLA_VXLAN_LEARNING] && nla_get_u8(data[IFLA_VXLAN_LEARNING]) == 0);
    nlmsg_free(msg);

    vx.port = 8472, vx.mtu = 1400, vx.local = 0;
    msg = emu_nl_vxlan_build(&vx);
    CHECK(msg && nlmsg_parse(nlmsg_hdr(msg), sizeof *ifi, tb, IFLA_MAX, NULL) == 0);
    CHECK(nla_get_u32(tb[IFLA_MTU]) == 1400);
    CHECK(nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0);
    CHECK(nla_parse_nested(data, IFLA_VXLAN_MAX, info[IFLA_INFO_DATA], NULL) == 0);
    CHECK(nla_get_u16(data[IFLA_VXLAN_PORT]) == htons(8472) && !data[IFLA_VXLAN_LOCAL]);
    nlmsg_free(msg);

    vx.vni = TOPO_VXLAN_VNI_MAX + 1; /* 25 bits: refused */
    CHECK(emu_nl_vxlan_build(&vx) == NULL);
    vx.vni = 0;
    CHECK(emu_nl_vxlan_build(&vx) == NULL);
    vx.vni = 7, vx.underlay_ifindex = 0;
    CHECK(emu_nl_vxlan_build(&vx) == NULL);
}

static void test_vxlan_mtu(void)
{
    char err[256];
    CHECK(emu_vxlan_mtu_check("vxlan vx1", 1500, "eth0", 1550, err, sizeof err) == 0);
    CHECK(emu_vxlan_mtu_check("vxlan vx1", 1500, "eth0", 9000, err, sizeof err) == 0);
    CHECK(emu_vxlan_mtu_check("vxlan vx1", 1450, "eth0", 1500, err, sizeof err) == 0);
    CHECK(emu_vxlan_mtu_check("vxlan vx1", 1500, "eth0", 1549, err, sizeof err) == -1);
    CHECK_STREQ(err, "vxlan vx1: underlay eth0 has MTU 1549, below the 1550 that a 1500-byte "
                     "packet needs over VXLAN (50 bytes of headers): raise the underlay's MTU");
    CHECK(emu_nl_vxlan_add(NULL, &(struct emu_nl_vxlan){.name = "vx1", .vni = 1 << 24}, "eth0", err,
                           sizeof err) == -1);
    CHECK_STREQ(err, "vxlan vx1: needs a name of 1 to 15 characters, a VNI of 1 to 16777215 (got "
                     "16777216), a remote address and an underlay device");
}

int main(void)
{
    test_veth();
    test_links();
    test_addr_route();
    test_htb_tree();
    test_netem_layout();
    test_tbf_tree();
    test_link_stats();
    test_errors();
    test_vxlan();
    test_vxlan_mtu();
    return check_report();
}
