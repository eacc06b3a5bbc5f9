/* nl_vxlan.h — a cross-machine link as a kernel VXLAN device (issue 20).
 *
 * Provides the request that makes one VXLAN device per cross-machine link
 * end: its own VNI, the other machine's underlay address as the only
 * destination, learning off, created by a socket of the machine's
 * namespace straight into the node's namespace (IFLA_NET_NS_FD), so the
 * device is the node's interface while its UDP socket stays on the
 * machine's underlay. Also the MTU rule that keeps a full emulated packet
 * whole: the inner MTU plus VXLAN's 50 bytes of headers must fit the
 * underlay device's MTU, or the link is refused with one line.
 * Conventions of emu/nl.h: addresses in host byte order, 0 or -1 with a
 * one-line message in err. Owns nothing. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct nl_sock;
struct nl_msg;

#define TOPO_VXLAN_PORT 4789        /* IANA's VXLAN port (RFC 7348) */
#define TOPO_VXLAN_VNI_MAX 0xffffff /* 24 bits */
/* What VXLAN adds around an inner Ethernet frame on an IPv4 underlay:
 * outer IPv4 (20) + UDP (8) + VXLAN (8) + the inner Ethernet header (14),
 * which the inner MTU does not count. 1500 inner bytes need 1550. */
#define TOPO_VXLAN_OVERHEAD 50
#define TOPO_VXLAN_INNER_MTU 1500 /* what every emulated link carries */

struct emu_nl_vxlan {
    const char *name;     /* the device's name in the node's namespace, <= 15 characters */
    int node_ns_fd;       /* the node's namespace: where the device goes */
    int ifindex;          /* its ifindex there; 0 = the kernel picks */
    uint32_t vni;         /* 1 .. TOPO_VXLAN_VNI_MAX, one per link */
    uint32_t local;       /* this machine's underlay address */
    uint32_t remote;      /* the other machine's underlay address */
    int underlay_ifindex; /* the underlay device, in the socket's namespace */
    uint16_t port;        /* UDP destination port; 0 = TOPO_VXLAN_PORT */
    unsigned mtu;         /* inner MTU; 0 = TOPO_VXLAN_INNER_MTU */
};

/* The RTM_NEWLINK request for one end. The socket that sends it must be
 * the machine's (the underlay device and the UDP socket are looked up and
 * opened in the sender's namespace). NULL on bad arguments (no name, VNI
 * out of range, no underlay device) or out of memory. */
struct nl_msg *emu_nl_vxlan_build(const struct emu_nl_vxlan *vxlan);

/* Whether an inner MTU fits an underlay MTU: 0, or -1 with one line naming
 * what (the device, "vxlan NAME", or the link, "link A-B"), the underlay
 * device and both figures. */
int emu_vxlan_mtu_check(const char *what, unsigned inner_mtu, const char *underlay_name,
                        unsigned underlay_mtu, char *err, size_t errlen);

/* The MTU of ifindex in the socket's namespace, or -1 (err says why). */
int emu_nl_link_mtu(struct nl_sock *sock, int ifindex, const char *name, char *err, size_t errlen);

/* Checks the name, the VNI and the underlay's MTU, then makes the device.
 * It is left down: bring it up from the node's namespace with its address
 * (emu_nl_interface_up), as the b end of a veth. Nothing is made when a
 * check fails. */
int emu_nl_vxlan_add(struct nl_sock *machine_sock, const struct emu_nl_vxlan *vxlan,
                     const char *underlay_name, char *err, size_t errlen);

/* The interface of the socket's namespace that holds the IPv4 address
 * local (host order), the underlay of the machine's VXLAN ends: its
 * ifindex, its name into name; -1 with err naming the address when no
 * interface has it. */
int emu_nl_underlay_find(struct nl_sock *sock, uint32_t local, char *name, size_t namelen,
                         char *err, size_t errlen);
