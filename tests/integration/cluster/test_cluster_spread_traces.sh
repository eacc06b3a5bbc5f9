#!/usr/bin/env bash
# test_cluster_spread_traces.sh — link traces of a network spread over two
# machines of the namespace cluster (label netns; issue 20): h1 on
# m1 (the controller's machine), the switch s2 and h2, h3 on m2, on each
# backend given (default user, then kernel; a run each), every link
# 100Mbit. The trace `0,100Mbit / 1.5,8Mbit` is played
#   - on s2-h2, a link wholly on m2, by m2's agent (`trace` request): 1 MB
#     h3 -> h2 takes under 0.4 s in its first 1.5 s and 0.8 s or more
#     after (1 MB at 8 Mbit/s is 1.05 s); l:trace_changes() (the
#     controller's own player) lists exactly {0 s, 100 Mbit/s} and
#     {1.5 s, 8 Mbit/s}; links.csv's rows of s2-h2 (m2's agent's, whose
#     bw_bps follows its player) go from 100000000 to 8000000;
#   - on the cut link h1-s2, by both ends (m1's part and m2's agent): 1 MB
#     h1 -> h3 and h3 -> h1 each go from under 0.4 s to 0.8 s or more, and
#     its changes are the same list in both directions;
#   - net:stop() returns and nothing is left on either machine.
# Usage: test_cluster_spread_traces.sh HIERNET [BACKEND...]
set -uo pipefail
HN=$(realpath "$1")
shift
BACKENDS=("$@")
[[ ${#BACKENDS[@]} -gt 0 ]] || BACKENDS=(user kernel)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/spread_two.sh"

spread_two_up

# The first step lasts 1.5 s: links.csv samples each machine once a second
# on its own phase, and a step of 1 s starting just after a sample could
# end before the next one (seen on the kernel backend: no 100 Mbit/s row)
printf 't,bw\n0,100Mbit\n1.5,8Mbit\n' >"$D/drop.csv"
# The scenario and its checks on one backend (the run's files then moved
# to $D/r-BACKEND).
traces_on() {
  local backend=$1
  {
    spread_two_lua tr "$backend"
    cat <<LUA
  h1:tensor{ name = "a", size = 250000, fill = "uniform", seed = 1 } -- 1 MB
  h3:tensor{ name = "c", size = 250000, fill = "uniform", seed = 3 }
  local function s(v) return v.ms / 1000 end
  local t0 = hn.now()
  l2:trace{ file = "$D/drop.csv" }
  cut:trace{ file = "$D/drop.csv" }
  local fast = { s(h3:send{ tensor = "c", to = h2 }), s(h1:send{ tensor = "a", to = h3 }),
                 s(h3:send{ tensor = "c", to = h1 }) }
  hn.sleep(1.8 - (hn.now() - t0))
  local slow = { s(h3:send{ tensor = "c", to = h2, as = "c2" }), s(h1:send{ tensor = "a", to = h3, as = "a2" }),
                 s(h3:send{ tensor = "c", to = h1, as = "c3" }) }
  for i, what in ipairs({ "l2", "cut-ab", "cut-ba" }) do
    print(string.format("times %s %.3f %.3f", what, fast[i], slow[i]))
  end
  local function changes(l, dir)
    local out = {}
    for _, c in ipairs(l:trace_changes(dir)) do out[#out + 1] = string.format("%g %d", c.t, c.bw) end
    return table.concat(out, " ")
  end
  print("changes l2 " .. changes(l2, "ab"))
  print("changes cut " .. changes(cut, "ab") .. " / " .. changes(cut, "ba"))
  -- a links.csv sample after the change (at t0 + 1.5): the slow sends took
  -- 3 s or more since, so this seldom waits (a fixed 1.5 s before)
  dofile("$here/../network/common.lua").links_rows_after(t0 + 1.5, { "s2-h2", "h1-s2" }, 10)
  net:stop()
  print("stopped")
LUA
  } >"$D/traces.lua"
  spread_two_run "$D/traces.lua"
  for what in l2 cut-ab cut-ba; do
    read -r _ _ fast slow < <(grep "^times $what " "$D/run.out")
    awk -v f="${fast:-9}" -v s="${slow:-0}" 'BEGIN { exit !(f < 0.4 && s >= 0.8) }' &&
      pass "$backend: trace on $what: 1 MB took $fast s in its first 1.5 s (100Mbit), $slow s after (8Mbit)" ||
      fail "$backend: trace on $what: times ${fast:-?} ${slow:-?}"
  done
  expect_eq "$backend: l:trace_changes() of m2's link s2-h2" "$(grep '^changes l2 ' "$D/run.out")" \
    "changes l2 0 100000000 1.5 8000000"
  expect_eq "$backend: l:trace_changes() of the cut link h1-s2, both directions" "$(grep '^changes cut ' "$D/run.out")" \
    "changes cut 0 100000000 1.5 8000000 / 0 100000000 1.5 8000000"
  # links.csv: time_s,network,link,dir,up,...,bw_bps (the 16th column)
  bw() { awk -F, -v l="$1" -v d="$2" '$3 == l && $4 == d { print $16 }' "$D/r/links.csv" | uniq | tr '\n' ' '; }
  expect_eq "$backend: links.csv: s2-h2's ab rate (m2's agent) follows its trace" "$(bw s2-h2 ab)" "100000000 8000000 "
  expect_eq "$backend: links.csv: h1-s2's ab rate (m1's end) follows its trace" "$(bw h1-s2 ab)" "100000000 8000000 "
  echo "info: run.json's control RTTs: $(grep -o '"control_rtt_ms": *[0-9.]*' "$D/r/run.json" | tr '\n' ' ')" \
    "(an agent's trace starts about half of its machine's after the controller's player)"

  mv "$D/r" "$D/r-$backend"
  mv "$D/run.out" "$D/run-$backend.out"
}

for backend in "${BACKENDS[@]}"; do
  echo "-- backend $backend"
  traces_on "$backend"
done
spread_two_end
