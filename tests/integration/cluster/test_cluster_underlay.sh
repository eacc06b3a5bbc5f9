#!/usr/bin/env bash
# test_cluster_underlay.sh — the underlay's delay measured and taken off
# the cut links (label netns, serial: it measures a delay; issue 20 item
# 3). Three machines of the namespace cluster; m2 reaches the underlay
# through a hiernet-linkd link of UNDERLAY_US each way
# (cluster_underlay_delay), so the underlay's RTT m1 - m2 and m2 - m3 is
# about 2 ms. `hiernet run --hosts` of h1 on m1 (the controller's
# machine), h2 on m2 and h3 on m3, backend user, the cut links h1-h2 and
# h2-h3 of 5 ms at 100 Mbit/s:
#   - the controller measures the round trip m1 - m2 itself, m2's agent
#     the one m2 - m3 (ICMP echo, least of 5); the log has both: within
#     0.5 ms of 2 x UNDERLAY_US;
#   - the median RTT of twenty pings h1 -> h2 is within 0.5 ms of
#     2 x 5 ms (+ the ping's serialization both ways), i.e. not the
#     2 x 6 ms it would be had the underlay's delay not been taken off;
#   - run.json's "underlay" names both pairs with their RTT and half;
#   - the same with h1-h2 of 0.5 ms is refused in one line naming the
#     link and both figures (after m2's agent answered), and nothing is
#     left on any machine.
# Usage: test_cluster_underlay.sh HIERNET HIERNET_LINKD HN_LINKD_CTL
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
UNDERLAY_US=1000

cluster_require
command -v python3 >/dev/null || cluster_skip "python3 is not installed"
command -v ping >/dev/null || cluster_skip "ping is not installed"
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }
cluster_underlay_delay 2 "$UNDERLAY_US" "$(realpath "$3")" "$(realpath "$2")" ||
  { echo "FAIL: cluster_underlay_delay"; cluster_down; exit 1; }
D=$CLUSTER_DIR
cluster_hosts_file 3 "$D/hosts"
# hiernet on m1, the controller's machine, with the cluster's ssh config; a
# hung run is ended (SIGINT) after 120 s.
hn_m1() { cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" timeout -s INT 120 "$HN" "$@"; }

scenario() { # NAME DELAY
  cat <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "$1", backend = "user", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local h2 = net:node("h2", { host = "m2" })
local h3 = net:node("h3", { host = "m3" })
net:link(h1, h2, { bw = "100Mbit", delay = "$2" })
net:link(h2, h3, { bw = "100Mbit", delay = "5ms" })
net:start()
print("started")
h1:run("ping -c 1 -W 2 " .. h2.addr) -- the first packet finds the path (ARP)
local r = h1:run("ping -c 20 -i 0.05 -W 2 " .. h2.addr)
local t = {}
for ms in r.out:gmatch("time=([%d.]+) ms") do t[#t + 1] = tonumber(ms) end
table.sort(t)
print(string.format("rtt %d %.3f", #t, t[#t // 2 + 1] or -1))
io.stderr:write("ping: status ", tostring(r.status), "\n", r.out, r.err, "\n")
net:stop()
print("stopped")
LUA
}

scenario ul 5ms >"$D/spread.lua"
hn_m1 run "$D/spread.lua" --out "$D/r" >"$D/run.out" 2>"$D/run.err"
rc=$?
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
for pair in "m1 - m2" "m2 - m3"; do
  line=$(grep -o "underlay $pair: round trip [0-9.]* ms" "$D/r/log.txt" 2>/dev/null | head -n1)
  under=${line#*round trip }
  under=${under% ms}
  python3 -c "import sys; sys.exit(0 if abs(float('${under:-0}') - 2 * $UNDERLAY_US / 1000) <= 0.5 else 1)" &&
    pass "log.txt: the underlay's RTT $pair measured: $under ms (load: $(cut -d' ' -f1-3 /proc/loadavg))" ||
    fail "underlay RTT $pair: '${line:-no line}'"
done
read -r _ n median < <(grep '^rtt ' "$D/run.out")
# The ping's 98-byte frame at 100 Mbit/s: 7.84 µs each way.
want=$(python3 -c "print(2 * 5 + 2 * 98 * 8 / 100e6 * 1e3)")
python3 -c "import sys; sys.exit(0 if ${n:-0} >= 15 and abs(${median:-0} - $want) <= 0.5 else 1)" &&
  pass "h1 -> h2 median RTT $median ms of $n pings, within 0.5 ms of $want (2 x 5 ms: not 2 x 6)" ||
  { fail "h1 -> h2 RTT: '$(grep '^rtt ' "$D/run.out")', want $want ms +- 0.5"; sed -n '/^ping: status/,$p' "$D/run.err"; }
json=$(python3 - "$D/r/run.json" <<'PY'
import json, sys
u = json.load(open(sys.argv[1])).get("underlay", [])
print(" ".join(f"{e['network']}:{e['a']}-{e['b']}:{e['rtt_ms'] > 1.5 and e['rtt_ms'] < 2.5}:{e['one_way_ms'] * 2 <= e['rtt_ms']}" for e in u))
PY
)
expect_eq "run.json: underlay m1 - m2 and m2 - m3 with their RTT (about 2 ms) and half" "$json" \
  "ul:m1-m2:True:True ul:m2-m3:True:True"
cluster_expect_nothing_left "after the stop"

scenario below 0.5ms >"$D/below.lua"
hn_m1 run "$D/below.lua" --out "$D/rb" --quiet >"$D/below.out" 2>"$D/below.err"
rc=$?
[[ $rc -ne 0 ]] && pass "a cut link below the underlay's delay fails the run (exit $rc)" || fail "below: exit 0"
expect_eq "below: not started" "$(grep -c '^started$' "$D/below.out")" 0
line=$(grep -F "link h1-h2: delay 0.5 ms is below the underlay's one-way delay of " "$D/below.err" | head -n1)
[[ -n $line ]] && pass "below: one line names the link and both figures: ${line#*below.lua:8: }" ||
  fail "below: $(tail -n3 "$D/below.err")"
cluster_expect_nothing_left "below"

cluster_down_checked cluster_down
checks_exit
