#!/usr/bin/env bash
# test_cluster_spread.sh — `hiernet run` of one network over two machines
# of the namespace cluster (label netns, serial; issue 20): h1 and the
# switch s1 pinned to m1 (the controller's machine), h2 to m2, backend
# kernel. The controller builds m1's part itself and m2's through m2's
# agent (controller/netrun_parts.c), relays h2's peer commands over the
# agent's channel (controller/agent_relay.c), and:
#   - net:start() returns, h2:ping() and h2:stats() answer (stats names h2
#     and a pid: the peer runs on m2);
#   - a tensor of 100000 uniform values made on h1 and sent h1 -> h2 over
#     the emulated network (the cut link s1-h2 is a VXLAN device) reads
#     back on h2 value for value equal to h1's;
#   - changing the cut link, or running a program in h2, fails in one line
#     naming the link or node and machine m2;
#   - net:stop() returns; afterwards no peer, agent or ssh process, no
#     registry entry and no cgroup is left on either machine, only the
#     machines' holders and sshd.
# Usage: test_cluster_spread.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_require
cluster_up 2 || { echo "FAIL: cluster_up 2"; exit 1; }
D=$CLUSTER_DIR
printf 'm1 %s\nm2 %s\n' "$(cluster_addr 1)" "$(cluster_addr 2)" >"$D/hosts"

cat >"$D/spread.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "sp", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local s1 = net:switch("s1", { host = "m1" })
local h2 = net:node("h2", { host = "m2" })
net:link(h1, s1, { bw = "100Mbit" })
local cut = net:link(s1, h2, { bw = "100Mbit" }) -- no delay: this kernel has no netem
net:start()
print("started")
local p = h2:ping()
print("ping h2 " .. tostring(p.ms ~= nil))
local st = h2:stats()
print("stats h2 " .. st.node .. " " .. tostring(st.pid > 0))
h1:tensor{ name = "x", size = 100000, fill = "uniform", seed = 7 }
local r = h1:send{ tensor = "x", to = h2 }
print("sent " .. r.bytes)
local same, n = true, 0
for off = 0, 99999, 65536 do
  local count = math.min(65536, 100000 - off)
  local a = h1:read{ tensor = "x", range = { off, count } }.values
  local b = h2:read{ tensor = "x", range = { off, count } }.values
  for i = 1, count do
    if a[i] ~= b[i] then same = false end
    n = n + 1
  end
end
print("compared " .. n .. " " .. tostring(same))
local ok, err = pcall(function() cut:set{ bw = "50Mbit" } end)
print("cut set: " .. tostring(ok) .. " " .. tostring(err))
ok, err = pcall(function() return h2:run("true") end)
print("h2 run: " .. tostring(ok) .. " " .. tostring(err))
net:stop()
print("stopped")
LUA

cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" run "$D/spread.lua" \
  --out "$D/r" >"$D/run.out" 2>"$D/run.err"
rc=$?
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
expect_eq "h2 answers ping over the relay" "$(grep '^ping h2 ' "$D/run.out")" "ping h2 true"
expect_eq "h2's stats name it and its pid" "$(grep '^stats h2 ' "$D/run.out")" "stats h2 h2 true"
grep -qE '^sent [0-9]+$' "$D/run.out" && pass "h1 -> h2 send returned" || fail "send: $(grep '^sent' "$D/run.out")"
expect_eq "100000 values equal on h1 and h2" "$(grep '^compared ' "$D/run.out")" "compared 100000 true"
grep -qF "cut set: false" "$D/run.out" && grep -qF "link s1-h2: set: it crosses machines m1 and m2: changing a link between machines is not available yet" "$D/run.out" &&
  pass "changing the cut link fails naming it and both machines: $(grep '^cut set' "$D/run.out")" || fail "cut set: $(grep '^cut set' "$D/run.out")"
grep -qF "h2 run: false" "$D/run.out" && grep -qF "node 'h2': it is on machine m2: running a program in a remote node is not available yet" "$D/run.out" &&
  pass "a program in h2 fails naming its machine: $(grep '^h2 run' "$D/run.out")" || fail "h2 run: $(grep '^h2 run' "$D/run.out")"
expect_eq "stopped" "$(grep -c '^stopped$' "$D/run.out")" 1
grep -q "machine m2 built its part" "$D/r/log.txt" 2>/dev/null && pass "log.txt: m2 built its part" ||
  fail "log.txt: no line of m2's part"

# Nothing left on either machine.
for _ in $(seq 50); do
  rest=$(cluster_procs | grep -vxF -f <(printf '%s\n' "${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}"))
  [[ -z $rest ]] && break
  sleep 0.1
done
expect_eq "only the machines' holders and sshd are left in them" \
  "$(for p in $rest; do echo "$p $(cat /proc/$p/comm 2>/dev/null)"; done)" ""
expect_eq "m1's registry is empty" "$(cluster_exec 1 ls -A /run/hiernet 2>/dev/null | grep -v '^\.ssh-' )" ""
expect_eq "m2's registry is empty" "$(cluster_exec 2 ls -A /run/hiernet 2>/dev/null)" ""
expect_eq "no cgroup of the run is left" \
  "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "hiernet-*sp*" 2>/dev/null)" ""

pids=("${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}")
cluster_down
for _ in $(seq 50); do [[ -z $(cluster_leftovers "${pids[@]}") ]] && break; sleep 0.1; done
expect_eq "nothing left" "$(cluster_leftovers "${pids[@]}")" ""
checks_exit
