#!/usr/bin/env bash
# test_cluster_spread.sh — `hiernet run` of one network over three
# machines of the namespace cluster (label netns, serial; issue 20): h1 and
# the switch s1 pinned to m1 (the controller's machine), h2 to m2, h3 to
# m3, backend kernel. The controller builds m1's part itself and the
# others through their agents (controller/netrun_parts.c), relays h2's and
# h3's peer commands over the agents' channels (controller/agent_relay.c),
# and:
#   - net:start() returns, with a cgroup for each machine's part (h1 and
#     h2 have cpu = 0.5); h2:ping() and h2:stats() answer (stats names h2
#     and a pid: the peer runs on m2);
#   - a tensor of 100000 uniform values made on h1 and sent h1 -> h2 over
#     the emulated network (the cut link s1-h2 is a VXLAN device) reads
#     back on h2 value for value equal to h1's;
#   - h2 sends it back to h1 (h2 told h1's address through the relay) and
#     on to h3 (m2 to m3 through m1's switch): both arrive equal;
#   - changing the cut link is done (by m1's part and m2's agent), a
#     program in h2 runs on m2 (its hostname is m2's; h2 still runs;
#     netns.cluster.spread_ops times link changes and kills h2);
#   - net:stop() returns; afterwards no peer, agent or ssh process, no
#     registry entry and no cgroup is left on either machine, only the
#     machines' holders and sshd;
#   - a part m2's agent cannot build (h2 asks for a GPU m2 lacks) fails the
#     start in one line naming the machine and the node (m1's part, built
#     meanwhile, is released) and leaves nothing on either machine;
#   - this machine listed by 127.0.0.1 (which m2 cannot reach) is refused
#     in one line naming it and the address, and nothing is left;
#   - m2's agent SIGKILLed while the network runs: h2's next command fails
#     in one line naming m2, h1's still answers, the stop ends the run, and
#     m2's part's registry entry (the agent's, left by its SIGKILL) goes
#     with `hiernet clean --hosts`: nothing is left;
#   - the controller SIGTERMed while the network runs: the run ends and
#     nothing is left on any machine (the agents tear their parts down);
#     SIGKILLed: nothing is left after `hiernet clean --hosts`.
# Usage: test_cluster_spread.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_spread_up 3
# hiernet on m1, the controller's machine, with the cluster's ssh config.
hn_m1() { cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" "$@"; }

# Nothing of the cluster's machines is running but their holders and sshd,
# no registry entry and no cgroup of network NET.
nothing_left() {
  cluster_expect_nothing_left "$1"
  expect_eq "$1: no cgroup left" \
    "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "hiernet-*-$2" 2>/dev/null)" ""
}

cat >"$D/spread.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "sp", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1", cpu = 0.5 })
local s1 = net:switch("s1", { host = "m1" })
local h2 = net:node("h2", { host = "m2", cpu = 0.5 })
local h3 = net:node("h3", { host = "m3" })
net:link(h1, s1, { bw = "100Mbit" })
net:link(s1, h3, { bw = "100Mbit" })
local cut = net:link(s1, h2, { bw = "100Mbit" }) -- no delay: this kernel has no netem
net:start()
print("started")
-- each machine's part has its cgroup (the machines share this host's tree)
local f = io.popen("find /sys/fs/cgroup -maxdepth 3 -type d -name 'hiernet-*-sp' | sed 's|.*/||' | sort")
print("cgroups " .. f:read("a"):gsub("\n", " "))
f:close()
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
-- back: h2 learns h1's address through the relay, sends over the data plane
h2:send{ tensor = "x", to = h1, as = "back" }
local a = h1:read{ tensor = "x", range = { 0, 65536 } }.values
local b = h1:read{ tensor = "back", range = { 0, 65536 } }.values
local back = #b == 65536
for i = 1, #a do if a[i] ~= b[i] then back = false end end
print("back " .. tostring(back))
-- between two remote machines (m2 -> s1 on m1 -> m3)
h2:send{ tensor = "x", to = h3 }
local c = h3:read{ tensor = "x", range = { 0, 65536 } }.values
local third = #c == 65536
for i = 1, #a do if a[i] ~= c[i] then third = false end end
print("third " .. tostring(third))
local function try(label, fn)
  local ok, err = pcall(fn)
  print(label .. ": " .. tostring(ok) .. " " .. tostring(err))
