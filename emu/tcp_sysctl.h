/* tcp_sysctl.h — installs a node's TCP settings (topo/tcp.h) that are
 * namespace sysctls rather than route metrics: the part of them the Linux
 * emulation backend writes into the node's namespace. Owns nothing. */
#pragma once

#include "topo/tcp.h"

#include <stddef.h>

/* Writes t's sysctls in the calling thread's namespace (ecn) and, when
 * tso_rtt_log > 0, net.ipv4.tcp_tso_rtt_log (topo_tcp_tso_rtt_log). */
int emu_tcp_apply_sysctls(const struct topo_tcp *t, unsigned tso_rtt_log, char *err, size_t errlen);
