#!/usr/bin/env bash
# test_cluster_spread_move_lost.sh — a move over three machines of the
# namespace cluster that fails because one machine's agent is gone
# (label netns, serial; issue 20): h1 on m1 (the controller's machine),
# e1, e2, t1 on m2, h4 on m3; the cut links h1-e1, h1-e2 and h1-h4, the
# link e1-t1; backend kernel. Once started, the test SIGKILLs m3's agent
# (by pid) and the scenario waits until h4 is unreachable, then
#   - t1:move{ to = e2 } fails: m1's part and m2's agent applied their
#     shares (m2 moved the link), m3's could not be asked; one line names
#     m3 and says the move was undone on every machine;
#   - afterwards the model's link is still e1-t1, the next hops are as
#     before (h1 -> t1 via e1, e1 -> t1 direct, t1 -> h1 via e1: m1's
#     routes and m2's link and routes undone) and h1 pings t1;
#   - net:stop() returns, and `hiernet clean --hosts` leaves nothing on
#     any machine (the killed agent left its part).
# Usage: test_cluster_spread_move_lost.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/../../lib/cluster_lost.sh"

command -v ip >/dev/null || cluster_skip "ip (iproute2) is not installed"
command -v ping >/dev/null || cluster_skip "ping is not installed"
cluster_spread_up 3

cat >"$D/move.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "mvl", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local e1 = net:node("e1", { host = "m2" })
local e2 = net:node("e2", { host = "m2" })
local t1 = net:node("t1", { host = "m2" })
local h4 = net:node("h4", { host = "m3" })
net:link(h1, e1, { bw = "100Mbit" })
net:link(h1, e2, { bw = "100Mbit" })
net:link(h1, h4, { bw = "100Mbit" })
local lt = net:link(e1, t1, { bw = "100Mbit" })
net:start()
print("started")
local owner = {}
for _, n in ipairs({ h1, e1, e2, t1 }) do
  for a in n:run({ "ip", "-o", "-4", "addr", "show" }).out:gmatch("inet ([%d.]+)/") do owner[a] = n.name end
end
local function hop(n, dst)
  local out = n:run({ "ip", "route", "get", dst.addr }).out
  local via = out:match(" via ([%d.]+)")
  return via and (owner[via] or ("?" .. via)) or (out:match(" dev ") and dst.name or "none")
end
local function hops(label)
  print(string.format("%s h1>%s e1>%s t1>%s", label, hop(h1, t1), hop(e1, t1), hop(t1, h1)))
end
hops("before")
io.open("$D/lost.up", "w"):close()
local waited = 0
while net:reachable(h1, h4) and waited < 30 do hn.sleep(0.1); waited = waited + 0.1 end
print("h4 lost " .. tostring(not net:reachable(h1, h4)))
local failed, why = pcall(function() t1:move{ to = e2 } end)
print("failed " .. tostring(not failed))
io.stderr:write("failure: ", tostring(why), "\n")
print("model " .. lt.name)
hops("after")
print("t1 answers " .. tostring(h1:run({ "ping", "-n", "-c", "1", "-W", "2", t1.addr }).status == 0))
net:stop()
print("stopped")
LUA

cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" timeout -s INT 240 "$HN" run "$D/move.lua" \
  --out "$D/r" >"$D/run.out" 2>"$D/run.err" &
run_pid=$!
for _ in $(seq 1200); do [[ -e $D/lost.up ]] && break; cluster_alive "$run_pid" || break; sleep 0.05; done
agent=""
for pid in $(cluster_procs_in 3); do
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$HN agent " && agent=$pid
done
[[ -n $agent ]] && pass "m3's agent runs ($agent) once the network is up" ||
  fail "no agent on m3 once the network is up: $(tail -n3 "$D/run.err")"
[[ -n $agent ]] && kill -KILL "$agent"
wait "$run_pid"
rc=$?
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
expect_eq "next hops before" "$(grep '^before ' "$D/run.out")" "before h1>e1 e1>t1 t1>e1"
expect_eq "the controller saw m3 lost" "$(grep '^h4 lost' "$D/run.out")" "h4 lost true"
expect_eq "the move fails" "$(grep '^failed ' "$D/run.out")" "failed true"
line=$(grep -m1 '^failure: ' "$D/run.err")
grep -qE "node 't1': move to 'e2': machine 'm3': .*gone.*; the move was undone on every machine$" <<<"$line" &&
  pass "one line names m3 and what failed: ${line#failure: }" || fail "failure line: $line"
expect_eq "the model keeps t1 at e1" "$(grep '^model ' "$D/run.out")" "model e1-t1"
expect_eq "next hops after the failed move: m1's routes and m2's link and routes undone" \
  "$(grep '^after ' "$D/run.out")" "after h1>e1 e1>t1 t1>e1"
expect_eq "t1 answers h1 after the failed move" "$(grep '^t1 answers' "$D/run.out")" "t1 answers true"
expect_eq "stopped" "$(grep -c '^stopped$' "$D/run.out")" 1
cluster_lost_clean "the run"
cluster_down_checked cluster_down
checks_exit