end
try("cut set", function() cut:set{ bw = "50Mbit" } end)
try("h2 run", function() return (h2:run("hostname").out:gsub("\n", "")) end)
print("h2 alive " .. tostring(h2:ping().ms ~= nil))
net:stop()
print("stopped")
LUA

hn_m1 run "$D/spread.lua" --out "$D/r" >"$D/run.out" 2>"$D/run.err"
rc=$?
expect_eq "run exit status" "$rc" 0
[[ $rc -eq 0 ]] || { tail -n 20 "$D/run.err"; tail -n 20 "$D/r/log.txt" 2>/dev/null; }
expect_eq "started" "$(grep -c '^started$' "$D/run.out")" 1
# m1's part is the controller's run (its registry id r), m2's the agent's r-m2
expect_eq "a cgroup per machine's part" "$(grep '^cgroups ' "$D/run.out")" "cgroups hiernet-r-m2-sp hiernet-r-sp "
expect_eq "h2 answers ping over the relay" "$(grep '^ping h2 ' "$D/run.out")" "ping h2 true"
expect_eq "h2's stats name it and its pid" "$(grep '^stats h2 ' "$D/run.out")" "stats h2 h2 true"
grep -qE '^sent [0-9]+$' "$D/run.out" && pass "h1 -> h2 send returned" || fail "send: $(grep '^sent' "$D/run.out")"
expect_eq "100000 values equal on h1 and h2" "$(grep '^compared ' "$D/run.out")" "compared 100000 true"
expect_eq "the cut link's change is done by both ends (netns.cluster.spread_ops times it)" \
  "$(grep '^cut set' "$D/run.out")" "cut set: true nil"
expect_eq "a program in h2 runs on m2 (its agent's; netns.cluster.spread_programs)" \
  "$(grep '^h2 run' "$D/run.out")" "h2 run: true m2"
expect_eq "h2 -> h1: the tensor came back equal" "$(grep '^back ' "$D/run.out")" "back true"
expect_eq "h2 -> h3 (m2 to m3 through m1's switch): equal" "$(grep '^third ' "$D/run.out")" "third true"
expect_eq "h2 still answers after the changes" "$(grep '^h2 alive' "$D/run.out")" "h2 alive true"
expect_eq "stopped" "$(grep -c '^stopped$' "$D/run.out")" 1
grep -q "machine m2 built its part" "$D/r/log.txt" 2>/dev/null && pass "log.txt: m2 built its part" ||
  fail "log.txt: no line of m2's part"

nothing_left "after the stop" sp

# --- a part that m2 cannot build (h2 asks for a GPU: none in the cluster) ---
if [[ -e /dev/nvidia0 ]]; then
  echo "skipped: the part m2 cannot build: this host has a GPU, which h2's part would get"
else
cat >"$D/bad.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "bad", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local h2 = net:node("h2", { host = "m2", device = "cuda" })
net:link(h1, h2, { bw = "100Mbit" })
net:start()
print("started")
LUA
hn_m1 run "$D/bad.lua" --out "$D/rb" --quiet >"$D/bad.out" 2>"$D/bad.err"
rc=$?
[[ $rc -ne 0 ]] && pass "a part m2 cannot build fails the run (exit $rc)" || fail "bad part: exit 0"
expect_eq "bad part: not started" "$(grep -c '^started$' "$D/bad.out")" 0
line=$(grep "bad.lua:6: " "$D/bad.err" | head -n1)
grep -q "machine 'm2'" <<<"$line" && grep -q "h2" <<<"$line" &&
  pass "bad part: one line names m2 and h2: ${line#*bad.lua:6: }" || fail "bad part: $(tail -n3 "$D/bad.err")"
nothing_left "bad part" bad
fi

