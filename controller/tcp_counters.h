/* tcp_counters.h — a node's TCP counters: what its namespace's TCP did
 * about loss (retransmissions, retransmission timeouts, fast retransmits,
 * retransmissions lost again, loss recoveries), from the kernel's
 * per-namespace /proc/net/snmp ("Tcp:") and /proc/net/netstat ("TcpExt:")
 * as a process in that namespace (the node's peer) sees them. Counters
 * count from the namespace's creation: a node's own since its start. The
 * parser is pure (tests feed it fixed text). Owns nothing. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tcp_counters {
    uint64_t retrans;      /* Tcp RetransSegs: segments sent again */
    uint64_t rtos;         /* TcpExt TCPTimeouts: retransmission timeouts */
    uint64_t fast_retrans; /* TcpExt TCPFastRetrans */
    uint64_t lost_retrans; /* TcpExt TCPLostRetransmit: a retransmission lost again */
    uint64_t recoveries;   /* TcpExt TCPSackRecovery + TCPRenoRecovery: fast recovery episodes */
};

/* The column names, in the order of tcp.csv's counter columns. */
#define TCP_COUNTER_NAMES "retrans", "rtos", "fast_retrans", "lost_retrans", "recoveries"
#define TCP_COUNTERS 5
/* c's counters in that order. */
void tcp_counters_values(const struct tcp_counters *c, uint64_t out[TCP_COUNTERS]);

/* From the texts of snmp and netstat; -1 with err naming the missing table
 * or counter. */
int tcp_counters_parse(const char *snmp, const char *netstat, struct tcp_counters *out, char *err,
                       size_t errlen);
/* From /proc/<pid>/net/{snmp,netstat}: pid's namespace's. -2 when pid is
 * gone (a peer that exited since it was looked up), -1 on any other
 * failure; err says which. */
int tcp_counters_read(pid_t pid, struct tcp_counters *out, char *err, size_t errlen);
