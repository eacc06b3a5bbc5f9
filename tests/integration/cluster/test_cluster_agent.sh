#!/usr/bin/env bash
# test_cluster_agent.sh — `hiernet agent` on the namespace test cluster of
# tests/lib/cluster.sh (label netns, serial; issue 20). m1 is the
# controller's machine, m2 and m3 run agents started over SSH:
#   - hn-agent-probe (controller/agent_group.h, as a run) gets hello and
#     the pings answered by both: RTT plausible, |clock offset| < 1 ms (one
#     kernel, one CLOCK_MONOTONIC), the underlay eth0 with its address and
#     MTU 1550;
#   - a controller of another version is refused in one line naming both;
#   - while agents run, each machine listens on TCP 22 (sshd) only;
#   - SIGKILL of the controller ends every agent (EOF: its ssh client dies
#     of its parent-death signal, sshd closes the session) within 5 s and
#     leaves no agent or ssh process; SIGTERM tears them down and removes
#     the ssh ControlPath directory;
#   - `hiernet run` with a placement over m1..m3 starts the agents, records
#     control_rtt_ms / clock_offset_ms / clock_error_ms / version per
#     machine in run.json and log.txt, and, its backend being none, is
#     refused (exit 3) after they answered, saying why;
#   - `hiernet doctor --hosts` prints one table (m1 local, m2 and m3
#     reachable, root, features, same version; an address where no machine
#     answers is NO), then a line per pair of machines with the ICMP
#     echo's round trip between them (m3 ignoring echoes: its pairs FAIL,
#     a line says why, exit 3), and `hiernet clean --hosts` one line per machine, and
#     removes the registry entry a SIGKILLed run left on m2.
# Usage: test_cluster_agent.sh HN_AGENT_PROBE HIERNET
set -uo pipefail
PROBE=$1
HN=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_require
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }
D=$CLUSTER_DIR
cluster_hosts_file 3 "$D/hosts"
# The controller's environment on m1: the cluster's ssh client config, the
# agent binary (the probe is not hiernet), scratch files in the cluster dir.
on_m1() {
  cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" HIERNET_REMOTE_BIN="$HN" TMPDIR="$D" "$@"
}

# Pids of `hiernet agent` processes in machine I's namespace.
agents_on() {
  local pid
  for pid in $(cluster_procs_in "$1"); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$HN agent " && echo "$pid"
  done
}
# ssh clients on m1 (the controller's side).
ssh_on_m1() {
  local pid
  for pid in $(cluster_procs_in 1); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == ssh ]] && echo "$pid"
  done
}

# --- hello and pings ---
on_m1 "$PROBE" "$D/hosts" >"$D/probe.out" 2>"$D/probe.err"
expect_eq "probe exit status" "$?" 0
for m in 2 3; do
  line=$(grep "^ready m$m: " "$D/probe.out")
  [[ -n $line ]] && pass "m$m's agent ready" || { fail "m$m's agent not ready: $(cat "$D/probe.err")"; continue; }
  read -r rtt off err < <(sed -E 's/.*control RTT ([0-9.]+) ms, clock offset (-?[0-9.]+) ms \+- ([0-9.]+) ms.*/\1 \2 \3/' <<<"$line")
  awk -v r="$rtt" 'BEGIN { exit !(r > 0 && r < 50) }' && pass "m$m: control RTT $rtt ms plausible" ||
    fail "m$m: control RTT '$rtt' ms"
  awk -v o="$off" 'BEGIN { exit !(o > -1 && o < 1) }' && pass "m$m: |clock offset| $off ms < 1 ms" ||
    fail "m$m: clock offset '$off' ms"
  awk -v r="$rtt" -v e="$err" 'BEGIN { exit !(e * 2 - r <= 2e-3 && r - e * 2 <= 2e-3) }' &&
    pass "m$m: error $err ms is half the RTT" || fail "m$m: error '$err' vs RTT '$rtt'"
  grep -qF "underlay eth0 $(cluster_addr $m) mtu 1550" <<<"$line" && pass "m$m: underlay eth0 found" ||
    fail "m$m: underlay: $line"
