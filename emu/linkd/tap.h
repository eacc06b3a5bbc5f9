/* tap.h — TAP devices of hiernet-linkd.
 *
 * Provides opening a TAP (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR) inside the
 * network namespace named by a path (/proc/<pid>/ns/net, /proc/<pid>/fd/<n>,
 * /run/netns/<name>), optional MAC / MTU / up of the new device (its queue
 * holds LINKD_TAP_TXQLEN frames, tap.c says why), switching
 * its offloads and removing it. By default the device vanishes with the fd;
 * a persistent one outlives the fd and goes with its namespace. linkd enters
 * the target namespace only for the few syscalls that create the device and
 * returns to its own namespace before anything else runs; the returned fd
 * keeps working from there. The caller owns the returned fd. */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct linkd_tap_config {
    const char *netns_path; /* NULL or "": linkd's own namespace */
    char ifname[IFNAMSIZ];  /* "" lets the kernel pick tapN */
    bool has_mac;
    uint8_t mac[6];
    int mtu; /* 0: leave the default */
    bool up;
    /* Closing the fd leaves the device; the kernel deletes it with its
     * namespace. Deleting a TAP on close costs the kernel a grace period per
     * device (~20 ms), one after another; a dying namespace deletes all of
     * its devices in one batch. Only for namespaces that go away by
     * themselves (held by the processes of a run), or the device stays. */
    bool persist;
};

/* Remembers linkd's own namespace; call once at start-up. */
int linkd_tap_init(char *err, size_t errlen);
void linkd_tap_shutdown(void);

/* Creates the TAP; returns its non-blocking fd, or -1 with err naming the
 * device and the cause. On success ifname holds the name the kernel gave
 * and *ifindex its index inside the target namespace. */
int linkd_tap_open(const struct linkd_tap_config *cfg, char ifname[IFNAMSIZ], int *ifindex,
                   char *err, size_t errlen);

/* Closes fd and deletes its device now, even a persistent one. */
void linkd_tap_remove(int fd);

/* csum: accept partially checksummed frames; tso: also TCP (and UDP) GSO
 * super-frames. */
int linkd_tap_set_offload(int fd, bool csum, bool tso, char *err, size_t errlen);

/* Parses "aa:bb:cc:dd:ee:ff". */
bool linkd_tap_parse_mac(const char *s, uint8_t mac[6]);
