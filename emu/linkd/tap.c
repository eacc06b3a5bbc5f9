/* tap.c — TAP devices of hiernet-linkd (see tap.h). */
#include "emu/linkd/tap.h"
#include "emu/linkd/forward.h" /* linkd_log */

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef TUN_F_USO4
#define TUN_F_USO4 0x20
#define TUN_F_USO6 0x40
#endif

/* Frames the kernel holds for linkd to read (tun's ring, one per TAP).
 * tun drops what does not fit, and nothing holds the sender back: it
 * orphans each frame, so TCP's small queues do not count it, and a host
 * with 32 connections bursts into the ring at memory speed. The default
 * 1000 frames cover a few ms of a loaded host's scheduling gap; a
 * 32-worker parameter server at 100 Gbit/s lost 110,000 frames there in
 * one run (its TAP's tx_dropped) against 9,000 segments dropped by the
 * emulated queue, each a retransmission that the emulated link would not
 * have caused. 16384 frames are 128 KiB of ring per TAP and absorbed it
 * (tx_dropped 0 in the same run after); the emulated queue still drops
 * what the link's queue would (netns.linkd_burst). */
#define LINKD_TAP_TXQLEN 16384

static int tap_self_netns = -1; /* linkd's own namespace */

int linkd_tap_init(char *err, size_t errlen)
{
    tap_self_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (tap_self_netns < 0) {
        snprintf(err, errlen, "open /proc/self/ns/net: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void linkd_tap_shutdown(void)
{
    if (tap_self_netns >= 0) close(tap_self_netns);
    tap_self_netns = -1;
}

bool linkd_tap_parse_mac(const char *s, uint8_t mac[6])
{
    unsigned v[6];
    char tail;
    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) !=
        6)
        return false;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)v[i];
    return !(mac[0] & 1); /* a multicast address cannot name an interface */
}

/* Address, MTU, queue length and state of the new device, set through a socket of the
 * target namespace (we are inside it while this runs). */
static int tap_configure(const struct linkd_tap_config *cfg, const char *ifname, int *ifindex,
                         char *err, size_t errlen)
{
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        snprintf(err, errlen, "TAP %s: socket: %s", ifname, strerror(errno));
        return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    const char *what = "SIOCGIFINDEX";
    int rc = ioctl(sock, SIOCGIFINDEX, &ifr);
    *ifindex = ifr.ifr_ifindex;
    if (rc == 0 && cfg->has_mac) {
        what = "set MAC";
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        memcpy(ifr.ifr_hwaddr.sa_data, cfg->mac, 6);
        rc = ioctl(sock, SIOCSIFHWADDR, &ifr);
    }
    if (rc == 0 && cfg->mtu > 0) {
        what = "set MTU";
        ifr.ifr_mtu = cfg->mtu;
        rc = ioctl(sock, SIOCSIFMTU, &ifr);
    }
    if (rc == 0) {
        what = "set txqueuelen";
        ifr.ifr_qlen = LINKD_TAP_TXQLEN;
        rc = ioctl(sock, SIOCSIFTXQLEN, &ifr);
    }
    if (rc == 0 && cfg->up) {
        what = "set up";
        rc = ioctl(sock, SIOCGIFFLAGS, &ifr);
        ifr.ifr_flags |= IFF_UP;
        if (rc == 0) rc = ioctl(sock, SIOCSIFFLAGS, &ifr);
    }
    if (rc < 0) snprintf(err, errlen, "TAP %s: %s: %s", ifname, what, strerror(errno));
    close(sock);
    return rc;
}

/* Opens /dev/net/tun and creates the device in the current namespace. */
static int tap_create_here(const struct linkd_tap_config *cfg, char ifname[IFNAMSIZ], int *ifindex,
                           char *err, size_t errlen)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "open /dev/net/tun: %s", strerror(errno));
        return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", cfg->ifname);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        snprintf(err, errlen, "TAP %s: TUNSETIFF: %s", cfg->ifname[0] ? cfg->ifname : "(any)",
                 strerror(errno));
        close(fd);
        return -1;
    }
    snprintf(ifname, IFNAMSIZ, "%s", ifr.ifr_name);
    if (tap_configure(cfg, ifname, ifindex, err, errlen) < 0) {
        close(fd); /* not persistent yet: closing removes the device */
        return -1;
    }
    if (cfg->persist && ioctl(fd, TUNSETPERSIST, 1) < 0) {
        snprintf(err, errlen, "TAP %s: TUNSETPERSIST: %s", ifname, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

void linkd_tap_remove(int fd)
{
    /* ENOTTY: not a tun fd (the unit tests forward between socketpairs). */
    if (ioctl(fd, TUNSETPERSIST, 0) < 0 && errno != ENOTTY)
        linkd_log("TUNSETPERSIST 0: %s; the device stays until its namespace goes",
                  strerror(errno));
    close(fd);
}

int linkd_tap_open(const struct linkd_tap_config *cfg, char ifname[IFNAMSIZ], int *ifindex,
                   char *err, size_t errlen)
{
    if (!cfg->netns_path || !cfg->netns_path[0])
        return tap_create_here(cfg, ifname, ifindex, err, errlen);
    int ns = open(cfg->netns_path, O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
        snprintf(err, errlen, "netns %s: %s", cfg->netns_path, strerror(errno));
        return -1;
    }
    if (setns(ns, CLONE_NEWNET) < 0) {
        snprintf(err, errlen, "netns %s: setns: %s", cfg->netns_path, strerror(errno));
        close(ns);
        return -1;
    }
    close(ns);
    int fd = tap_create_here(cfg, ifname, ifindex, err, errlen);
    if (setns(tap_self_netns, CLONE_NEWNET) < 0) {
        /* Continuing in a node's namespace would put every later TAP in the
         * wrong place; dying closes our TAPs and tells the controller. */
        linkd_log("cannot return to own network namespace: %s", strerror(errno));
        _exit(3);
    }
    return fd;
}

int linkd_tap_set_offload(int fd, bool csum, bool tso, char *err, size_t errlen)
{
    unsigned base = csum ? TUN_F_CSUM : 0;
    unsigned flags = base;
    if (csum && tso) flags |= TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6;
    if (ioctl(fd, TUNSETOFFLOAD, flags) == 0) return 0;
    /* Not a tun fd (the unit tests forward between socketpairs): it has no
     * offloads to set. */
    if (errno == ENOTTY) return 0;
    /* Kernels before 6.2 know no UDP segmentation offload. */
    if (errno == EINVAL && (flags & TUN_F_USO4) &&
        ioctl(fd, TUNSETOFFLOAD, flags & ~(TUN_F_USO4 | TUN_F_USO6)) == 0)
        return 0;
    snprintf(err, errlen, "TUNSETOFFLOAD 0x%x: %s", flags, strerror(errno));
    return -1;
}
