#!/usr/bin/env bash
# test_cluster_spread_move_lost.sh — a move over three machines of the
# namespace cluster that fails because one machine's agent is gone
# (label netns; issue 20): h1 on m1 (the controller's machine),
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
local nh = dofile("$here/next_hops.lua")({ h1, e1, e2, t1 })
local function hops(label) print(nh.line(label, { { h1, t1 }, { e1, t1 }, { t1, h1 } })) end
hops("before")
io.open("$D/move.up", "w"):close()
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

cluster_lost_run move "$D/move.lua"
rc=$RC
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/move.err"; tail -n 20 "$D/r-move/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/move.out")" 1
expect_eq "next hops before" "$(grep '^before ' "$D/move.out")" "before h1>e1 e1>t1 t1>e1"
expect_eq "the controller saw m3 lost" "$(grep '^h4 lost' "$D/move.out")" "h4 lost true"
expect_eq "the move fails" "$(grep '^failed ' "$D/move.out")" "failed true"
expect_line "one line names m3 and what failed" 'failure: ' "$D/move.err" \
  "node 't1': move to 'e2': machine 'm3': .*gone.*; the move was undone on every machine$"
expect_eq "the model keeps t1 at e1" "$(grep '^model ' "$D/move.out")" "model e1-t1"
expect_eq "next hops after the failed move: m1's routes and m2's link and routes undone" \
  "$(grep '^after ' "$D/move.out")" "after h1>e1 e1>t1 t1>e1"
expect_eq "t1 answers h1 after the failed move" "$(grep '^t1 answers' "$D/move.out")" "t1 answers true"
expect_eq "stopped" "$(grep -c '^stopped$' "$D/move.out")" 1
cluster_lost_clean "the run"
cluster_down_checked cluster_down
checks_exit