# --- this machine listed by a loopback address: refused before any part ---
printf 'm1 127.0.0.1\nm2 %s\nm3 %s\n' "$(cluster_addr 2)" "$(cluster_addr 3)" >"$D/hosts.lo"
sed "s|$D/hosts\"|$D/hosts.lo\"|; s|\"sp\"|\"lo\"|" "$D/spread.lua" >"$D/lo.lua"
hn_m1 run "$D/lo.lua" --out "$D/rlo" --quiet >"$D/lo.out" 2>"$D/lo.err"
rc=$?
[[ $rc -ne 0 ]] && pass "loopback underlay: the run fails (exit $rc)" || fail "loopback underlay: exit 0"
grep -qF "machine m1: underlay address 127.0.0.1 is loopback, which the other machines cannot reach" "$D/lo.err" &&
  pass "loopback underlay: one line names m1 and the address" || fail "loopback underlay: $(tail -n3 "$D/lo.err")"
nothing_left "loopback underlay" lo

# --- m2's agent lost while the network runs ---
cat >"$D/lost.lua" <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "lost", backend = "kernel", hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local h2 = net:node("h2", { host = "m2" })
net:link(h1, h2, { bw = "100Mbit" })
net:start()
h2:ping()
io.open("$D/lost.up", "w"):close()
for _ = 1, 300 do
  if io.open("$D/lost.killed") then break end
  hn.sleep(0.05)
end
hn.sleep(0.3)
local ok, err = pcall(function() return h2:ping() end)
print("h2 after: " .. tostring(ok) .. " " .. tostring(err))
print("h1 after: " .. tostring(h1:ping().ms ~= nil))
net:stop()
print("stopped")
LUA
hn_m1 run "$D/lost.lua" --out "$D/rl" --quiet >"$D/lost.out" 2>"$D/lost.err" &
run_pid=$!
for _ in $(seq 300); do [[ -e $D/lost.up ]] && break; sleep 0.05; done
agent=""
for pid in $(cluster_procs_in 2); do
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$HN agent " && agent=$pid
done
[[ -n $agent ]] && pass "m2's agent runs ($agent)" || fail "no agent on m2"
[[ -n $agent ]] && kill -KILL "$agent"
touch "$D/lost.killed"
wait "$run_pid"
expect_eq "agent lost: the run still stops (exit 0)" "$?" 0
grep -qE "^h2 after: false .*machine 'm2'" "$D/lost.out" &&
  pass "agent lost: h2's command fails naming m2: $(grep '^h2 after' "$D/lost.out")" ||
  fail "agent lost: $(cat "$D/lost.out") $(tail -n3 "$D/lost.err")"
expect_eq "agent lost: h1 still answers" "$(grep '^h1 after' "$D/lost.out")" "h1 after: true"
expect_eq "agent lost: stopped" "$(grep -c '^stopped$' "$D/lost.out")" 1
# A SIGKILLed agent leaves its part's registry entry: clean --hosts ends it.
expect_eq "agent lost: m2's registry keeps the part's entry" "$(cluster_exec 2 ls -A /run/hiernet)" "rl-m2"
hn_m1 clean --hosts "$D/hosts" >"$D/clean.out" 2>&1
expect_eq "agent lost: clean --hosts exit 0" "$?" 0
nothing_left "agent lost, cleaned" lost

# --- the controller SIGTERMed, then SIGKILLed, while the network runs ---
for sig in TERM KILL; do
  sed "s|\"lost\"|\"$sig\"|; s|$D/lost\.|$D/$sig.|g" "$D/lost.lua" >"$D/$sig.lua"
  hn_m1 run "$D/$sig.lua" --out "$D/r$sig" --quiet >"$D/$sig.out" 2>"$D/$sig.err" &
  run_pid=$!
  for _ in $(seq 300); do [[ -e $D/$sig.up ]] && break; sleep 0.05; done
  controller=""
  for pid in $(cluster_procs_in 1); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$HN run " && controller=$pid
  done
  [[ -n $controller ]] && pass "SIG$sig: the controller runs ($controller)" || fail "SIG$sig: no controller"
  [[ -n $controller ]] && kill "-$sig" "$controller"
  wait "$run_pid"
  rc=$?
  [[ $rc -ne 0 ]] && pass "SIG$sig: the run ends (exit $rc)" || fail "SIG$sig: exit 0"
  # What a SIGKILL leaves (m1's part: the agents end theirs on their EOF)
  # goes with clean --hosts.
  [[ $sig == KILL ]] && { sleep 1; hn_m1 clean --hosts "$D/hosts" >"$D/clean2.out" 2>&1; }
  nothing_left "controller SIG$sig" "$sig"
done

cluster_down_checked cluster_down
checks_exit
