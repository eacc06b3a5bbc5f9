# spread_two.sh — the two-machine network of the netns.cluster.spread_
# counters, traces and programs tests (issue 20): h1 on m1 (the
# controller's machine), the switch s2 and h2, h3 on m2, every link
# 100Mbit; in Lua `cut` is the link h1-s2 between the machines, `l2` the
# link s2-h2 wholly on m2. Sourced after tests/lib/cluster.sh and
# checks.sh, with HN set to the hiernet binary.

# The two machines up; D is the cluster's folder.
spread_two_up() {
  cluster_spread_up 2
}

# hiernet on m1, the controller's machine, with the cluster's ssh config.
hn_m1() { cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" "$@"; }

# spread_two_lua NAME BACKEND: a scenario's first lines, to its end the
# network started and "started" printed.
spread_two_lua() {
  cat <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "$1", backend = "$2", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local s2 = net:switch("s2", { host = "m2" })
local h2 = net:node("h2", { host = "m2" })
local h3 = net:node("h3", { host = "m2" })
local cut = net:link(h1, s2, { bw = "100Mbit" })
local l2 = net:link(s2, h2, { bw = "100Mbit" })
net:link(s2, h3, { bw = "100Mbit" })
net:start()
print("started")
LUA
}

# spread_two_run FILE: runs the scenario on m1 into $D/r (stdout in
# $D/run.out); its exit status, "started" and "stopped" checked.
spread_two_run() {
  hn_m1 run "$1" --out "$D/r" >"$D/run.out" 2>"$D/run.err"
  local rc=$?
  expect_eq "run exit status" "$rc" 0
  [[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
  expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
  expect_eq "stopped" "$(grep -c '^stopped$' "$D/run.out")" 1
}

# Nothing left on either machine but their holders and sshd, then the
# cluster down, nothing left of it, and the checks' exit status.
spread_two_end() {
  cluster_expect_nothing_left "the run"
  cluster_down_checked cluster_down
  checks_exit
}
