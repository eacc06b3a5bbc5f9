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

# The two flows go at once, each between namespaces of its own (tcp_ecn is
# a namespace's setting) over a link of its own, whose counters see only
# its flow: 200 Mbit/s in all, a small load for one linkd.
ns_add a1; ns_add b1; ns_add a2; ns_add b2
ctl_start
for id in 1 2; do
  link_pair "$id" "a$id" "b$id" "10.9.$id" bw=100e6 delay=1000 queue=100 ecn_threshold=10
  nsx "a$id" ping -c 1 -W 2 "10.9.$id.2" >/dev/null
done

# bulk ID ECN: one 3-second flow a<ID> -> b<ID> over link ID with the
# sender's tcp_ecn set to ECN, in the background (BULK_PIDS).
BULK_PIDS=()
bulk() {
  nsx "a$1" sysctl -qw net.ipv4.tcp_ecn="$2"
  nsx "b$1" iperf3 -s -1 -p 5301 >/dev/null 2>&1 &
  BULK_PIDS+=($!)
  wait_listening "b$1" 5301
  nsx "a$1" iperf3 -C cubic -c "10.9.$1.2" -p 5301 -t 3 >/dev/null 2>&1 &
  BULK_PIDS+=($!)
  BG_PIDS=${BULK_PIDS[*]} # ended by the exit trap if the test is
}
# counted ID: sets MARKED and DROPPED to what link ID's a->b direction
# counted since the start (the link is the flow's own).
counted() {
  rpc link_stats id="$1"
  MARKED=$(get ab.marked) DROPPED=$(get ab.drops_queue)
}

bulk 1 1
bulk 2 0
wait "${BULK_PIDS[@]}"
# shellcheck disable=SC2034 # read by lib.sh's exit trap
BG_PIDS= # reaped: their pids may be another process's now
counted 1
check "ECN-capable flow: the link marks CE" "$MARKED > 0"
check "ECN-capable flow: the queue drops nothing ($MARKED marked)" "$DROPPED == 0"
counted 2
check "Not-ECT flow: nothing is marked" "$MARKED == 0"
check "Not-ECT flow: the queue drops as before" "$DROPPED > 0"
finish
