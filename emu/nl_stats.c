/* nl_stats.c — every link's counters of a namespace in one dump (see nl.h).
 *
 * links.csv on the kernel backend reads the veths' own counters: one
 * RTM_GETLINK dump per namespace gives every interface there with its
 * IFLA_STATS64, and a veth end reports both directions of its link. */
#include "emu/nl.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

struct nl_msg *emu_nl_link_stats_build(void)
{
    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_DUMP);
    if (msg && nlmsg_append(msg, &ifi, sizeof ifi, NLMSG_ALIGNTO) < 0) {
        nlmsg_free(msg);
        return NULL;
    }
    return msg;
}

int emu_nl_link_stats_parse(const struct nlmsghdr *reply, struct emu_nl_link_stats *out)
{
    const struct ifinfomsg *ifi = NLMSG_DATA(reply);
    if (reply->nlmsg_type != RTM_NEWLINK || reply->nlmsg_len < NLMSG_LENGTH(sizeof *ifi)) return -1;
    struct nlattr *attr = nlmsg_find_attr((struct nlmsghdr *)reply, sizeof *ifi, IFLA_STATS64);
    struct rtnl_link_stats64 st = {0};
    /* Newer kernels append fields; the ones used here come first (through
     * tx_dropped, before multicast) in every version. */
    if (!attr || (size_t)nla_len(attr) < offsetof(struct rtnl_link_stats64, multicast)) return -1;
    memcpy(&st, nla_data(attr),
           (size_t)nla_len(attr) < sizeof st ? (size_t)nla_len(attr) : sizeof st);
    *out = (struct emu_nl_link_stats){
        .ifindex = ifi->ifi_index,
        .flags = ifi->ifi_flags,
        .rx_packets = st.rx_packets,
        .tx_packets = st.tx_packets,
        .rx_bytes = st.rx_bytes,
        .tx_bytes = st.tx_bytes,
        .rx_dropped = st.rx_dropped,
        .tx_dropped = st.tx_dropped,
    };
    return 0;
}

struct stats_walk {
    emu_nl_link_stats_fn fn;
    void *ctx;
};

static void stats_on_reply(const struct nlmsghdr *reply, void *ctx)
{
    struct stats_walk *walk = ctx;
    struct emu_nl_link_stats stats;
    if (emu_nl_link_stats_parse(reply, &stats) == 0) walk->fn(&stats, walk->ctx);
}

int emu_nl_link_stats(struct nl_sock *sock, emu_nl_link_stats_fn fn, void *ctx, char *err,
                      size_t errlen)
{
    struct stats_walk walk = {.fn = fn, .ctx = ctx};
    char extack[EMU_NL_EXTACK_MAX] = "";
    struct nl_msg *msg = emu_nl_link_stats_build();
    int error =
        msg ? emu_nl_request(sock, msg, stats_on_reply, &walk, extack, sizeof extack) : -ENOMEM;
    if (msg) nlmsg_free(msg);
    return error < 0 ? emu_nl_fail(err, errlen, error, extack, "read the interfaces' counters") : 0;
}
