/* test_topo_netns.c — namespaces, veth, bridges, addresses, routes for real
 * (label netns, root): ping across a line A - R - B through node addresses
 * on loopbacks, a switch segment of three hosts, link down/up, per-namespace
 * sysctls, the feature probe, and nothing left behind afterwards. */
#include <arpa/inet.h>
#include <netlink/msg.h>

#include "helpers.h"
#include "emu/netns.h"
#include "emu/nl.h"

static char err[512];

#define CHECK_OK(call) CHECK_MSG((call) == 0, "%s", err)

/* Host byte order, as the API takes addresses. */
static uint32_t ip(const char *text)
{
    return ntohl(inet_addr(text));
}

static void test_enter_leave_and_sysctl(void)
{
    struct emu_netns ns;
    char value[16] = "";
    int saved = -1, fd;

    CHECK_OK(emu_netns_create(&ns, EMU_NETNS_FORWARDING, err, sizeof err));
    CHECK(emu_netns_inode(ns.fd) != 0);
    CHECK(emu_netns_enter(ns.fd, &saved, err, sizeof err) == 0);
    CHECK_OK(emu_netns_sysctl_write("net/ipv4/ip_default_ttl", "42", err, sizeof err));
    /* Opened inside: the file stays the namespace's after we leave. */
    fd = open("/proc/sys/net/ipv4/ip_default_ttl", O_RDONLY);
    CHECK_OK(emu_netns_leave(&saved, err, sizeof err));
    CHECK(saved == -1);
    CHECK(fd >= 0 && read(fd, value, sizeof value - 1) > 0);
    CHECK_MSG(strncmp(value, "42", 2) == 0, "inside value read after leaving: %s", value);
    close(fd);
    /* Opened outside: the host's own value, untouched. */
    fd = open("/proc/sys/net/ipv4/ip_default_ttl", O_RDONLY);
    memset(value, 0, sizeof value);
    CHECK(fd >= 0 && read(fd, value, sizeof value - 1) > 0);
    CHECK_MSG(strncmp(value, "42", 2) != 0, "host ttl changed: %s", value);
    close(fd);
    emu_netns_close(&ns);
    emu_netns_close(&ns); /* idempotent */
    CHECK(ns.fd == -1 && ns.sock == NULL);
}

/* A veth between two namespaces with a /30 on it; ifindex a_index is given
 * explicitly when non-zero, else looked up by name. */
static void link_pair(struct emu_netns *a, const char *a_name, int a_index, const char *a_addr,
                      struct emu_netns *b, const char *b_name, const char *b_addr, int *a_out,
                      int *b_out)
{
    struct emu_nl_veth_end ea = {.ns_fd = a->fd, .name = a_name, .ifindex = a_index};
    struct emu_nl_veth_end eb = {.ns_fd = b->fd, .name = b_name};

    CHECK_OK(emu_nl_veth_add(a->sock, &ea, &eb, 1500, 1, err, sizeof err));
    *a_out = a_index ? a_index : emu_nl_link_index(a->sock, a_name, err, sizeof err);
    *b_out = emu_nl_link_index(b->sock, b_name, err, sizeof err);
    CHECK_MSG(*a_out > 0 && *b_out > 0, "%s", err);
    CHECK_OK(emu_nl_addr_add(a->sock, *a_out, ip(a_addr), 30, a_name, err, sizeof err));
    CHECK_OK(emu_nl_interface_up(b->sock, *b_out, b_name, ip(b_addr), 30, err, sizeof err));
}

static void route(struct emu_netns *ns, const char *dst, unsigned len, const char *via, int ifindex,
                  const char *src)
{
    struct emu_nl_route r = {.dst = dst ? ip(dst) : 0,
                             .dst_len = len,
                             .gateway = ip(via),
                             .ifindex = ifindex,
                             .pref_src = src ? ip(src) : 0};
    CHECK_OK(emu_nl_route_add(ns->sock, &r, 0, err, sizeof err));
}

