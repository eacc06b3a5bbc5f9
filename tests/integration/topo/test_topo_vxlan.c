/* test_topo_vxlan.c — a cross-machine link as a kernel VXLAN device (label
 * netns, root; issue 20). Two "machine" namespaces joined by an underlay
 * veth (10.250.0.1 and .2), a node namespace on each, and one VXLAN link
 * (VNI 4242) between the nodes made by emu_nl_vxlan_add from each
 * machine's socket, shaped with HTB at both ends like any link:
 *   - an underlay of MTU 1500 is refused in one line, and nothing is made;
 *   - the device is in the node's namespace with the VNI, remote, local,
 *     port and learning given, and its UDP socket is the machine's;
 *   - ping works, also a whole 1500-byte packet with DF set;
 *   - iperf3 reaches the ideal TCP goodput of the HTB rate within 5%
 *     (topo_shape_tcp_goodput_bps, as test_topo_shape: the vxlan device's
 *     egress counts inner Ethernet frames, as a veth's does);
 *   - while a server listens in a node, no TCP port is open in either
 *     machine's namespace (the underlay carries VXLAN's UDP only);
 *   - at the end no namespace is held and the host got no interface. */
#include <arpa/inet.h>

#include "helpers.h"
#include "emu/netns.h"
#include "emu/nl.h"
#include "emu/nl_vxlan.h"
#include "topo/shape.h"

#define VNI 4242
#define RATE_BPS 100000000ULL
#define TOLERANCE 0.05
#define SECONDS 3

static char err[512], out[65536];

#define CHECK_OK(call) CHECK_MSG((call) == 0, "%s", err)

/* One side: a machine with its underlay end, and its node. */
struct side {
    struct emu_netns machine, node;
    int underlay_if, vxlan_if;
    const char *underlay_name, *vxlan_name, *underlay_addr, *node_addr;
};

static uint32_t ip(const char *text)
{
    return ntohl(inet_addr(text));
}

static int underlay_create(struct side *a, struct side *b, unsigned mtu)
{
    struct emu_nl_veth_end ea = {.ns_fd = a->machine.fd, .name = a->underlay_name};
    struct emu_nl_veth_end eb = {.ns_fd = b->machine.fd, .name = b->underlay_name};

    ea.ifindex = a->underlay_if = emu_netns_ifindex_alloc(&a->machine);
    eb.ifindex = b->underlay_if = emu_netns_ifindex_alloc(&b->machine);
    if (emu_nl_veth_add(a->machine.sock, &ea, &eb, mtu, 1, err, sizeof err) < 0 ||
        emu_nl_addr_add(a->machine.sock, a->underlay_if, ip(a->underlay_addr), 24, a->underlay_name,
                        err, sizeof err) < 0)
        return -1;
    return emu_nl_interface_up(b->machine.sock, b->underlay_if, b->underlay_name,
                               ip(b->underlay_addr), 24, err, sizeof err);
}

static struct emu_nl_vxlan vxlan_of(struct side *self, const struct side *other)
{
    struct emu_nl_vxlan vxlan = {.name = self->vxlan_name,
                                 .node_ns_fd = self->node.fd,
                                 .vni = VNI,
                                 .local = ip(self->underlay_addr),
                                 .remote = ip(other->underlay_addr),
                                 .underlay_ifindex = self->underlay_if};
    return vxlan;
}

/* Both ends made, addressed, up and shaped alike. */
static int link_create(struct side *s, const struct side *other, const struct topo_shape_plan *plan)
{
    struct emu_nl_vxlan vxlan = vxlan_of(s, other);

    vxlan.ifindex = s->vxlan_if = emu_netns_ifindex_alloc(&s->node);
    if (emu_nl_vxlan_add(s->machine.sock, &vxlan, s->underlay_name, err, sizeof err) < 0 ||
        emu_nl_interface_up(s->node.sock, s->vxlan_if, s->vxlan_name, ip(s->node_addr), 30, err,
                            sizeof err) < 0)
        return -1;
    return emu_nl_shape_apply(s->node.sock, s->vxlan_if, s->vxlan_name, plan, err, sizeof err);
}

