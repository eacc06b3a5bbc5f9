#!/usr/bin/env bash
# test_cluster_spread_programs.sh — programs in the nodes of a network
# spread over two machines of the namespace cluster (label netns, serial;
# issue 20): h1 on m1 (the controller's machine), the switch s2 and h2, h3
# on m2, backend kernel. m2's agent runs h2's and h3's programs
# (`run`, `signal`, `program`: app/agent_programs.c):
#   - h2:run(a shell command) gives exactly its status 3, its stdout (m2's
#     hostname, then "out") and its stderr ("err"), as on one machine;
#   - h2:run{ping h1} crosses the cut link from h2's namespace: status 0;
#   - h3:spawn{sleep 30}: p.pid is set once m2's agent answered, p:kill()
#     ends it: p:wait() gives 143 (SIGTERM); another one's h3:kill()
#     (the node's kill) ends it with 137 (SIGKILL);
#   - a program still running at net:stop() ends with the network, and
#     nothing is left on either machine.
# Usage: test_cluster_spread_programs.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_spread_up 2
hn_m1() { cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" "$@"; }

cat >"$D/programs.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "pr", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local s2 = net:switch("s2", { host = "m2" })
local h2 = net:node("h2", { host = "m2" })
local h3 = net:node("h3", { host = "m2" })
net:link(h1, s2, { bw = "100Mbit" })
net:link(s2, h2, { bw = "100Mbit" })
net:link(s2, h3, { bw = "100Mbit" })
net:start()
print("started")
local r = h2:run("hostname; echo out; echo err >&2; exit 3")
print(string.format("run %d [%s] [%s]", r.status, (r.out:gsub("\\n", "|")), (r.err:gsub("\\n", "|"))))
print("ping " .. h2:run({ "ping", "-n", "-c", "1", "-W", "2", h1.addr }).status)
local p = h3:spawn({ "sleep", "30" })
hn.sleep(0.3)
print("pid " .. tostring(p.pid > 0) .. " " .. tostring(p.done))
p:kill()
print("killed " .. p:wait())
local q = h3:spawn({ "sleep", "30" })
hn.sleep(0.3)
h3:kill()
print("node killed " .. q:wait())
h2:spawn({ "sleep", "60" }) -- ends with the network
net:stop()
print("stopped")
LUA

hn_m1 run "$D/programs.lua" --out "$D/r" >"$D/run.out" 2>"$D/run.err"
rc=$?
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
expect_eq "h2:run(): status, stdout (m2's hostname) and stderr" "$(grep '^run ' "$D/run.out")" "run 3 [m2|out|] [err|]"
expect_eq "h2 pings h1 across machines" "$(grep '^ping ' "$D/run.out")" "ping 0"
expect_eq "h3:spawn(): its pid once m2's agent answered, still running" "$(grep '^pid ' "$D/run.out")" "pid true false"
expect_eq "p:kill() ends it: SIGTERM" "$(grep '^killed ' "$D/run.out")" "killed 143"
expect_eq "h3:kill() ends its program: SIGKILL" "$(grep '^node killed ' "$D/run.out")" "node killed 137"
expect_eq "stopped" "$(grep -c '^stopped$' "$D/run.out")" 1

cluster_expect_nothing_left "the run"
pids=("${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}")
cluster_down
for _ in $(seq 50); do [[ -z $(cluster_leftovers "${pids[@]}") ]] && break; sleep 0.1; done
expect_eq "nothing left" "$(cluster_leftovers "${pids[@]}")" ""
checks_exit
