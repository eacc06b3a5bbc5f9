#!/usr/bin/env bash
# linkd_basic.sh — hiernet-linkd on a 3-hop chain h1 - r1 - r2 - h2, 5 ms per
# hop: ping RTT, link_down/up, jitter keeps order unless reorder=true, bad
# requests are refused, and the TAPs vanish when the controller is killed
# (persistent ones with their namespaces).
# Args: hiernet-linkd hn-linkd-ctl hn-udp-probe
source "$(dirname "$0")/lib.sh" "$@"

for n in h1 r1 r2 h2; do ns_add "$n"; done
ctl_start
link_pair 1 h1 r1 10.9.1 delay=5000
link_pair 2 r1 r2 10.9.2 delay=5000
link_pair 3 r2 h2 10.9.3 delay=5000
for r in r1 r2; do nsx "$r" sysctl -qw net.ipv4.ip_forward=1; done
nsx h1 ip route add default via 10.9.1.2
nsx r1 ip route add 10.9.3.0/24 via 10.9.2.2
nsx r2 ip route add 10.9.1.0/24 via 10.9.2.1
nsx h2 ip route add default via 10.9.3.1

rtt1=$(ping_avg h1 10.9.1.2 20)
check "1 hop, 5 ms each way: RTT 10 ms ± 1 ms" "abs(${rtt1:-0} - 10) <= 1"
rtt3=$(ping_avg h1 10.9.3.2 20)
check "3 hops, 5 ms each way: RTT 30 ms ± 1 ms" "abs(${rtt3:-0} - 30) <= 1"

# link_down drops everything, link_up restores it. Down, ping waits 0.2 s
# after its last echo (the path's RTT is 30 ms) instead of 1 s.
rpc link_down id=2
lost=$(nsx h1 ping -q -c 5 -i 0.1 -W 0.2 10.9.3.2 | sed -n 's/.* \([0-9]*\) received.*/\1/p')
check "link_down stops traffic" "${lost:-1} == 0"
rpc link_stats id=2
check "drops counted as down" "$(get ab.drops_down) >= 5 and '$(get up)' == 'false'"
rpc link_up id=2
got=$(nsx h1 ping -q -c 5 -i 0.1 -W 1 10.9.3.2 | sed -n 's/.* \([0-9]*\) received.*/\1/p')
check "link_up restores traffic" "${got:-0} == 5"

# jitter ±3 ms on a 1 ms link: order kept, unless reorder=true
rpc link_set id=3 delay=1000 jitter=3000
order_run() {
  nsx h2 "$PROBE" recv 9000 3000 >"$PFX.recv" &
  local rpid=$!
  wait_listening h2 9000 udp
  nsx h1 "$PROBE" send 10.9.3.2 9000 20e6 200 3000
  wait "$rpid"
  sed -n 's/.*reordered=\([0-9]*\).*/\1/p' "$PFX.recv"
  rm -f "$PFX.recv"
}
reordered=$(order_run)
check "jitter without reorder keeps order" "${reordered:-1} == 0"
rpc link_set id=3 reorder=true
reordered=$(order_run)
check "jitter with reorder=true reorders" "${reordered:-0} > 0"

# refused requests name the problem and change nothing
rpc_try link_set id=3 loss=2
check "loss outside 0..1 refused" "'''$REPLY_LINE'''.startswith('error link 3: param') and 'loss' in '''$REPLY_LINE'''"
rpc_try link_add id=1 a.netns_path=/x a.ifname=x b.netns_path=/x b.ifname=y
check "duplicate id refused" "'already exists' in '''$REPLY_LINE'''"
rpc_try link_add id=9 a.netns_path=/nonexistent a.ifname=x b.netns_path=/x b.ifname=y
check "bad namespace refused" "'/nonexistent' in '''$REPLY_LINE'''"
rpc_try no_such_method
check "unknown method refused" "'unknown method' in \"\"\"$REPLY_LINE \"\"\""
rpc ping
check "ping counts links" "$(get links) == 3"

# a namespace reached through another process's fd, as the controller holds
# anonymous namespaces; link_del removes the devices
exec {nsfd}<"$(nspath h1)"
rpc link_add id=4 a.netns_path=/proc/$$/fd/$nsfd a.ifname=x4 b.netns_path="$(nspath h2)" b.ifname=x4
check "TAP created through /proc/PID/fd/N" "$(get a.ifindex) > 0 and '$(get a.ifname)' == 'x4'"
exec {nsfd}<&-
present=$(nsx h1 ip -o link show x4 2>/dev/null | wc -l)
rpc link_del id=4
gone=$(nsx h1 ip -o link show x4 2>/dev/null | wc -l)
check "link_del removes the TAPs" "$present == 1 and $gone == 0"

# persist=true: link_del still removes the devices, linkd's exit leaves them
# to their namespaces (which delete them when they go)
rpc link_add id=5 a.netns_path="$(nspath h1)" a.ifname=p5 a.persist=true \
    b.netns_path="$(nspath h2)" b.ifname=p5 b.persist=true
rpc link_del id=5
gone=$(nsx h1 ip -o link show p5 2>/dev/null | wc -l)
check "link_del removes persistent TAPs" "$gone == 0"
rpc link_add id=6 a.netns_path="$(nspath h1)" a.ifname=p6 a.persist=true \
    b.netns_path="$(nspath h2)" b.ifname=p6 b.persist=true

# crash safety: SIGKILL of the controller → linkd sees EOF, exits, TAPs vanish
{ kill -9 "$CTL_PID"; wait "$CTL_PID"; } 2>/dev/null
CTL_PID=
for _ in $(seq 50); do kill -0 "$LINKD_PID" 2>/dev/null || break; sleep 0.1; done
check "linkd exits after its controller is killed" "$(kill -0 "$LINKD_PID" 2>/dev/null && echo 1 || echo 0) == 0"
left=$(for n in h1 r1 r2 h2; do ip -n "$PFX-$n" -o link show 2>/dev/null; done | grep -c ': l[0-9]:')
check "no TAP left behind" "$left == 0"
kept=$(for n in h1 h2; do ip -n "$PFX-$n" -o link show p6 2>/dev/null; done | wc -l)
check "persistent TAPs stay with their namespaces" "$kept == 2"
finish