/* Runs a command in a namespace, its output in out. */
static int run_argv(int ns_fd, char *const argv[])
{
    out[0] = '\0';
    return helper_run(ns_fd, argv, out, sizeof out, 10);
}
#define run_in(ns_fd, ...) run_argv(ns_fd, (char *[]){__VA_ARGS__, NULL})

static void underlay_mtu(struct side *s, int mtu)
{
    char value[16], *argv[] = {"ip", "link", "set", (char *)s->underlay_name, "mtu", value, NULL};
    snprintf(value, sizeof value, "%d", mtu);
    CHECK_MSG(helper_run(s->machine.fd, argv, out, sizeof out, 10) == 0, "%s mtu %d: %s",
              s->underlay_name, mtu, out);
}

/* A ping, and a whole 1500-byte packet with DF set (1472 bytes of ICMP
 * payload): the inner MTU is usable end to end, nothing fragments. */
static void expect_ping(struct side *a, struct side *b)
{
    char *big[] = {
        "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", "-q", (char *)b->node_addr, NULL};
    CHECK_MSG(helper_ping(a->node.fd, b->node_addr) == 0, "ping across the vxlan link failed");
    CHECK_MSG(helper_run(a->node.fd, big, out, sizeof out, 5) == 0,
              "a 1500-byte packet with DF did not cross: %s", out);
}

static void expect_refused_small_underlay(struct side *a, struct side *b)
{
    struct emu_nl_vxlan vxlan = vxlan_of(a, b);

    vxlan.ifindex = emu_netns_ifindex_alloc(&a->node);
    CHECK(emu_nl_vxlan_add(a->machine.sock, &vxlan, a->underlay_name, err, sizeof err) < 0);
    CHECK_STREQ(err, "vxlan hn-vx-a: underlay hn-u-a has MTU 1500, below the 1550 that a "
                     "1500-byte packet needs over VXLAN (50 bytes of headers): raise the "
                     "underlay's MTU");
    run_in(a->node.fd, "ip", "-br", "link");
    CHECK_MSG(!strstr(out, "hn-vx-a"), "a refused link left a device: %s", out);
}

static void expect_device(struct side *s, const char *expected)
{
    run_in(s->node.fd, "ip", "-d", "link", "show");
    CHECK_MSG(strstr(out, expected) != NULL, "%s: no \"%s\" in: %s", s->vxlan_name, expected, out);
    /* The socket is the machine's: the node has no UDP socket at all. */
    run_in(s->machine.fd, "ss", "-Hlun");
    CHECK_MSG(strstr(out, ":4789") != NULL, "machine of %s has no VXLAN socket: %s", s->vxlan_name,
              out);
    run_in(s->node.fd, "ss", "-Hlun");
    CHECK_MSG(out[0] == '\0', "node of %s has a UDP socket: %s", s->vxlan_name, out);
}

/* While iperf3 listens in node b, ss in each machine lists no TCP
 * listener, and in node b it does (so ss is looking). */
static void expect_no_tcp_on_underlay(struct side *a, struct side *b)
{
    char *server[] = {"iperf3", "-s", "-1", "-p", "5202", NULL};
    pid_t pid = helper_spawn(b->node.fd, server, -1);

    for (int attempt = 0; attempt < 100; attempt++) {
        usleep(20000);
        run_in(b->node.fd, "ss", "-Hltn");
        if (strstr(out, ":5202")) break;
    }
    CHECK_MSG(strstr(out, ":5202") != NULL, "iperf3 never listened in node b: %s", out);
    run_in(a->machine.fd, "ss", "-Hltn");
    CHECK_MSG(out[0] == '\0', "machine a listens on TCP: %s", out);
    run_in(b->machine.fd, "ss", "-Hltn");
    CHECK_MSG(out[0] == '\0', "machine b listens on TCP: %s", out);
    kill(pid, SIGTERM);
    helper_wait(pid, mono_s() + 5);
}