done
expect_eq "no machine but m2 and m3 has an agent" "$(grep -c '^ready ' "$D/probe.out")" 2
grep -q '"clock_offset_ms": ' "$D/probe.out" && pass "json entries" || fail "no json entries"

# --- another version ---
on_m1 "$PROBE" "$D/hosts" --version 0.0-other >"$D/probe.out" 2>"$D/probe.err"
expect_eq "wrong version: exit 3" "$?" 3
expect_eq "wrong version: one line from the controller" "$(grep -c '^hn-agent-probe: ' "$D/probe.err")" 1
grep -qE "^hn-agent-probe: machine 'm[23]' \(10\.250\.0\.[23]\): hello refused: version mismatch: the controller is hiernet 0\.0-other, this agent is hiernet [^ ]+ \(git [^)]+\)\$" "$D/probe.err" &&
  pass "wrong version: the line names both versions" || fail "wrong version: $(cat "$D/probe.err")"

# --- held: listening sockets, then SIGKILL of the controller ---
hold_start() {
  mkfifo "$D/hold.in"
  on_m1 "$PROBE" "$D/hosts" --hold <"$D/hold.in" >"$D/hold.out" 2>"$D/hold.err" &
  HOLD_PID=$!
  exec 7>"$D/hold.in"
  local _
  for _ in $(seq 300); do grep -q '^json ' "$D/hold.out" && return 0; sleep 0.05; done
  fail "held probe never ready: $(cat "$D/hold.err")"
  return 1
}
hold_end() { exec 7>&-; rm -f "$D/hold.in"; }

if hold_start; then
  probe_pid=$(pgrep -P "$HOLD_PID" -x hn-agent-probe || echo "$HOLD_PID")
  for i in 1 2 3; do
    expect_eq "m$i listens on TCP $(cluster_addr $i):22 only while agents run" \
      "$(cluster_exec "$i" ss -Hltn | awk '{print $4}' | tr '\n' ' ')" "$(cluster_addr $i):22 "
  done
  a2=$(agents_on 2) a3=$(agents_on 3)
  [[ -n $a2 && -n $a3 ]] && pass "one agent each on m2 and m3 ($a2, $a3)" || fail "agents: m2 '$a2' m3 '$a3'"
  sleep 1.2 # past the first once-a-second ping, so the SIGKILL meets agents past their start
  kill -KILL "$probe_pid"
  start=$(date +%s.%N)
  for _ in $(seq 100); do [[ -z $(agents_on 2)$(agents_on 3)$(ssh_on_m1) ]] && break; sleep 0.05; done
  took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  expect_eq "SIGKILLed controller: no agent and no ssh left (after ${took} s)" \
    "$(agents_on 2)$(agents_on 3)$(ssh_on_m1)" ""
  wait "$HOLD_PID" 2>/dev/null
  hold_end
  # What a SIGKILLed controller leaves: its ssh control directory, in m1's
  # registry root, which `hiernet clean` removes.
  expect_eq "SIGKILLed controller: its ssh control directory is left" \
    "$(cluster_exec 1 sh -c 'ls -d /run/hiernet/.ssh-* 2>/dev/null | wc -l')" 1
  cluster_exec 1 "$HN" clean >"$D/clean1.out" 2>&1
  grep -q "ssh control directory of a controller that is gone" "$D/clean1.out" &&
    pass "clean: says what it removed" || fail "clean after SIGKILL: $(cat "$D/clean1.out")"
  expect_eq "clean: the ssh control directory is gone" \
    "$(cluster_exec 1 sh -c 'ls -d /run/hiernet/.ssh-* 2>/dev/null')" ""
fi

