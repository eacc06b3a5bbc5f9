/* ecn.c — CE marking of IPv4 and IPv6 packets (see ecn.h). */
#include "emu/linkd/ecn.h"

#define ECN_ETH_HEADER 14u
#define ECN_ETHERTYPE_IPV4 0x0800u
#define ECN_ETHERTYPE_IPV6 0x86ddu
#define ECN_IPV4_MIN_HEADER 20u
#define ECN_IPV6_HEADER 40u
#define ECN_MASK 0x3u /* the low two bits of the TOS / traffic class */
#define ECN_CE 0x3u

/* RFC 1624 eqn. 3: the checksum after one 16-bit word went from old to new. */
static uint16_t ecn_checksum_update(uint16_t checksum, uint16_t old_word, uint16_t new_word)
{
    uint32_t sum = (uint16_t)~checksum + (uint32_t)(uint16_t)~old_word + new_word;
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    return (uint16_t)~sum;
}

static enum linkd_ecn_result ecn_mark_ipv4(unsigned char *ip, uint32_t len)
{
    if (len < ECN_IPV4_MIN_HEADER || ip[0] >> 4 != 4) return LINKD_ECN_NOT_ECT;
    unsigned ecn = ip[1] & ECN_MASK;
    if (ecn == 0) return LINKD_ECN_NOT_ECT;
    if (ecn == ECN_CE) return LINKD_ECN_ALREADY_CE;
    /* The checksum covers the header as 16-bit big-endian words; the TOS
     * byte is the low half of the first. */
    uint16_t old_word = (uint16_t)(ip[0] << 8 | ip[1]);
    ip[1] |= ECN_CE;
    uint16_t new_word = (uint16_t)(ip[0] << 8 | ip[1]);
    uint16_t checksum = (uint16_t)(ip[10] << 8 | ip[11]);
    checksum = ecn_checksum_update(checksum, old_word, new_word);
    ip[10] = (unsigned char)(checksum >> 8);
    ip[11] = (unsigned char)checksum;
    return LINKD_ECN_MARKED;
}

/* IPv6 has no header checksum; the ECN bits are bits 4-5 of byte 1. */
static enum linkd_ecn_result ecn_mark_ipv6(unsigned char *ip, uint32_t len)
{
    if (len < ECN_IPV6_HEADER || ip[0] >> 4 != 6) return LINKD_ECN_NOT_ECT;
    unsigned ecn = (ip[1] >> 4) & ECN_MASK;
    if (ecn == 0) return LINKD_ECN_NOT_ECT;
    if (ecn == ECN_CE) return LINKD_ECN_ALREADY_CE;
    ip[1] |= ECN_CE << 4;
    return LINKD_ECN_MARKED;
}

enum linkd_ecn_result linkd_ecn_mark_ce(unsigned char *frame, uint32_t len)
{
    if (len < ECN_ETH_HEADER) return LINKD_ECN_NOT_ECT;
    unsigned type = (unsigned)frame[12] << 8 | frame[13];
    if (type == ECN_ETHERTYPE_IPV4)
        return ecn_mark_ipv4(frame + ECN_ETH_HEADER, len - ECN_ETH_HEADER);
    if (type == ECN_ETHERTYPE_IPV6)
        return ecn_mark_ipv6(frame + ECN_ETH_HEADER, len - ECN_ETH_HEADER);
    return LINKD_ECN_NOT_ECT;
}
