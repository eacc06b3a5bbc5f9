/* underlay.c — the far end of a cut link in hiernet-linkd (see underlay.h). */
#include "emu/linkd/underlay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VXLAN_FLAG_VNI 0x08 /* RFC 7348: "I", the VNI is valid */
/* Enough for a burst of full frames while the loop is busy elsewhere:
 * what overflows is lost before linkd sees it. Root may exceed rmem_max
 * (SO_RCVBUFFORCE); otherwise the kernel caps SO_RCVBUF there. */
#define UNDERLAY_RCVBUF (4 << 20)

static void underlay_name(uint32_t addr, uint16_t port, char *out, size_t outlen)
{
    struct in_addr a = {htonl(addr)};
    char s[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, s, sizeof s);
    snprintf(out, outlen, "%s:%u", s, (unsigned)port);
}

static struct sockaddr_in underlay_addr(uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(addr);
    return sa;
}

/* Never fragment: a frame that does not fit the underlay is lost, as it
 * would be on a wire, and the MTU check before the build prevents it. */
static int underlay_tune(int fd)
{
    int pmtu = IP_PMTUDISC_DO, rcv = UNDERLAY_RCVBUF;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv); /* a cap only costs bursts */
    return setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
}

int linkd_underlay_open(const struct linkd_underlay_config *cfg, char *err, size_t errlen)
{
    char local[32], remote[32];
    underlay_name(cfg->local, cfg->port, local, sizeof local);
    underlay_name(cfg->remote, cfg->port, remote, sizeof remote);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return snprintf(err, errlen, "underlay socket: %s", strerror(errno)), -1;
    struct sockaddr_in me = underlay_addr(cfg->local, cfg->port);
    struct sockaddr_in peer = underlay_addr(cfg->remote, cfg->port);
    const char *what = NULL;
    if (underlay_tune(fd) < 0)
        what = "IP_MTU_DISCOVER";
    else if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0)
        what = errno == EADDRINUSE      ? "bind (the port is another link's on this machine)"
               : errno == EADDRNOTAVAIL ? "bind (not an address of this machine)"
                                        : "bind";
    else if (connect(fd, (struct sockaddr *)&peer, sizeof peer) < 0)
        what = "connect";
    if (!what) return fd;
    snprintf(err, errlen, "underlay %s -> %s (VNI %u): %s: %s", local, remote, cfg->vni, what,
             strerror(errno));
    close(fd);
    return -1;
}

/* RFC 7348's header: flags, 24 reserved bits, the VNI, 8 reserved bits.
 * The first reserved field carries how late the sender sent (underlay.h). */
static void underlay_tag(unsigned char *tag, uint32_t vni, uint32_t late_us)
{
    if (late_us > LINKD_UNDERLAY_LATE_MAX) late_us = LINKD_UNDERLAY_LATE_MAX;
    tag[0] = VXLAN_FLAG_VNI;
    tag[1] = (unsigned char)(late_us >> 16);
    tag[2] = (unsigned char)(late_us >> 8);
    tag[3] = (unsigned char)late_us;
    tag[4] = (unsigned char)(vni >> 16);
    tag[5] = (unsigned char)(vni >> 8);
    tag[6] = (unsigned char)vni;
    tag[7] = 0;
}

static bool underlay_tag_is(const unsigned char *tag, uint32_t vni)
{
    return tag[0] == VXLAN_FLAG_VNI && tag[4] == (unsigned char)(vni >> 16) &&
           tag[5] == (unsigned char)(vni >> 8) && tag[6] == (unsigned char)vni;
}

/* Errors a connected UDP socket reports from ICMP: the other machine's
 * linkd not up yet (or gone), or no route for a while. They concern one
 * earlier datagram, not the socket, which stays usable. */
static bool underlay_icmp_error(int e)
{
    return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH || e == EHOSTDOWN ||
           e == EMSGSIZE;
}

ssize_t linkd_underlay_recv(int fd, uint32_t vni, unsigned char *buf, size_t cap, size_t hdr,
                            uint32_t *late_us)
{
    size_t at = hdr - LINKD_UNDERLAY_TAG;
    ssize_t n = recv(fd, buf + at, cap - at, 0);
    if (n < 0) return underlay_icmp_error(errno) ? 0 : -1;
    const unsigned char *tag = buf + at;
    if ((size_t)n <= LINKD_UNDERLAY_TAG || !underlay_tag_is(tag, vni)) return 0;
    *late_us = (uint32_t)tag[1] << 16 | (uint32_t)tag[2] << 8 | tag[3];
    memset(buf, 0, hdr);
    return (ssize_t)hdr + n - LINKD_UNDERLAY_TAG;
}

ssize_t linkd_underlay_send(int fd, uint32_t vni, uint32_t late_us, unsigned char *pkt, size_t len,
                            size_t hdr)
{
    unsigned char *tag = pkt + hdr - LINKD_UNDERLAY_TAG;
    underlay_tag(tag, vni, late_us);
    ssize_t n = send(fd, tag, len - hdr + LINKD_UNDERLAY_TAG, 0);
    return n < 0 ? -1 : n - (ssize_t)LINKD_UNDERLAY_TAG;
}
