/* underlay_rtt.h — the round trip to another machine's underlay address,
 * measured with ICMP echo (issue 20 item 3; docs/design-notes.md,
 * "Several machines: the underlay's delay").
 *
 * The kernel of the far machine answers the echo itself, so nothing has
 * to listen there: the agents keep listening on nothing but VXLAN's port.
 * An unprivileged ICMP socket (SOCK_DGRAM, net.ipv4.ping_group_range) is
 * tried first, a raw one (CAP_NET_RAW) second. The wait is bounded
 * (samples x timeout at most) and happens before a spread build, once,
 * like the build's own netlink calls: the caller's loop is held for it.
 * Owns nothing past the call: the socket is closed before it returns. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define UNDERLAY_RTT_SAMPLES 5            /* echoes per address; the minimum is kept */
#define UNDERLAY_RTT_TIMEOUT_NS 300000000 /* one echo's answer, at most (0.3 s) */

/* The smallest of `samples` echo round trips to address (IPv4, host
 * order), in ns, into *rtt_ns. 0, or -1 with err naming the address and
 * why (no ICMP socket allowed, no answer to any echo within the timeout). */
int underlay_rtt_measure(uint32_t address, int samples, int64_t *rtt_ns, char *err, size_t errlen);
