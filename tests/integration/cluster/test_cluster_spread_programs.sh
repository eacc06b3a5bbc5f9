#!/usr/bin/env bash
# test_cluster_spread_programs.sh — programs in the nodes of a network
# spread over two machines of the namespace cluster (label netns;
# issue 20): h1 on m1 (the controller's machine), the switch s2 and h2, h3
# on m2, backend kernel. m2's agent runs h2's and h3's programs
# (`run`, `signal`, `program`: app/agent_programs.c):
#   - h2:run(a shell command) gives exactly its status 3, its stdout (m2's
#     hostname, then "out") and its stderr ("err"), as on one machine;
#   - h2:run{ping h1} crosses the cut link from h2's namespace: status 0;
#   - h3:spawn{sleep 30}: p.pid is set once m2's agent answered, p:kill(0)
#     (the liveness probe, asked of m2's agent) is true and ends nothing,
#     p:kill() ends it: p:wait() gives 143 (SIGTERM), p:kill(0) is then
#     false; another one's h3:kill() (the node's kill) ends it with 137
#     (SIGKILL);
#   - a program that ended on m2 while this machine's loop was held (its
#     end not read: p.done false) probes false, not an error: the end,
#     which m2's agent sent before its answer, is read first (the agent's
#     own {alive = false} for a program it no longer lists is
#     unit.test_agent_programs');
#   - l:stats() of m2's link (the kernel backend keeps no counters) fails
#     in one line naming m2 and the link;
#   - a program still running at net:stop() ends with the network, and
#     nothing is left on either machine.
# Usage: test_cluster_spread_programs.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/spread_two.sh"

spread_two_up

{
  spread_two_lua pr kernel
  cat <<LUA
local r = h2:run("hostname; echo out; echo err >&2; exit 3")
print(string.format("run %d [%s] [%s]", r.status, (r.out:gsub("\\n", "|")), (r.err:gsub("\\n", "|"))))
print("ping " .. h2:run({ "ping", "-n", "-c", "1", "-W", "2", h1.addr }).status)
local p = h3:spawn({ "sleep", "30" })
hn.sleep(0.3)
print("pid " .. tostring(p.pid > 0) .. " " .. tostring(p.done))
print("probe " .. tostring(p:kill(0)) .. " " .. tostring(p:kill(0)) .. " " .. tostring(p.done))
p:kill()
print("killed " .. p:wait())
print("probe ended " .. tostring(p:kill(0)))
local e = h3:spawn({ "sleep", "1" })
-- m2's agent has started it; 0.8 s of margin before it ends, so a timer
-- that fires late on a loaded host (parallel pass) still reads no end
hn.sleep(0.2)
-- holds the loop 2.5 s of the run's clock (wall time here, no dilation;
-- os.clock() counted CPU time, which on a loaded host took past the
-- agent's 10 s without a ping): its end arrives unread
local t0 = hn.now()
while hn.now() - t0 < 2.5 do end
local was_done = e.done
print("probe unread " .. tostring(was_done) .. " " .. tostring(e:kill(0)) .. " " .. e:wait())
local q = h3:spawn({ "sleep", "30" })
hn.sleep(0.3)
h3:kill()
print("node killed " .. q:wait())
local ok, why = pcall(function() return l2:stats() end)
print("stats " .. tostring(ok) .. " " .. tostring(why))
h2:spawn({ "sleep", "60" }) -- ends with the network
net:stop()
print("stopped")
LUA
} >"$D/programs.lua"
spread_two_run "$D/programs.lua"
expect_eq "h2:run(): status, stdout (m2's hostname) and stderr" "$(grep '^run ' "$D/run.out")" "run 3 [m2|out|] [err|]"
expect_eq "h2 pings h1 across machines" "$(grep '^ping ' "$D/run.out")" "ping 0"
expect_eq "h3:spawn(): its pid once m2's agent answered, still running" "$(grep '^pid ' "$D/run.out")" "pid true false"
expect_eq "p:kill(0) asks m2's agent: running, twice (signal 0 ends nothing)" "$(grep '^probe ' "$D/run.out" | head -n1)" "probe true true false"
expect_eq "p:kill() ends it: SIGTERM" "$(grep '^killed ' "$D/run.out")" "killed 143"
expect_eq "p:kill(0) once it ended: false" "$(grep '^probe ended ' "$D/run.out")" "probe ended false"
expect_eq "p:kill(0) asked of a program ended on m2 before its end was read: false" "$(grep '^probe unread ' "$D/run.out")" "probe unread false false 0"
expect_eq "h3:kill() ends its program: SIGKILL" "$(grep '^node killed ' "$D/run.out")" "node killed 137"
grep -qF "machine 'm2': counters: link s2-h2: counters come from the user backend" "$D/run.out" &&
  pass "l:stats() of m2's link on the kernel backend fails naming m2: $(grep '^stats ' "$D/run.out")" ||
  fail "l:stats() on the kernel backend: $(grep '^stats ' "$D/run.out")"

spread_two_end
