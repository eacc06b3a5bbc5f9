#!/usr/bin/env bash
# linkd_burst.sh — a burst that arrives while hiernet-linkd is not running
# waits in the TAP for it instead of being dropped by the kernel: 5,000 UDP
# datagrams sent while linkd is stopped (SIGSTOP, as a loaded host deschedules
# it) all reach linkd once it runs again, the TAP drops none (tun drops what
# its ring cannot hold, and the default ring of 1000 frames dropped 4,000
# here), and the TAP's queue is linkd's LINKD_TAP_TXQLEN.
# Args: hiernet-linkd hn-linkd-ctl hn-udp-probe
source "$(dirname "$0")/lib.sh" "$@"

ns_add a; ns_add b
ctl_start
link_pair 1 a b 10.9.1
nsx a ping -c 1 -W 2 10.9.1.2 >/dev/null # ARP, before linkd stops

qlen=$(nsx a ip -o link show l1 | sed -n 's/.* qlen \([0-9]*\).*/\1/p')
check "the TAP's queue holds 16384 frames" "${qlen:-0} == 16384"
tx_dropped() { nsx a cat /proc/net/dev | awk '$1 == "l1:" { print $13 }'; }
rpc link_stats id=1
p0=$(get ab.packets); d0=$(tx_dropped)

kill -STOP "$LINKD_PID"
nsx a "$PROBE" send 10.9.1.2 9000 1e9 200 5000 2>/dev/null
kill -CONT "$LINKD_PID"
for _ in $(seq 50); do
  rpc link_stats id=1
  (( $(get ab.packets) - p0 >= 5000 )) && break
  sleep 0.1
done
packets=$(( $(get ab.packets) - p0 )); dropped=$(( $(tx_dropped) - d0 ))
echo "sent 5000 while linkd was stopped: linkd read $packets, the TAP dropped $dropped"
check "the TAP dropped none of the burst" "$dropped == 0"
check "linkd read every datagram of the burst" "$packets >= 5000"
finish
