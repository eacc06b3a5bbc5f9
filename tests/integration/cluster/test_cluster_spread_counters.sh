#!/usr/bin/env bash
# test_cluster_spread_counters.sh — counters of a network spread over two
# machines of the namespace cluster (label netns; issue 20): h1 on
# m1 (the controller's machine), the switch s2 and h2, h3 on m2, backend
# user (l:stats counts on hiernet-linkd), every link 100Mbit.
#   - tcp.csv has rows of m2's hosts h2 and h3 (its agent's `stats`
#     samples, on the run's clock) besides m1's h1, each host once per
#     sample time; before any loss every counter of h2 and h3 is 0;
#   - with 5% loss on s2-h2 (wholly on m2), 1 MB h2 -> h3: net:tcp().h2
#     (its agent's last sample) has retrans > 0, equal to RetransSegs that
#     the controller reads itself from /proc/<h2's peer>/net/snmp (no TCP
#     activity in between), and equal to tcp.csv's last row of h2;
#   - l:stats() of s2-h2 (m2's agent's linkd): a 1 MB tensor h3 -> h2 adds
#     to its ab bytes at least the payload and at most it plus 66 bytes of
#     Ethernet, IPv4 and TCP (timestamps) headers per 1448-byte segment,
#     4096 of the data plane's framing and 1514 per segment the sender's
#     TCP sent again meanwhile (net:tcp(): a queue drop is resent);
#   - l:stats() of the cut link h1-s2 merges its ends: 1 MB h1 -> h3 adds
#     that to ab (m1's end counts it), 1 MB h3 -> h1 to ba (m2's end), and
#     `up` is true, then false after cut:down();
#   - net:stop() returns and nothing is left on either machine.
# Usage: test_cluster_spread_counters.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/spread_two.sh"

spread_two_up

