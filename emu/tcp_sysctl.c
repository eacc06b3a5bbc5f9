/* tcp_sysctl.c — a node's TCP sysctls (see tcp_sysctl.h). */
#include "emu/tcp_sysctl.h"

#include "emu/netns.h"

int emu_tcp_apply_sysctls(const struct topo_tcp *t, char *err, size_t errlen)
{
    /* 1: ask for ECN on outgoing connections and accept it on incoming ones. */
    if (t->ecn != TOPO_TCP_ECN_DEFAULT &&
        emu_netns_sysctl_write("net/ipv4/tcp_ecn", t->ecn == TOPO_TCP_ECN_ON ? "1" : "0", err,
                               errlen) < 0)
        return -1;
    return 0;
}