/* EMU_NETNS_NO_IPV6: links made afterwards have IPv6 off. */
static void check_no_ipv6(struct emu_netns *ns, const char *ifname)
{
    char path[128], value[8] = "";
    int saved, fd;

    snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
    CHECK_OK(emu_netns_enter(ns->fd, &saved, err, sizeof err));
    fd = open(path, O_RDONLY);
    CHECK_OK(emu_netns_leave(&saved, err, sizeof err));
    if (fd < 0) return; /* a kernel without IPv6 */
    CHECK(read(fd, value, sizeof value - 1) > 0 && value[0] == '1');
    close(fd);
}

/* A - R - B; node addresses 10.251.0.{1,2,3} on the loopbacks. */
static void test_line(unsigned long *inodes)
{
    struct emu_netns ns[3];
    int a0, r0, r1, b0;
    unsigned flags = EMU_NETNS_LO_UP | EMU_NETNS_FORWARDING | EMU_NETNS_NO_IPV6;

    CHECK_OK(emu_netns_create_many(ns, 3, flags, 0, err, sizeof err));
    for (int i = 0; i < 3; i++)
        inodes[i] = emu_netns_inode(ns[i].fd);
    link_pair(&ns[0], "hn-h4-a0", 10, "10.250.0.1", &ns[1], "hn-h4-r0", "10.250.0.2", &a0, &r0);
    link_pair(&ns[1], "hn-h4-r1", 0, "10.250.0.5", &ns[2], "hn-h4-b0", "10.250.0.6", &r1, &b0);
    CHECK(a0 == 10); /* the ifindex asked for */
    CHECK(!helper_host_has_link("hn-h4-a0") && !helper_host_has_link("hn-h4-r0"));
    check_no_ipv6(&ns[0], "hn-h4-a0");
    CHECK_OK(emu_nl_loopback_setup(ns[0].sock, ip("10.251.0.1"), err, sizeof err));
    CHECK_OK(emu_nl_loopback_setup(ns[1].sock, ip("10.251.0.2"), err, sizeof err));
    CHECK_OK(emu_nl_loopback_setup(ns[2].sock, ip("10.251.0.3"), err, sizeof err));
    route(&ns[0], NULL, 0, "10.250.0.2", a0, "10.251.0.1");
    route(&ns[2], NULL, 0, "10.250.0.5", b0, "10.251.0.3");
    route(&ns[1], "10.251.0.1", 32, "10.250.0.1", r0, "10.251.0.2");
    route(&ns[1], "10.251.0.3", 32, "10.250.0.6", r1, "10.251.0.2");
    /* Without forwarding on R's interfaces nothing crosses R. */
    CHECK_MSG(helper_ping(ns[0].fd, "10.251.0.3") != 0, "R forwards before it is a router");
    struct emu_nl_link_conf router_r0 = {r0, 1, 0, 0}, router_r1 = {r1, 1, 0, 0};
    CHECK_OK(emu_nl_run(ns[1].sock, emu_nl_link_node_conf_build(&router_r0), err, sizeof err,
                        "router r0"));
    CHECK_OK(emu_nl_run(ns[1].sock, emu_nl_link_node_conf_build(&router_r1), err, sizeof err,
                        "router r1"));

    CHECK_MSG(helper_ping(ns[0].fd, "10.251.0.3") == 0, "A cannot reach B's node address");
    CHECK_MSG(helper_ping(ns[2].fd, "10.251.0.1") == 0, "B cannot reach A's node address");
    CHECK_MSG(helper_ping(ns[0].fd, "10.251.0.2") == 0, "A cannot reach R's node address");

    /* link:down() / link:up() */
    CHECK_OK(emu_nl_link_set_up(ns[1].sock, r1, 0, "hn-h4-r1", err, sizeof err));
    CHECK_MSG(helper_ping(ns[0].fd, "10.251.0.3") != 0, "ping crossed a link that is down");
    CHECK_OK(emu_nl_link_set_up(ns[1].sock, r1, 1, "hn-h4-r1", err, sizeof err));
    /* Down flushed the routes through r1: the controller puts them back. */
    route(&ns[1], "10.251.0.3", 32, "10.250.0.6", r1, "10.251.0.2");
    CHECK_MSG(helper_ping(ns[0].fd, "10.251.0.3") == 0, "no connectivity after link up");

    /* Errors name the object. */
    CHECK(emu_nl_addr_add(ns[0].sock, a0, ip("10.250.0.1"), 30, "hn-h4-a0", err, sizeof err) < 0);
    CHECK_STREQ(err, "add address 10.250.0.1/30 to hn-h4-a0: File exists "
                     "(ipv4: Address already assigned)");
    struct emu_nl_veth_end dup_a = {.ns_fd = ns[0].fd, .name = "hn-h4-a0"};
    struct emu_nl_veth_end dup_b = {.ns_fd = ns[1].fd, .name = "hn-h4-x0"};
    CHECK(emu_nl_veth_add(ns[0].sock, &dup_a, &dup_b, 0, 1, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "create veth hn-h4-a0/hn-h4-x0: File exists");
    CHECK(emu_nl_link_index(ns[0].sock, "nonesuch", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "look up interface nonesuch: No such device");

    for (int i = 0; i < 3; i++) {
        helper_netns_pin(ns[i].fd);
        emu_netns_close(&ns[i]);
    }
}

struct link_count {
    int links, ports;
};

static void count_link(const char *name, int ifindex, unsigned flags, void *ctx)
{
    struct link_count *count = ctx;
    (void)flags;
    count->links += ifindex > 0;
    count->ports += strncmp(name, "hn-h4-p", 7) == 0;
}

/* Three hosts on one bridge in a switch namespace, one subnet. */
static void test_switch(unsigned long *inodes)
{
    struct emu_netns sw, host[3];
    int bridge, port, host_if;
    char host_name[16], port_name[16], addr[32];

    CHECK_OK(emu_netns_create(&sw, EMU_NETNS_LO_UP | EMU_NETNS_NO_IPV6, err, sizeof err));
    CHECK_OK(
        emu_netns_create_many(host, 3, EMU_NETNS_LO_UP | EMU_NETNS_NO_IPV6, 2, err, sizeof err));
    inodes[0] = emu_netns_inode(sw.fd);
    CHECK_OK(emu_nl_bridge_add(sw.sock, "hn-h4-br", -1, 0, 1, err, sizeof err));
    bridge = emu_nl_link_index(sw.sock, "hn-h4-br", err, sizeof err);
    CHECK_MSG(bridge > 0, "%s", err);
    for (int i = 0; i < 3; i++) {
        inodes[1 + i] = emu_netns_inode(host[i].fd);
        snprintf(host_name, sizeof host_name, "hn-h4-h%d", i);
        snprintf(port_name, sizeof port_name, "hn-h4-p%d", i);
        snprintf(addr, sizeof addr, "10.252.0.%d", i + 1);
        struct emu_nl_veth_end a = {.ns_fd = host[i].fd, .name = host_name};
        struct emu_nl_veth_end b = {.ns_fd = sw.fd, .name = port_name};
        a.ifindex = emu_netns_ifindex_alloc(&host[i]);
        CHECK(a.ifindex >= 2); /* after lo */
        CHECK_OK(emu_nl_veth_add(sw.sock, &a, &b, 0, 1, err, sizeof err));
        port = emu_nl_link_index(sw.sock, port_name, err, sizeof err);
        host_if = emu_nl_link_index(host[i].sock, host_name, err, sizeof err);
        CHECK_MSG(host_if == a.ifindex, "%s got ifindex %d, not %d", host_name, host_if, a.ifindex);
        CHECK_OK(emu_nl_link_set_master(sw.sock, port, bridge, port_name, err, sizeof err));
        CHECK_OK(emu_nl_link_set_up(sw.sock, port, 1, port_name, err, sizeof err));
        CHECK_OK(emu_nl_addr_add(host[i].sock, host_if, ip(addr), 24, host_name, err, sizeof err));
    }
    CHECK_MSG(helper_ping(host[0].fd, "10.252.0.3") == 0, "h0 cannot reach h2 over the bridge");
    CHECK_MSG(helper_ping(host[2].fd, "10.252.0.2") == 0, "h2 cannot reach h1 over the bridge");

    /* One dump lists lo, the bridge and its three ports. */
    struct link_count count = {0, 0};
    CHECK_OK(emu_nl_link_list(sw.sock, count_link, &count, err, sizeof err));
    CHECK_MSG(count.links == 5 && count.ports == 3, "%d links, %d ports", count.links, count.ports);
    /* Deleting a port deletes the veth: its other end leaves host 2. */
    CHECK_OK(emu_nl_link_delete(sw.sock, port, "hn-h4-p2", err, sizeof err));
    CHECK(emu_nl_link_index(host[2].sock, "hn-h4-h2", err, sizeof err) < 0);
    CHECK_MSG(helper_ping(host[0].fd, "10.252.0.3") != 0, "h2 answers without a link");
    CHECK_MSG(helper_ping(host[0].fd, "10.252.0.2") == 0, "h1 lost its link too");
    helper_netns_pin(sw.fd);
    emu_netns_close(&sw);
    for (int i = 0; i < 3; i++) {
        helper_netns_pin(host[i].fd);
        emu_netns_close(&host[i]);
    }
}

static void test_probe(void)
{
    struct emu_nl_features features;
    CHECK_OK(emu_nl_probe(&features, err, sizeof err));
    for (int i = 0; i < EMU_NL_FEATURE_COUNT; i++)
        printf("feature %-6s %s%s%s\n", emu_nl_feature_name(i),
               features.available[i] ? "yes" : "no", features.available[i] ? "" : ": ",
               features.reason[i]);
    CHECK(features.available[EMU_NL_FEATURE_VETH]);
    CHECK(features.available[EMU_NL_FEATURE_HTB]);
    if (!features.available[EMU_NL_FEATURE_NETEM])
        CHECK_CONTAINS(features.reason[EMU_NL_FEATURE_NETEM], "netem");
}

static void test_many(void)
{
    struct emu_netns ns[64];
    unsigned long inodes[64];
    int same = 0, sockets = 0;

    CHECK_OK(emu_netns_create_many(ns, 64, EMU_NETNS_LO_UP, 0, err, sizeof err));
    for (int i = 0; i < 64; i++) {
        inodes[i] = emu_netns_inode(ns[i].fd);
        sockets += ns[i].sock != NULL;
        for (int j = 0; j < i; j++)
            same += inodes[i] == inodes[j];
    }
    CHECK(sockets == 64);
    CHECK_MSG(same == 0, "%d namespaces were the same", same);
    for (int i = 0; i < 64; i++) {
        helper_netns_pin(ns[i].fd);
        emu_netns_close(&ns[i]);
    }
    CHECK(helper_namespaces_held(inodes, 64) == 0);
}

int main(void)
{
    unsigned long line[3], segment[4];
    int own_before, own_after;

    helper_require_root("needs root (network namespaces, veth, routes)");
    if (!helper_have("ping")) CHECK_SKIP("ping is not installed");
    own_before = helper_count_fds();
    test_enter_leave_and_sysctl();
    test_line(line);
    test_switch(segment);
    test_probe();
    test_many();
    CHECK_MSG(helper_namespaces_held(line, 3) == 0, "a namespace of the line is still held");
    CHECK_MSG(helper_namespaces_held(segment, 4) == 0, "a namespace of the switch is still held");
    helper_netns_unpin();
    own_after = helper_count_fds();
    CHECK_MSG(own_after == own_before, "fd leak: %d fds before, %d after", own_before, own_after);
    return check_report();
}
