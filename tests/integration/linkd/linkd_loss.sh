#!/usr/bin/env bash
# linkd_loss.sh — hiernet-linkd loss: loss=0.01 drops 1% ± 0.3% of 20,000 UDP
# datagrams, the link's counters agree with what iperf3 reports within 1%,
# and the Gilbert-Elliott model gives its stationary loss rate.
# The Bernoulli and the Gilbert-Elliott runs go at once, each on a link of
# its own (8 s each at 20 Mbit/s: one after the other they were 16 of the
# test's 17 s; at 40 Mbit/s 4 s, the same 20,000 datagrams on 100 Mbit/s
# links); each link's counters see only its own run.
# Args: hiernet-linkd hn-linkd-ctl hn-udp-probe
source "$(dirname "$0")/lib.sh" "$@"
command -v iperf3 >/dev/null || skip "iperf3 not found"

ns_add a; ns_add b
ctl_start
link_pair 1 a b 10.9.1 bw=100e6 delay=1000 queue=1000
link_pair 2 a b 10.9.2 bw=100e6 delay=1000 queue=1000
nsx a ping -c 1 -W 2 10.9.1.2 >/dev/null
nsx a ping -c 1 -W 2 10.9.2.2 >/dev/null

# udp_start PORT ADDR: 20,000 datagrams of 1000 bytes a→b at 40 Mbit/s to
# ADDR, in the background (UDP_PIDS); udp_result PORT prints "sent lost"
# from the iperf3 server's report once both have ended.
UDP_PIDS=()
udp_start() {
  nsx b iperf3 -s -1 -p "$1" -J >"$PFX.srv$1.json" 2>/dev/null &
  UDP_PIDS+=($!)
  wait_listening b "$1"
  nsx a iperf3 -c "$2" -p "$1" -u -b 40M -l 1000 -k 20000 >/dev/null 2>&1 &
  UDP_PIDS+=($!)
  BG_PIDS=${UDP_PIDS[*]} # ended by the exit trap if the test is
}
udp_result() {
  python3 -c "import json; s=json.load(open('$PFX.srv$1.json'))['end']['sum']; print(s['packets'], s['lost_packets'])"
  rm -f "$PFX.srv$1.json"
}

rpc link_set id=1 ab.loss=0.01
# Gilbert-Elliott: P(good→bad)=0.01, P(bad→good)=0.3, bad state loses all:
# stationary loss 0.01 / 0.31 = 3.2%
rpc link_set id=2 ab.ge_p=0.01 ab.ge_r=0.3
rpc link_stats id=1
p0=$(get ab.packets); l0=$(get ab.drops_loss); d0=$(get ab.delivered)
udp_start 5301 10.9.1.2
udp_start 5302 10.9.2.2
wait "${UDP_PIDS[@]}"
# shellcheck disable=SC2034 # read by lib.sh's exit trap
BG_PIDS= # reaped: their pids may be another process's now
read -r sent lost < <(udp_result 5301)
rpc link_stats id=1
packets=$(( $(get ab.packets) - p0 )); drops=$(( $(get ab.drops_loss) - l0 ))
delivered=$(( $(get ab.delivered) - d0 ))
echo "iperf3: sent=$sent lost=$lost; link: packets=$packets drops_loss=$drops delivered=$delivered"
check "loss 1% ± 0.3% of 20000 datagrams" "abs(${lost:-0} / ${sent:-1} - 0.01) <= 0.003"
# The iperf3 control connection shares the link: a few dozen packets.
check "link packets match iperf3 datagrams within 1%" "abs($packets / ${sent:-1} - 1) <= 0.01"
check "link deliveries match iperf3 within 1%" "abs($delivered / (${sent:-1} - ${lost:-0}) - 1) <= 0.01"
check "link drops match iperf3 losses within 1% of the datagrams" "abs($drops - ${lost:-0}) <= 0.01 * ${sent:-1}"

read -r sent lost < <(udp_result 5302)
check "Gilbert-Elliott loss 3.2% ± 1%" "abs(${lost:-0} / ${sent:-1} - 0.01 / 0.31) <= 0.01"
finish
