/* tcp_sysctl.c — a node's TCP sysctls (see tcp_sysctl.h). */
#include "emu/tcp_sysctl.h"

#include "emu/netns.h"

#include <stdio.h>
#include <unistd.h>

int emu_tcp_apply_sysctls(const struct topo_tcp *t, unsigned tso_rtt_log, char *err, size_t errlen)
{
    /* Kernels before 5.18 have no such sysctl, and no RTT bonus to restore. */
    if (tso_rtt_log && access("/proc/sys/net/ipv4/tcp_tso_rtt_log", F_OK) == 0) {
        char value[16];
        snprintf(value, sizeof value, "%u", tso_rtt_log);
        if (emu_netns_sysctl_write("net/ipv4/tcp_tso_rtt_log", value, err, errlen) < 0) return -1;
    }
    /* 1: ask for ECN on outgoing connections and accept it on incoming ones. */
    if (t->ecn != TOPO_TCP_ECN_DEFAULT &&
        emu_netns_sysctl_write("net/ipv4/tcp_ecn", t->ecn == TOPO_TCP_ECN_ON ? "1" : "0", err,
                               errlen) < 0)
        return -1;
    return 0;
}