{
  spread_two_lua cnt user
  cat <<LUA
local payload = 1000000
local function tensor(n, name, seed) n:tensor{ name = name, size = payload / 4, fill = "uniform", seed = seed } end
tensor(h1, "a", 1)
tensor(h2, "b", 2)
tensor(h3, "c", 3)
hn.sleep(1.5) -- a tcp.csv sample before any loss
local t0 = net:tcp()
print(string.format("tcp0 %s %s", t0.h2 and t0.h2.retrans or "nil", t0.h3 and t0.h3.retrans or "nil"))
-- RetransSegs of a node's peer, read from its /proc (every machine of the
-- test cluster is a namespace of this host).
local function proc_retrans(node)
  local f = assert(io.open("/proc/" .. node:stats().pid .. "/net/snmp"))
  local text = f:read("a")
  f:close()
  local names, values = text:match("Tcp: ([^\n]+)\nTcp: ([^\n]+)")
  local vals, col = {}, 0
  for v in values:gmatch("%S+") do vals[#vals + 1] = v end
  for name in names:gmatch("%S+") do
    col = col + 1
    if name == "RetransSegs" then return tonumber(vals[col]) end
  end
end
-- Waits (at most 10 s) until net:tcp() of `node` (a remote one's: its
-- agent's sample, taken once an emulated second) has caught up with its
-- peer's /proc: a loaded host may delay the agent's sample past any fixed
-- sleep. Returns both figures; the caller compares them.
local function tcp_settled(node)
  local t0, seen, want = hn.now(), nil, nil
  repeat
    hn.sleep(0.25)
    seen, want = (net:tcp()[node.name] or {}).retrans, proc_retrans(node)
  until seen == want or hn.now() - t0 > 10
  return seen, want
end
-- Bytes that entered a link's direction over one send, and the sender's
-- retransmitted segments meanwhile (its tcp counters: a remote sender's
-- from its agent's sample, waited for until it matches /proc).
local function measure(link, dir, sender, send)
  local tcp0, s0 = net:tcp()[sender.name].retrans, link:stats()
  send()
  hn.sleep(1.5)
  local s1 = link:stats()
  return s1[dir].bytes - s0[dir].bytes, tcp_settled(sender) - tcp0, s1
end
-- m2's link s2-h2: 1 MB h3 -> h2 goes s2 -> h2, its ab
local b, r = measure(l2, "ab", h3, function() h3:send{ tensor = "c", to = h2 } end)
print(string.format("l2 ab %d %d", b, r))
-- the cut link h1-s2: ab counted by m1's end, ba by m2's
b, r = measure(cut, "ab", h1, function() h1:send{ tensor = "a", to = h3 } end)
print(string.format("cut ab %d %d", b, r))
local st
b, r, st = measure(cut, "ba", h3, function() h3:send{ tensor = "c", to = h1, as = "c1" } end)
print(string.format("cut ba %d %d", b, r))
print("cut up " .. tostring(st.up))
cut:down()
print("cut down up " .. tostring(cut:stats().up))
cut:up()
-- loss on s2-h2: h2's TCP resends
l2:set{ loss = "5%" }
h2:send{ tensor = "b", to = h3 }
l2:set{ loss = 0 }
local retrans, in_proc = tcp_settled(h2)
print(string.format("tcp1 %d %d", retrans, in_proc))
net:stop()
print("stopped")
LUA
} >"$D/counters.lua"
spread_two_run "$D/counters.lua"
expect_eq "net:tcp() of m2's h2 and h3 before any loss" "$(grep '^tcp0 ' "$D/run.out")" "tcp0 0 0"

# 1 MB in 1448-byte segments, 66 bytes of headers each (Ethernet, IPv4,
# TCP with timestamps), 4096 of the data plane's framing, and each segment
# the sender's TCP sent again (its retrans) at most once more, whole.
payload=1000000
check_bytes() { # label, bytes, retransmitted segments
  local most=$((payload + (payload + 1447) / 1448 * 66 + 4096 + ${3:-0} * 1514))
  ((${2:-0} >= payload && ${2:-0} <= most)) &&
    pass "$1: 1 MB added $2 bytes ($payload..$most with $3 resent segments)" ||
    fail "$1: 1 MB added ${2:-?} bytes, not $payload..$most (${3:-?} resent segments)"
}
read -r _ _ bytes resent < <(grep '^l2 ab ' "$D/run.out")
check_bytes "l:stats() of s2-h2 (m2's agent), ab: h3 -> h2" "$bytes" "$resent"
read -r _ _ bytes resent < <(grep '^cut ab ' "$D/run.out")
check_bytes "l:stats() of the cut link h1-s2, ab (m1's end): h1 -> h3" "$bytes" "$resent"
read -r _ _ bytes resent < <(grep '^cut ba ' "$D/run.out")
check_bytes "l:stats() of the cut link h1-s2, ba (m2's end): h3 -> h1" "$bytes" "$resent"
expect_eq "the cut link is up (both ends)" "$(grep '^cut up ' "$D/run.out")" "cut up true"
expect_eq "the cut link is down after cut:down()" "$(grep '^cut down up ' "$D/run.out")" "cut down up false"
read -r _ tcp_retrans proc_retrans < <(grep '^tcp1 ' "$D/run.out")
((${tcp_retrans:-0} > 0)) && pass "net:tcp().h2.retrans after 1 MB through 5% loss: $tcp_retrans" ||
  fail "net:tcp().h2.retrans: ${tcp_retrans:-?}"
expect_eq "net:tcp().h2.retrans (m2's agent) = RetransSegs read from h2's peer's /proc" \
  "${tcp_retrans:-?}" "${proc_retrans:-!}"

# tcp.csv: time_s,network,node,retrans,rtos,fast_retrans,lost_retrans,recoveries
csv="$D/r/tcp.csv"
for n in h1 h2 h3; do
  rows=$(awk -F, -v n=$n '$3 == n' "$csv" | wc -l)
  ((rows >= 3)) && pass "tcp.csv: $n has $rows rows" || fail "tcp.csv: $n has $rows rows"
done
expect_eq "tcp.csv: each host once per sample time" \
  "$(awk -F, 'NR > 1 { print $1, $3 }' "$csv" | sort | uniq -d)" ""
expect_eq "tcp.csv: h2's first row is all zeros" \
  "$(awk -F, '$3 == "h2" { print $4, $5, $6, $7, $8; exit }' "$csv")" "0 0 0 0 0"
expect_eq "tcp.csv: h2's last row's retrans is net:tcp()'s" \
  "$(awk -F, '$3 == "h2" { r = $4 } END { print r }' "$csv")" "${tcp_retrans:-?}"
awk -F, 'NR > 1 && $3 == "h1" { if ($1 > m) m = $1 }
         NR > 1 && $3 != "h1" { t[++n] = $1 }
         END { for (i = 1; i <= n; i++) if (t[i] < 0 || t[i] > m + 1.0) exit 1; exit !(n > 0) }' "$csv" &&
  pass "tcp.csv: m2's rows lie on the run's clock (within m1's rows' span)" ||
  fail "tcp.csv: m2's times: $(awk -F, '$3 != "h1" { print $1 }' "$csv" | tr '\n' ' ')"
awk -F, '$3 == "h2" { if ($4 + 0 < p) exit 1; p = $4 + 0 } END { exit 0 }' "$csv" &&
  pass "tcp.csv: h2's retrans never shrinks" || fail "tcp.csv: h2's retrans shrinks"

spread_two_end
