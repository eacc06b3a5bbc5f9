/* underlay.h — the far end of a cut link in hiernet-linkd (issue 20).
 *
 * Provides the UDP socket that stands for the other machine's end of a
 * link whose ends are on two machines: bound to this machine's underlay
 * address and the link's port, connected to the other machine's underlay
 * address and the same port, so the kernel hands it only datagrams from
 * there (a connected UDP socket matches the whole 4-tuple). Each datagram
 * is one Ethernet frame behind an 8-byte VXLAN header (RFC 7348: flags
 * 0x08, the link's VNI), which linkd checks on receipt: a frame of
 * another VNI is dropped. The header's first reserved field (24 bits)
 * carries how late the sender sent the frame, in microseconds: the
 * receiving linkd dates the frame's arrival back by it and by its own
 * wake-up (forward.c), as a linkd does for a frame read from a TAP, so
 * neither machine's scheduling adds to the link's delay, which the
 * receiver applies. The outer packet costs what a kernel VXLAN
 * device's does (emu/nl_vxlan.h: TOPO_VXLAN_OVERHEAD), and never
 * fragments (IP_PMTUDISC_DO). The caller owns the returned fd. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LINKD_UNDERLAY_TAG 8u             /* the VXLAN header in front of each frame */
#define LINKD_UNDERLAY_LATE_MAX 0xffffffu /* µs: what the 24 bits hold */

struct linkd_underlay_config {
    uint32_t local, remote; /* underlay IPv4 addresses, host order */
    uint16_t port;          /* the link's UDP port, the same at both ends */
    uint32_t vni;           /* 1 .. 2^24 - 1 */
};

/* A non-blocking socket bound and connected as above; -1 with err naming
 * the address and port at fault. */
int linkd_underlay_open(const struct linkd_underlay_config *cfg, char *err, size_t errlen);

/* Reads one datagram into buf so that its frame starts at buf + hdr (hdr:
 * the virtio-net header the TAP side expects, >= LINKD_UNDERLAY_TAG), and
 * zeroes buf[0..hdr): a plain frame, its checksums complete; *late_us is
 * the sender's lateness. Returns hdr + frame bytes; 0 for a datagram to
 * skip (short, not VXLAN, another VNI, or an ICMP error of the socket's:
 * the other end not up yet); -1 with errno (EAGAIN: nothing more). */
ssize_t linkd_underlay_recv(int fd, uint32_t vni, unsigned char *buf, size_t cap, size_t hdr,
                            uint32_t *late_us);

/* Sends the frame at pkt + hdr, sent late_us after it was due, writing
 * the tag over the end of the virtio-net header in front of it. Returns
 * the frame bytes sent, or -1 with errno. */
ssize_t linkd_underlay_send(int fd, uint32_t vni, uint32_t late_us, unsigned char *pkt, size_t len,
                            size_t hdr);
