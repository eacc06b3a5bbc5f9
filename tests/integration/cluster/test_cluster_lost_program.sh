#!/usr/bin/env bash
# test_cluster_lost_program.sh — a program in a node of a machine lost
# mid-run (label netns; issue 20). h1 and the switch sw on m1 (the
# controller's machine), h3 on m3, backend kernel. h3:spawn{sleep 30}
# runs on m3's agent; once it runs the test SIGKILLs that agent
# (tests/lib/cluster_lost.sh). The program sends no end any more, so the
# controller ends it as its node: within 10 s p.done, p:wait() gives 137
# (SIGKILL) and the loss's line, naming m3, as its stderr (before the fix
# p:wait() waited until net:stop()). The network stops and, after
# `hiernet clean --hosts`, nothing is left on any machine.
# Usage: test_cluster_lost_program.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/../../lib/cluster_lost.sh"

cluster_require
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }
D=$CLUSTER_DIR
cluster_hosts_file 3 "$D/hosts"

cat >"$D/prog.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "prog", backend = "kernel", seed = 1, hosts = "$D/hosts" }
local sw = net:switch("sw", { host = "m1" })
local h1 = net:node("h1", { host = "m1" })
local h3 = net:node("h3", { host = "m3" })
net:link(h1, sw, { bw = "100Mbit" })
net:link(h3, sw, { bw = "100Mbit" })
net:start()
local p = h3:spawn({ "sleep", "30" })
while p.pid == 0 and not p.done do hn.sleep(0.02) end
io.open("$D/prog.up", "w"):close() -- the test kills m3's agent now
local waited = 0
while not p.done and waited < 10 do hn.sleep(0.05); waited = waited + 0.05 end
print("done " .. tostring(p.done))
if p.done then
  local status, _, err = p:wait()
  print("status " .. status)
  print("err " .. err:gsub("\\n", "|"))
end
net:stop()
LUA

cluster_lost_run prog "$D/prog.lua"
expect_eq "the run ends (exit 0)" "$RC" 0
expect_eq "h3's program ends with its lost machine" "$(grep '^done ' "$D/prog.out")" "done true"
expect_eq "as its node: SIGKILL" "$(grep '^status ' "$D/prog.out")" "status 137"
grep -q "^err machine 'm3'" "$D/prog.out" && pass "its stderr names m3: $(grep '^err ' "$D/prog.out")" ||
  fail "stderr: $(grep '^err ' "$D/prog.out"); $(tail -n 3 "$D/prog.err")"
cluster_lost_clean prog

cluster_down_checked cluster_down
checks_exit
