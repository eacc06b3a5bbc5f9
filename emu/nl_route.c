/* nl_route.c — static IPv4 routes in the main table (see nl.h), and the
 * blackhole host routes of a partition.
 *
 * Routes are RTPROT_STATIC so they are told apart from the kernel's own
 * subnet routes (`ip route show proto static`). A gateway route may be
 * marked onlink, which lets the controller install routes before (or
 * without) the covering subnet route: the kernel then trusts that the
 * gateway is reachable on the given interface. */
#include "emu/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/rtnetlink.h>

#include <netlink/addr.h>
#include <netlink/msg.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

static struct nl_addr *route_addr(uint32_t addr, unsigned prefix_len)
{
    uint32_t wire = htonl(addr);
    struct nl_addr *a = nl_addr_build(AF_INET, &wire, sizeof wire);
    if (a) nl_addr_set_prefixlen(a, (int)prefix_len);
    return a;
}

/* The single next hop; the route takes ownership of it. */
static int route_set_nexthop(struct rtnl_route *object, const struct emu_nl_route *route)
{
    struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
    struct nl_addr *gateway = NULL;

    if (!nh) return -1;
    if (route->ifindex > 0) rtnl_route_nh_set_ifindex(nh, route->ifindex);
    if (route->gateway) {
        gateway = route_addr(route->gateway, 32);
        if (!gateway) {
            rtnl_route_nh_free(nh);
            return -1;
        }
        rtnl_route_nh_set_gateway(nh, gateway); /* takes its own reference */
        nl_addr_put(gateway);
    }
    if (route->onlink) rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
    rtnl_route_add_nexthop(object, nh);
    return 0;
}

/* TCP's per-route settings, as RTA_METRICS appended to a built request
 * (libnl's metrics are numbers only; the congestion control is a name).
 * The kernel takes a route's rto_min only when the metric is locked
 * (tcp_rto_min()), as `ip route ... rto_min` locks it. A route's congctl
 * applies to both ends of a connection (tcp_ca_openreq_child), and unlike
 * the namespace's default it may name an algorithm outside
 * tcp_allowed_congestion_control. */
static int route_put_metrics(struct nl_msg *msg, const struct emu_nl_route *route)
{
    if (!route->rto_min_ms && !route->init_cwnd && !route->cc[0]) return 0;
    struct nlattr *nest = nla_nest_start(msg, RTA_METRICS);
    if (!nest) return -1;
    if (route->rto_min_ms && (nla_put_u32(msg, RTAX_LOCK, 1u << RTAX_RTO_MIN) < 0 ||
                              nla_put_u32(msg, RTAX_RTO_MIN, route->rto_min_ms) < 0))
        return -1;
    if (route->init_cwnd && nla_put_u32(msg, RTAX_INITCWND, route->init_cwnd) < 0) return -1;
    if (route->cc[0] && nla_put_string(msg, RTAX_CC_ALGO, route->cc) < 0) return -1;
    return nla_nest_end(msg, nest);
}

/* A route object for route; NULL when out of memory or dst_len > 32. */
static struct rtnl_route *route_object(const struct emu_nl_route *route)
{
    struct rtnl_route *object = rtnl_route_alloc();
    struct nl_addr *dst = route->dst_len <= 32 ? route_addr(route->dst, route->dst_len) : NULL;
    struct nl_addr *src = route->pref_src ? route_addr(route->pref_src, 32) : NULL;
    int ok = object && dst && (src || !route->pref_src);

    if (ok) {
        rtnl_route_set_family(object, AF_INET);
        rtnl_route_set_table(object, RT_TABLE_MAIN);
        rtnl_route_set_protocol(object, RTPROT_STATIC);
        rtnl_route_set_type(object, route->blackhole ? RTN_BLACKHOLE : RTN_UNICAST);
        rtnl_route_set_scope(object, route->gateway || route->blackhole ? RT_SCOPE_UNIVERSE
                                                                        : RT_SCOPE_LINK);
        ok = rtnl_route_set_dst(object, dst) == 0 &&
             (!src || rtnl_route_set_pref_src(object, src) == 0) &&
             (route->blackhole || route_set_nexthop(object, route) == 0);
    }
    if (dst) nl_addr_put(dst);
    if (src) nl_addr_put(src);
    if (!ok && object) {
        rtnl_route_put(object);
        object = NULL;
    }
    return object;
}

struct nl_msg *emu_nl_route_build(const struct emu_nl_route *route, int replace)
{
    struct rtnl_route *object = route_object(route);
    struct nl_msg *msg = NULL;
    int flags = NLM_F_CREATE | (replace ? NLM_F_REPLACE : NLM_F_EXCL);

    if (!object) return NULL;
    if (rtnl_route_build_add_request(object, flags, &msg) < 0) msg = NULL;
    rtnl_route_put(object);
    if (msg && route_put_metrics(msg, route) < 0) {
        nlmsg_free(msg);
        msg = NULL;
    }
    return msg;
}

struct nl_msg *emu_nl_route_delete_build(const struct emu_nl_route *route)
{
    struct rtnl_route *object = route_object(route);
    struct nl_msg *msg = NULL;

    if (!object) return NULL;
    if (rtnl_route_build_del_request(object, 0, &msg) < 0) msg = NULL;
    rtnl_route_put(object);
    return msg;
}

/* "10.0.0.4/30 via 10.0.0.1 dev ifindex 3" for messages. */
static void route_describe(const struct emu_nl_route *route, char *buf, size_t buflen)
{
    char dst[INET_ADDRSTRLEN + 8], gateway[INET_ADDRSTRLEN];
    uint32_t dst_wire = htonl(route->dst), gateway_wire = htonl(route->gateway);

    inet_ntop(AF_INET, &dst_wire, dst, sizeof dst);
    inet_ntop(AF_INET, &gateway_wire, gateway, sizeof gateway);
    if (route->dst_len == 0)
        snprintf(dst, sizeof dst, "default");
    else
        snprintf(dst + strlen(dst), sizeof dst - strlen(dst), "/%u", route->dst_len);
    if (route->blackhole)
        snprintf(buf, buflen, "blackhole %s", dst);
    else
        snprintf(buf, buflen, "%s%s%s dev ifindex %d", dst, route->gateway ? " via " : "",
                 route->gateway ? gateway : "", route->ifindex);
}

int emu_nl_route_add(struct nl_sock *sock, const struct emu_nl_route *route, int replace, char *err,
                     size_t errlen)
{
    char text[96];

    route_describe(route, text, sizeof text);
    if (route->dst_len > 32) {
        snprintf(err, errlen, "add route %s: prefix length above 32", text);
        return -1;
    }
    return emu_nl_run(sock, emu_nl_route_build(route, replace), err, errlen, "add route %s", text);
}

int emu_nl_route_delete(struct nl_sock *sock, const struct emu_nl_route *route, char *err,
                        size_t errlen)
{
    char text[96];

    route_describe(route, text, sizeof text);
    return emu_nl_run(sock, emu_nl_route_delete_build(route), err, errlen, "delete route %s", text);
}
