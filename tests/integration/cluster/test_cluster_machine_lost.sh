#!/usr/bin/env bash
# test_cluster_machine_lost.sh — a machine lost in the middle of a
# training spread over three machines of the namespace cluster (label
# netns; issue 20: "a machine that dies mid-run ... fails the run
# in one line naming it, or, for asynchronous algorithms, is handled like a
# killed node"). The parameter server ps and worker w1 on m1 (the
# controller's machine, with the switch sw), w2 and w3 on m2, w4 and w5 on
# m3, every worker linked to sw (backend kernel: the links to m2 and m3
# are VXLAN devices). Once the training has made 20 steps m3's agent is
# SIGKILLed (its peers go with it):
#   - ASP (mode asp): the training goes on with w1..w3 and ends normally
#     (exit 0, 120 steps or more made, w4 and w5 not in steps.csv's last
#     30 rows); it stops once both were heard lost (the kill listeners)
#     and the training made 100 steps more, its 30 s a liveness bound (a
#     training that does not go on ends there with about 20 steps: 6 s of
#     training made 7521 before); log.txt says that w4 and w5 were lost
#     naming m3 and that the training goes on without them; summary.json
#     gives w4's and w5's availability below 1 and w1's 1;
#   - BSP (mode bsp, 300 steps): the run fails, its error one line naming a worker of
#     m3 and the machine m3.
# Both runs stop their network and, after `hiernet clean --hosts` (m3's
# agent was SIGKILLed and left its part's registry entry), leave nothing on
# any machine.
# Usage: test_cluster_machine_lost.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/../../lib/cluster_lost.sh"

cluster_require
command -v python3 >/dev/null || cluster_skip "python3 is not installed (reads summary.json)"
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }
D=$CLUSTER_DIR
cluster_hosts_file 3 "$D/hosts"

cat >"$D/lost.lua" <<LUA
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local mode = hn.param("mode", "asp")
local net = hn.network{ name = mode, backend = "kernel", seed = 1, hosts = "$D/hosts" }
local server = net:node("ps", { host = "m1" })
local sw = net:switch("sw", { host = "m1" })
net:link(server, sw, { bw = "1Gbit" })
local where = { "m1", "m2", "m2", "m3", "m3" }
local workers = {}
for i, m in ipairs(where) do
  workers[i] = net:node("w" .. i, { host = m })
  net:link(workers[i], sw, { bw = "100Mbit" })
end
net:start()
-- After 20 steps the test kills m3's agent. BSP fails at the loss; ASP,
-- once both of m3's workers were heard lost, trains 100 steps more and
-- stops (a steps count, not a time: its seconds are a liveness bound).
local lost = {}
net:on("kill", function(_, node) lost[node.name] = true end)
local function at_start(clock)
  while clock.steps() < 20 and not clock.done() do hn.sleep(0.01) end
  io.open("$D/" .. mode .. ".up", "w"):close()
  if mode ~= "asp" then return end
  while not (lost.w4 and lost.w5) and not clock.done() do hn.sleep(0.01) end
  local after = clock.steps() + 100
  while clock.steps() < after and not clock.done() do hn.sleep(0.01) end
  clock.stop("went on after the loss")
end
local ok, s = pcall(ps.train, { server = server, workers = workers, mode = mode,
  model = "logreg:32-4", batch = 32, seconds = mode == "asp" and 30 or nil,
  steps = mode == "bsp" and 300 or nil, eval_every = 100000, final_eval_limit = 200,
  dataset = { name = "synthetic", n = 2000, dim = 32, classes = 4, partition = "shuffle" },
  worker_opt = { method = "sgd", lr = 0.1 }, server_opt = { method = "sgd", lr = 1.0 },
  at_start = at_start })
net:stop()
if not ok then error(s, 0) end
print(string.format("result steps %d", s.steps))
LUA

# Runs mode MODE and SIGKILLs m3's agent once the training made 20 steps.
run_and_lose_m3() { cluster_lost_run "$1" "$D/lost.lua" --set mode="$1"; }

# --- ASP: handled like killed nodes ---
run_and_lose_m3 asp
expect_eq "asp: the run ends normally (exit 0)" "$RC" 0
[[ $RC -eq 0 ]] || { tail -n 5 "$D/asp.err"; grep -i "lost\|error" "$D/r-asp/log.txt" | tail -n 5; }
# the loss came at step 20 or later and the stop rule adds 100 steps after
# both losses were heard: a training that went on makes 120 or more; one
# that stalled ends at its 30 s bound with fewer
steps=$(grep '^result ' "$D/asp.out" | cut -d' ' -f3)
((${steps:-0} >= 120)) && pass "asp: $steps steps made, 20 before the loss and 100 after" ||
  fail "asp: steps '$steps' (expected 120 or more: 20 before the loss, 100 after)"
grep -E "lost|goes on" "$D/r-asp/log.txt" | sed 's/^/  log: /' | head -n 6
for w in w4 w5; do
  line=$(grep -F "worker $w was lost: machine 'm3'" "$D/r-asp/log.txt" | head -n1)
  grep -q "training goes on without it" <<<"$line" && pass "asp: log.txt: ${line#*] }" ||
    fail "asp: log.txt has no line of $w lost with m3"
done
summary=$D/r-asp/summary.json
avail() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['availability_workers'][sys.argv[2]])" "$summary" "$1" 2>/dev/null; }
for w in w4 w5; do
  a=$(avail "$w")
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1 else 1)" "${a:-1}" &&
    pass "asp: summary.json: $w's availability $a < 1" || fail "asp: $w's availability '$a'"
done
expect_eq "asp: summary.json: w1's availability" "$(avail w1)" "1"
# steps.csv: the last rows are the surviving workers' (w4, w5 stop at the loss)
last=$(tail -n 30 "$D/r-asp/steps.csv" 2>/dev/null | grep -c ',w[45],')
expect_eq "asp: no row of w4 or w5 among steps.csv's last 30" "$last" "0"
cluster_lost_clean asp

# --- BSP: the run fails in one line naming m3 ---
run_and_lose_m3 bsp
[[ $RC -ne 0 ]] && pass "bsp: the run fails (exit $RC)" || fail "bsp: exit 0"
line=$(grep -E "lost.lua:[0-9]+: " "$D/bsp.err" | head -n1)
grep -qE "worker w[45] was lost: machine 'm3'" <<<"$line" &&
  pass "bsp: one line names the worker and m3: ${line#*lost.lua:}" || fail "bsp: $(tail -n3 "$D/bsp.err")"
cluster_lost_clean bsp

cluster_down_checked cluster_down
checks_exit
