#!/usr/bin/env bash
# test_cluster_linkd_stall.sh — a stall of another machine's hiernet-linkd
# reaches the run's account (label netns, serial; issue 20: the same
# guarantees on several machines). The network of spread_two.sh, backend
# user: m2's agent runs the linkd of the links s2-h2 and s2-h3. While h2
# pings h3 every 10 ms, hn-stall-cpu holds that linkd off its CPU for 0.5 s
# (SCHED_FIFO on the CPU it is pinned to); then
#   - hn.overload().linkd_stalls lists a stall of machine m2, 0.4-0.8 s
#     long, begun inside the hold on the run's clock (the agent's time put
#     on it with the clock estimate: the stats notification carries it);
#   - run.json's overload.linkd_stalls says the same, naming m2;
#   - the run ends with the note on linkd's stalls; nothing is left on
#     either machine.
# Exits 77 where the host has one CPU or refuses SCHED_FIFO.
# Usage: test_cluster_linkd_stall.sh HIERNET HN_STALL_CPU
set -uo pipefail
HN=$(realpath "$1")
STALL=$(realpath "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/spread_two.sh"

cluster_require
command -v python3 >/dev/null || cluster_skip "python3 is not installed (reads run.json)"
spread_two_up

# m2's linkd: the hiernet-linkd process in m2's network namespace.
cat >"$D/stall_m2.sh" <<SH
#!/usr/bin/env bash
ns=\$(readlink /proc/${CLUSTER_HOLDERS[2]}/ns/net)
for p in /proc/[0-9]*; do
  [[ \$(cat "\$p/comm" 2>/dev/null) == hiernet-linkd && \$(readlink "\$p/ns/net") == "\$ns" ]] &&
    exec "$STALL" "\${p#/proc/}" 0.5
done
echo "no hiernet-linkd in m2's network namespace"
exit 1
SH
chmod +x "$D/stall_m2.sh"

{
  spread_two_lua stall user
  cat <<LUA
local p = h2:spawn({ "ping", "-n", "-q", "-i", "0.01", "-w", "3", h3.addr })
hn.sleep(0.5)
local t0 = hn.now()
local out = io.popen("$D/stall_m2.sh; echo status=\$?")
local said = out:read("a")
out:close()
local t1 = hn.now()
print(string.format("hold %.3f %.3f %s", t0, t1, said:gsub("\n", " ")))
p:wait()
-- m2's agent sends the stall with its next notification: wait for it.
local found
for _ = 1, 30 do
  for _, st in ipairs(hn.overload().linkd_stalls.stalls) do
    if st.machine == "m2" then found = st end
  end
  if found then break end
  hn.sleep(0.1)
end
if found then
  print(string.format("stall %s %.3f %.3f", found.machine, found.at_s, found.wall_s))
end
net:stop()
print("stopped")
LUA
} >"$D/stall.lua"
spread_two_run "$D/stall.lua"

read -r _ t0 t1 said < <(grep '^hold ' "$D/run.out")
if [[ ${said:-} == *status=77* ]]; then
  cluster_expect_nothing_left "the run"
  cluster_down
  cluster_skip "hn-stall-cpu: ${said% status=77*}"
fi
[[ ${said:-} == *status=0* ]] && pass "m2's linkd held: $said" || fail "hn-stall-cpu: ${said:-no line}"
read -r _ machine at wall < <(grep '^stall ' "$D/run.out")
expect_eq "a stall of machine m2 in hn.overload().linkd_stalls" "${machine:-none}" m2
if [[ -n ${wall:-} ]]; then
  python3 -c "import sys; sys.exit(not (0.4 <= $wall <= 0.8))" &&
    pass "its wait: $wall s (held 0.5 s)" || fail "its wait: $wall s, not 0.4-0.8 (held 0.5 s)"
  python3 -c "import sys; sys.exit(not ($t0 - 0.1 <= $at <= $t1 + 0.1))" &&
    pass "it began at $at s, in the hold ($t0-$t1 s)" ||
    fail "it began at $at s, outside the hold ($t0-$t1 s)"
fi
expect_eq "run.json: overload.linkd_stalls names m2" "$(python3 -c "
import json
s = json.load(open('$D/r/run.json'))['overload']['linkd_stalls']
print(sorted({x['machine'] for x in s['stalls'] if x['machine']}), s['count'] >= 1)")" "['m2'] True"
grep -q "note: hiernet-linkd waited for a core" "$D/r/log.txt" && pass "the run's note on linkd's stalls" ||
  fail "no note on linkd's stalls in log.txt"
spread_two_end
