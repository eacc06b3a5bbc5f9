/* vxlan_end.c — hn-vxlan-end: makes one end of a cross-machine link with
 * emu/nl_vxlan.h, as an agent will (issue 20), for the cluster tests.
 *
 *   hn-vxlan-end NODE_PID NAME VNI LOCAL REMOTE UNDERLAY NODE_ADDR/PREFIX RATE_BPS
 *
 * Run on the machine (over SSH in the test): the VXLAN device is made by
 * a socket of the machine's namespace (the caller's) into the namespace of
 * process NODE_PID, given NODE_ADDR, brought up and shaped with HTB at
 * RATE_BPS (0: unshaped). Exit 0, or 1 with one line on stderr. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/netns.h"
#include "emu/nl.h"
#include "emu/nl_vxlan.h"
#include "topo/shape.h"

static char err[512];

static uint32_t ip(const char *text)
{
    struct in_addr addr;
    if (inet_pton(AF_INET, text, &addr) != 1) {
        fprintf(stderr, "hn-vxlan-end: bad IPv4 address \"%s\"\n", text);
        exit(1);
    }
    return ntohl(addr.s_addr);
}

static int node_ns_open(const char *pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/ns/net", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) snprintf(err, sizeof err, "open %s: %m", path);
    return fd;
}

/* Address, up and shaping, from the node's namespace. */
static int node_side(int node_fd, const char *name, const char *cidr, uint64_t rate_bps)
{
    struct topo_shape_request request = {.rate_bps = rate_bps};
    struct topo_shape_plan plan;
    char addr[32];
    const char *slash = strchr(cidr, '/');
    struct nl_sock *sock = emu_netns_nl_open(node_fd, err, sizeof err);
    int ifindex, rc = -1;

    if (!sock) return -1;
    snprintf(addr, sizeof addr, "%.*s", slash ? (int)(slash - cidr) : (int)strlen(cidr), cidr);
    if ((ifindex = emu_nl_link_index(sock, name, err, sizeof err)) > 0 &&
        emu_nl_interface_up(sock, ifindex, name, ip(addr), slash ? atoi(slash + 1) : 32, err,
                            sizeof err) == 0 &&
        emu_nl_loopback_setup(sock, 0, err, sizeof err) == 0 &&
        (rate_bps == 0 || (topo_shape_plan(&request, 0, &plan, err, sizeof err) == 0 &&
                           emu_nl_shape_apply(sock, ifindex, name, &plan, err, sizeof err) == 0)))
        rc = 0;
    emu_nl_close(sock);
    return rc;
}

int main(int argc, char **argv)
{
    struct emu_nl_vxlan vxlan = {0};
    struct nl_sock *machine;
    int node_fd, rc = 1;

    if (argc != 9) {
        fprintf(stderr, "usage: hn-vxlan-end NODE_PID NAME VNI LOCAL REMOTE UNDERLAY "
                        "NODE_ADDR/PREFIX RATE_BPS\n");
        return 2;
    }
    if ((node_fd = node_ns_open(argv[1])) < 0 || !(machine = emu_nl_open(err, sizeof err))) {
        fprintf(stderr, "hn-vxlan-end: %s\n", err);
        return 1;
    }
    vxlan.name = argv[2];
    vxlan.node_ns_fd = node_fd;
    vxlan.vni = (uint32_t)strtoul(argv[3], NULL, 10);
    vxlan.local = ip(argv[4]);
    vxlan.remote = ip(argv[5]);
    vxlan.underlay_ifindex = emu_nl_link_index(machine, argv[6], err, sizeof err);
    if (vxlan.underlay_ifindex > 0 &&
        emu_nl_vxlan_add(machine, &vxlan, argv[6], err, sizeof err) == 0 &&
        node_side(node_fd, argv[2], argv[7], strtoull(argv[8], NULL, 10)) == 0)
        rc = 0;
    if (rc) fprintf(stderr, "hn-vxlan-end: %s\n", err);
    emu_nl_close(machine);
    close(node_fd);
    return rc;
}