# --- held, then SIGTERM: torn down, directory removed ---
: >"$D/hold.out"
if hold_start; then
  probe_pid=$(pgrep -P "$HOLD_PID" -x hn-agent-probe || echo "$HOLD_PID")
  kill -TERM "$probe_pid"
  wait "$HOLD_PID"
  expect_eq "SIGTERM: probe exit status" "$?" 0
  expect_eq "SIGTERM: agents torn down on request" "$(grep -c 'tearing down: teardown requested' "$D/hold.err")" 2
  expect_eq "SIGTERM: no agent, no ssh left" "$(agents_on 2)$(agents_on 3)$(ssh_on_m1)" ""
  expect_eq "SIGTERM: ssh control directory removed" \
    "$(cluster_exec 1 sh -c 'ls -d /run/hiernet/.ssh-* 2>/dev/null')" ""
  hold_end
fi

# --- a run placed over the three machines ---
cat >"$D/three.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "c", backend = "none", hosts = "$D/hosts" }
local a = net:node("a", { host = "m1" })
net:link(a, net:node("b", { host = "m2" }), { delay = "5ms" })
net:link(a, net:node("c", { host = "m3" }), { delay = "5ms" })
net:start()
LUA
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" run "$D/three.lua" --out "$D/r" --quiet 2>"$D/run.err"
expect_eq "run over m1..m3: exit 3" "$?" 3
expect_eq "run over m1..m3: the refusal" "$(tail -n1 "$D/run.err" | sed 's/^.*network/network/')" \
  "network 'c': 2 of its 3 nodes are placed on other machines than this one: their 2 agents answered, but backend 'none' runs every node on this machine's loopback (use backend 'kernel', 'user' or 'auto')"
python3 - "$D/r/run.json" <<'PY' && pass "run.json machines" || fail "run.json machines: $(grep -o '"machines".*' "$D/r/run.json" | head -c 800)"
import json, sys
m = json.load(open(sys.argv[1]))["machines"]
assert sorted(e["machine"] for e in m) == ["m2", "m3"], m
for e in m:
    assert 0 < e["control_rtt_ms"] < 50 and abs(e["clock_offset_ms"]) < 1, e
    assert abs(e["clock_error_ms"] * 2 - e["control_rtt_ms"]) <= 2.001e-3, e  # both rounded to 1 us
    assert e["version"] and e["network"] == "c", e
PY
expect_eq "log.txt: one agent line per machine" "$(grep -c "network 'c': agent m[23]: control RTT" "$D/r/log.txt")" 2
expect_eq "run: no agent, no ssh left" "$(agents_on 2)$(agents_on 3)$(ssh_on_m1)" ""

# --- doctor --hosts ---
cp "$D/hosts" "$D/hosts4"
echo "m9 $(cluster_addr 9)" >>"$D/hosts4"
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" "$HN" doctor --hosts "$D/hosts4" >"$D/doctor.out" 2>"$D/doctor.err"
expect_eq "doctor --hosts with an absent machine: exit 3" "$?" 3
expect_eq "doctor: header" "$(head -n1 "$D/doctor.out" | tr -s ' ')" "machine address reachable privilege kernel features hiernet version"
expect_eq "doctor: m1 row" "$(awk '$1 == "m1" {print $2, $3, $4, $NF}' "$D/doctor.out")" "$(cluster_addr 1) local root same"
for m in 2 3; do
  awk -v m="m$m" -v a="$(cluster_addr $m)" '$1 == m && $2 == a && $3 ~ /^[0-9.]+$/ && $4 == "ms" && $5 == "root" && / veth / && $NF == "same" {f = 1} END {exit !f}' "$D/doctor.out" &&
    pass "doctor: m$m reachable, root, veth, same version" || fail "doctor: m$m row: $(cat "$D/doctor.out")"
done
awk '$1 == "m9" && $3 == "NO" {f = 1} END {exit !f}' "$D/doctor.out" && pass "doctor: m9 not reachable" ||
  fail "doctor: m9 row: $(cat "$D/doctor.out")"
