/* tcp.h — a node's TCP settings (docs/lua-api.md "TCP settings"): the
 * congestion control, minimum RTO, ECN and initial congestion window its
 * namespace's TCP uses, and how they are checked and recorded (the
 * Linux emulation backend installs them: emu/tcp_sysctl.h, emu/nl.h).
 *
 * ecn is a per-namespace sysctl (net.ipv4.tcp_ecn), written from inside
 * the node's namespace; cc, rto_min and init_cwnd are route metrics
 * (RTAX_CC_ALGO, RTAX_RTO_MIN locked as iproute2 locks it, RTAX_INITCWND)
 * on every route the backend installs for the node, so they reach every
 * peer connection (peers talk between node addresses, which only those
 * routes reach). cc is a route's and not the namespace's default
 * (net.ipv4.tcp_congestion_control) because a namespace other than the
 * host's may only default to tcp_allowed_congestion_control (EPERM for
 * cubic on a host that allows "reno bbr"), a route may name any available
 * one. A zeroed struct asks for nothing: the kernel's defaults. Owns
 * nothing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOPO_TCP_CC_MAX 16 /* TCP_CA_NAME_MAX */
#define TOPO_TCP_INIT_CWND_MAX 1024

enum topo_tcp_ecn { TOPO_TCP_ECN_DEFAULT, TOPO_TCP_ECN_OFF, TOPO_TCP_ECN_ON };

struct topo_tcp {
    char cc[TOPO_TCP_CC_MAX]; /* "" = the kernel's default */
    uint64_t rto_min_ns;      /* 0 = the kernel's (200 ms); whole ms */
    enum topo_tcp_ecn ecn;
    unsigned init_cwnd; /* 0 = the kernel's (10 segments) */
};

/* Whether t asks for anything. */
bool topo_tcp_any(const struct topo_tcp *t);

/* Setters from a scenario's values; each refuses, in one line quoting the
 * value, what the kernel cannot do. cc must be listed in
 * /proc/sys/net/ipv4/tcp_available_congestion_control (read from the
 * caller's namespace: the list is the kernel's, not a namespace's). */
int topo_tcp_set_cc(struct topo_tcp *t, const char *cc, char *err, size_t errlen);
int topo_tcp_set_rto_min(struct topo_tcp *t, const char *text, char *err, size_t errlen);
int topo_tcp_set_init_cwnd(struct topo_tcp *t, double cwnd, char *err, size_t errlen);

/* The rto_min metric to install under dilation d (>= 1), in ms: the
 * kernel's timer runs in real time. 0 when rto_min is the kernel's. */
unsigned topo_tcp_rto_min_metric_ms(const struct topo_tcp *t, double d);

/* net.ipv4.tcp_tso_rtt_log for a host under dilation d; 0 = leave the
 * kernel's. Linux sizes a TSO burst to about 1 ms of real time at the
 * flow's pacing rate plus, for flows of a short minimum RTT, up to a whole
 * 64 KB GSO frame: gso_max_size >> (min_rtt_us >> tcp_tso_rtt_log), the
 * log 9 by default (tcp_tso_autosize, Linux 5.18). Dilation multiplies
 * every RTT by d, so a flow whose emulated RTT earns it 64 KB bursts gets
 * none of that in real time and sends 3 to 10 KB frames (32 flows at 100
 * Gbit/s, d = 43), each a pass through the host's data plane. Adding
 * log2(d) to the log, rounded, gives each flow the bonus of its emulated
 * RTT again (exactly when d is a power of two), whatever its congestion
 * control (BBR's own floor of 2 segments included). */
#define TOPO_TCP_TSO_RTT_LOG_KERNEL 9 /* a new namespace's value (tcp_sk_init) */
unsigned topo_tcp_tso_rtt_log(double d);
/* t as a JSON object of the keys it sets ({} when none): run.json. */
void topo_tcp_write_json(const struct topo_tcp *t, FILE *f);