static void expect_goodput(struct side *a, struct side *b)
{
    double ideal = topo_shape_tcp_goodput_bps(RATE_BPS, TOPO_VXLAN_INNER_MTU);
    double got = helper_iperf3(b->node.fd, a->node.fd, b->node_addr, SECONDS, out, sizeof out);

    printf("vxlan HTB 100 Mbit/s: ideal %.2f Mbit/s, measured %.2f Mbit/s (%+.2f%%)\n", ideal / 1e6,
           got / 1e6, (got / ideal - 1) * 100);
    CHECK_MSG(got > 0, "iperf3 failed: %.300s", out);
    CHECK_MSG(got >= ideal * (1 - TOLERANCE) && got <= ideal * (1 + TOLERANCE),
              "%.2f Mbit/s is not within 5%% of %.2f Mbit/s", got / 1e6, ideal / 1e6);
}

static void sides_create(struct side *a, struct side *b)
{
    unsigned flags = EMU_NETNS_LO_UP | EMU_NETNS_NO_IPV6;
    struct side *both[] = {a, b};

    for (int i = 0; i < 2; i++) {
        CHECK_OK(emu_netns_create(&both[i]->machine, flags, err, sizeof err));
        CHECK_OK(emu_netns_create(&both[i]->node, flags, err, sizeof err));
    }
}

int main(void)
{
    struct side a = {.underlay_name = "hn-u-a",
                     .vxlan_name = "hn-vx-a",
                     .underlay_addr = "10.250.0.1",
                     .node_addr = "10.0.0.1"};
    struct side b = {.underlay_name = "hn-u-b",
                     .vxlan_name = "hn-vx-b",
                     .underlay_addr = "10.250.0.2",
                     .node_addr = "10.0.0.2"};
    struct topo_shape_request request = {.rate_bps = RATE_BPS};
    struct topo_shape_plan plan;
    unsigned long inodes[4];

    helper_require_root("needs root (network namespaces, vxlan, qdiscs)");
    if (!helper_have("iperf3") || !helper_have("ss") || !helper_have("ping"))
        CHECK_SKIP("iperf3, ss (iproute2) or ping is not installed");
    CHECK_OK(topo_shape_plan(&request, 0, &plan, err, sizeof err));
    sides_create(&a, &b);
    inodes[0] = emu_netns_inode(a.machine.fd), inodes[1] = emu_netns_inode(a.node.fd);
    inodes[2] = emu_netns_inode(b.machine.fd), inodes[3] = emu_netns_inode(b.node.fd);

    CHECK_OK(underlay_create(&a, &b, 1500));
    expect_refused_small_underlay(&a, &b);
    underlay_mtu(&a, 1550);
    underlay_mtu(&b, 1550);
    CHECK_OK(link_create(&a, &b, &plan));
    CHECK_OK(link_create(&b, &a, &plan));

    expect_device(&a, "vxlan id 4242 remote 10.250.0.2 local 10.250.0.1");
    expect_device(&b, "vxlan id 4242 remote 10.250.0.1 local 10.250.0.2");
    run_in(a.node.fd, "ip", "-d", "link", "show");
    CHECK_MSG(strstr(out, "dstport 4789 nolearning") != NULL, "port or learning: %s", out);
    CHECK_MSG(strstr(out, "mtu 1500") != NULL, "inner MTU: %s", out);
    /* Its link (the underlay) is in another namespace, the machine's. */
    CHECK_MSG(strstr(out, "link-netnsid") != NULL, "underlay in the node's namespace: %s", out);

    expect_ping(&a, &b);
    expect_no_tcp_on_underlay(&a, &b);
    expect_goodput(&a, &b);

    emu_netns_close(&a.node), emu_netns_close(&a.machine);
    emu_netns_close(&b.node), emu_netns_close(&b.machine);
    CHECK(helper_namespaces_held(inodes, 4) == 0);
    CHECK(!helper_host_has_link("hn-vx-a") && !helper_host_has_link("hn-u-a"));
    return check_report();
}