grep -q "^  machine 'm9' (10.250.0.9): the agent's ssh exited with status 255: " "$D/doctor.out" &&
  pass "doctor: m9's reason" || fail "doctor: m9's reason: $(cat "$D/doctor.out")"
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" "$HN" doctor --hosts "$D/hosts" >"$D/doctor.out" 2>&1
expect_eq "doctor --hosts m1..m3: exit 0" "$?" 0
# the ICMP echo between every two machines (the underlay probe's), one line a pair
expect_eq "doctor: an ICMP echo line per pair, each with its round trip" \
  "$(sed -n 's/^  ICMP echo \(m[0-9] - m[0-9]\): [0-9.]* ms$/\1/p' "$D/doctor.out" | tr '\n' ' ')" \
  "m1 - m2 m1 - m3 m2 - m3 "
# m3 answers no echo: its pairs fail, doctor says so and exits 3
cluster_exec 3 sysctl -qw net.ipv4.icmp_echo_ignore_all=1
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" "$HN" doctor --hosts "$D/hosts" >"$D/doctor.out" 2>&1
expect_eq "doctor --hosts, m3 ignoring ICMP echo: exit 3" "$?" 3
cluster_exec 3 sysctl -qw net.ipv4.icmp_echo_ignore_all=0
expect_eq "doctor: m1 - m2 echoes, the pairs of m3 fail" \
  "$(grep '^  ICMP echo m' "$D/doctor.out" | sed 's/: [0-9.]* ms$/: ms/' | tr '\n' '|')" \
  "  ICMP echo m1 - m2: ms|  ICMP echo m1 - m3: FAILS|  ICMP echo m2 - m3: FAILS|"
grep -q "^  ICMP echo: .*m3" "$D/doctor.out" && pass "doctor: the echo's failure line: $(grep '^  ICMP echo: ' "$D/doctor.out")" ||
  fail "doctor: no line saying why the echo failed: $(cat "$D/doctor.out")"

# --- clean --hosts: a run SIGKILLed on m2 leaves its registry entry ---
cat >"$D/stay.lua" <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "s", backend = "none" }
net:link(net:node("x"), net:node("y"), { delay = "1ms" })
net:start()
hn.sleep(60)
LUA
# bash writes its pid, then becomes hiernet: the controller's pid to SIGKILL.
cluster_exec 2 bash -c 'echo $$ >"$1"; exec "$2" run "$3" --out "$4" --quiet' stay "$D/stay.pid" "$HN" \
  "$D/stay.lua" "$D/r-stay" >/dev/null 2>&1 &
stay=$!
for _ in $(seq 300); do grep -q "hn.sleep\|started" "$D/r-stay/log.txt" 2>/dev/null && break; sleep 0.05; done
sleep 0.5
kill -KILL "$(cat "$D/stay.pid")"
wait "$stay" 2>/dev/null
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" "$HN" clean --hosts "$D/hosts" >"$D/clean.out" 2>"$D/clean.err"
expect_eq "clean --hosts: exit 0" "$?" 0
expect_eq "clean --hosts: one line per machine" "$(cut -d: -f1 "$D/clean.out" | tr '\n' ' ')" "m1 m2 m3 "
grep -qE "^m2: clean: removed 1 stale run" "$D/clean.out" && pass "clean --hosts: m2's stale run removed" ||
  fail "clean --hosts: $(cat "$D/clean.out" "$D/clean.err")"
grep -qE "^m1: clean: nothing stale" "$D/clean.out" && pass "clean --hosts: m1 had nothing" || fail "clean --hosts m1: $(cat "$D/clean.out")"
cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" "$HN" clean --hosts "$D/hosts" >"$D/clean.out" 2>&1
expect_eq "clean --hosts again: nothing stale anywhere" "$(grep -c ': clean: nothing stale' "$D/clean.out")" 3

checks_exit
