/* nl_probe.c — which link types and qdiscs this kernel has (see nl.h).
 *
 * Each feature is tried for real in a scratch namespace, because a kernel
 * can lack a qdisc even when its headers and tools know it (this one has no
 * sch_netem) and a module may load on first use. The namespace is held only
 * by our fd, so everything in it vanishes when the probe closes it. Used by
 * `hiernet doctor` and by backend "auto". */
#include "emu/nl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/if.h>
#include <linux/if_tun.h>

#include <netlink/msg.h>

#include "emu/netns.h"

static const char *const probe_names[EMU_NL_FEATURE_COUNT] = {
    [EMU_NL_FEATURE_VETH] = "veth", [EMU_NL_FEATURE_BRIDGE] = "bridge",
    [EMU_NL_FEATURE_TUN] = "tun",   [EMU_NL_FEATURE_HTB] = "htb",
    [EMU_NL_FEATURE_TBF] = "tbf",   [EMU_NL_FEATURE_NETEM] = "netem",
    [EMU_NL_FEATURE_RED] = "red",
};

const char *emu_nl_feature_name(enum emu_nl_feature feature)
{
    return feature < EMU_NL_FEATURE_COUNT ? probe_names[feature] : "?";
}

static void probe_record(struct emu_nl_features *features, enum emu_nl_feature feature, int rc,
                         const char *why)
{
    features->available[feature] = rc == 0;
    snprintf(features->reason[feature], sizeof features->reason[feature], "%s", rc == 0 ? "" : why);
}

static void probe_link(struct nl_sock *sock, struct emu_nl_features *features,
                       enum emu_nl_feature feature, struct nl_msg *msg)
{
    char why[EMU_NL_EXTACK_MAX + 64];
    int rc = emu_nl_run(sock, msg, why, sizeof why, "create a %s link", probe_names[feature]);
    probe_record(features, feature, rc, why);
}

/* A TAP device lives while its fd is open, in the namespace the opening
 * thread is in, hence the enter/leave. Returns -1 only when the thread
 * could not get back to its namespace. */
static int probe_tun(int ns_fd, struct emu_nl_features *features, char *err, size_t errlen)
{
    struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
    char why[EMU_NL_EXTACK_MAX + 64];
    int saved, fd, rc = -1;

    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "hnprobetap");
    if (emu_netns_enter(ns_fd, &saved, why, sizeof why) < 0) {
        probe_record(features, EMU_NL_FEATURE_TUN, -1, why);
        return 0;
    }
    fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        snprintf(why, sizeof why, "open /dev/net/tun: %s", strerror(errno));
    else if ((rc = ioctl(fd, TUNSETIFF, &ifr)) < 0)
        snprintf(why, sizeof why, "create a TAP device: %s", strerror(errno));
    if (fd >= 0) close(fd);
    if (emu_netns_leave(&saved, err, errlen) < 0) return -1;
    probe_record(features, EMU_NL_FEATURE_TUN, rc, why);
    return 0;
}

/* Installs a small plan on lo (every namespace has one) and removes it. */
static void probe_qdisc(struct nl_sock *sock, struct emu_nl_features *features,
                        enum emu_nl_feature feature, const struct topo_shape_request *request)
{
    char why[EMU_NL_EXTACK_MAX + 64], ignored[8];
    struct topo_shape_plan plan;
    int rc = topo_shape_plan(request, 1, &plan, why, sizeof why);

    if (rc == 0)
        rc = emu_nl_shape_apply(sock, EMU_NL_LOOPBACK_IFINDEX, "lo", &plan, why, sizeof why);
    if (rc == 0) emu_nl_shape_clear(sock, EMU_NL_LOOPBACK_IFINDEX, "lo", ignored, sizeof ignored);
    probe_record(features, feature, rc, why);
}

/* A qdisc hiernet does not install yet: only whether the kernel has it. */
static void probe_qdisc_kind(struct nl_sock *sock, struct emu_nl_features *features,
                             enum emu_nl_feature feature)
{
    char why[EMU_NL_EXTACK_MAX + 64];
    int rc = emu_nl_qdisc_kind_known(sock, EMU_NL_LOOPBACK_IFINDEX, probe_names[feature], why,
                                     sizeof why);
    probe_record(features, feature, rc, why);
}

int emu_nl_probe(struct emu_nl_features *features, char *err, size_t errlen)
{
    const struct emu_nl_veth_end a = {.ns_fd = -1, .name = "hnprobe0"};
    const struct emu_nl_veth_end b = {.ns_fd = -1, .name = "hnprobe1"};
    const struct topo_shape_request htb = {.rate_bps = 1000000, .root = TOPO_SHAPE_ROOT_HTB};
    const struct topo_shape_request tbf = {.rate_bps = 1000000, .root = TOPO_SHAPE_ROOT_TBF};
    const struct topo_shape_request netem = {.delay_ns = 1000000, .loss = 0.01};
    struct emu_netns ns;

    memset(features, 0, sizeof *features);
    if (emu_netns_create(&ns, EMU_NETNS_SOCKET, err, errlen) < 0) return -1;
    probe_link(ns.sock, features, EMU_NL_FEATURE_VETH, emu_nl_veth_build(&a, &b, 0, 0));
    probe_link(ns.sock, features, EMU_NL_FEATURE_BRIDGE,
               emu_nl_bridge_build("hnprobebr", -1, 0, 0));
    if (probe_tun(ns.fd, features, err, errlen) < 0) {
        emu_netns_close(&ns);
        return -1;
    }
    probe_qdisc(ns.sock, features, EMU_NL_FEATURE_HTB, &htb);
    probe_qdisc(ns.sock, features, EMU_NL_FEATURE_TBF, &tbf);
    probe_qdisc(ns.sock, features, EMU_NL_FEATURE_NETEM, &netem);
    probe_qdisc_kind(ns.sock, features, EMU_NL_FEATURE_RED);
    emu_netns_close(&ns);
    return 0;
}
