#!/usr/bin/env bash
# linkd_ecn.sh — hiernet-linkd ECN marking: one bulk TCP flow (iperf3, 3 s,
# cubic: BBR v1, which a host may default to, does not react to ECN) through a 100 Mbit/s link with 1 ms delay, a queue of 100 packets and
# ecn_threshold = 10. With the sender's net.ipv4.tcp_ecn = 1 the flow is
# ECN-capable: the link marks CE (marked > 0) and its queue drops nothing.
# With tcp_ecn = 0 (not ECN-capable) nothing is marked and the queue
# overflows as it would without a threshold (drops_queue > 0).
# Args: hiernet-linkd hn-linkd-ctl hn-udp-probe
source "$(dirname "$0")/lib.sh" "$@"
command -v iperf3 >/dev/null || skip "iperf3 not found"
grep -qw cubic /proc/sys/net/ipv4/tcp_available_congestion_control || skip "no cubic congestion control"

ns_add a; ns_add b
ctl_start
link_pair 1 a b 10.9.1 bw=100e6 delay=1000 queue=100 ecn_threshold=10
nsx a ping -c 1 -W 2 10.9.1.2 >/dev/null

# bulk ECN PORT: one 3-second flow a→b with the sender's tcp_ecn set to
# ECN; sets MARKED and DROPPED to what the a→b direction counted meanwhile.
bulk() {
  nsx a sysctl -qw net.ipv4.tcp_ecn="$1"
  rpc link_stats id=1
  local m0 d0
  m0=$(get ab.marked); d0=$(get ab.drops_queue)
  nsx b iperf3 -s -1 -p "$2" >/dev/null 2>&1 &
  local spid=$!
  wait_listening b "$2"
  nsx a iperf3 -C cubic -c 10.9.1.2 -p "$2" -t 3 >/dev/null 2>&1
  wait "$spid"
  rpc link_stats id=1
  MARKED=$(( $(get ab.marked) - m0 )); DROPPED=$(( $(get ab.drops_queue) - d0 ))
}

bulk 1 5301
check "ECN-capable flow: the link marks CE" "$MARKED > 0"
check "ECN-capable flow: the queue drops nothing ($MARKED marked)" "$DROPPED == 0"
bulk 0 5302
check "Not-ECT flow: nothing is marked" "$MARKED == 0"
check "Not-ECT flow: the queue drops as before" "$DROPPED > 0"
finish
