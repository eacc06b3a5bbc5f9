/* ecn.h — Congestion Experienced marking of one Ethernet frame.
 *
 * Provides what hiernet-linkd's queue does to an ECN-capable packet instead
 * of dropping it (RFC 3168): the two ECN bits of an IPv4 header's TOS byte
 * (or an IPv6 header's traffic class) set to CE, the IPv4 header checksum
 * updated to match. A GSO super-frame carries one IP header that every
 * segment is cut from, so marking it marks every segment. Pure functions on
 * a caller's buffer: no allocation, no state. */
#pragma once

#include <stdint.h>

enum linkd_ecn_result {
    LINKD_ECN_NOT_ECT, /* not IP, too short, or Not-ECT: the queue treats it as before */
    LINKD_ECN_ALREADY_CE,
    LINKD_ECN_MARKED, /* was ECT(0) or ECT(1), now CE */
};

/* frame: the Ethernet frame (no virtio-net header), len its bytes. */
enum linkd_ecn_result linkd_ecn_mark_ce(unsigned char *frame, uint32_t len);
