#!/usr/bin/env bash
# replay.sh — runs replay.lua twice and compares what the issue says must
# replay exactly: churn.csv (t_s, node, event, how: the schedule's times,
# not at_s, when the host applied them), moves.csv (t_s, node, from, to,
# gap_s; not the cut and back times) and the trace's changes (every field),
# the rows of the schedule up to HORIZON seconds (a change due near the stop
# may not have been applied there on a loaded host; h:stop's own rows carry
# the stop's time). Then nothing may be left behind.
# Usage: replay.sh HIERNET. Exit: 0 pass, 1 fail, 77 skipped (not root).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1
HORIZON=1.5
hn_require_root "$hiernet"
[[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
hn_scratch

# rows FILE COLUMNS...: the named columns of a CSV (by its header), rows
# whose t_s (or t) is below HORIZON, sorted: a file lists its rows in the
# order the host applied them, and at load 29 a row of t3 (a move due at
# 0.899 s once, its churn's up at 0.588 s another time) changed places
# with a neighbour between the runs: the same schedule, applied in
# another order
rows() {
  local file=$1
  shift
  awk -F, -v cols="$*" -v h="$HORIZON" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { tcol = ("t_s" in col) ? col["t_s"] : col["t"]; if ($tcol + 0 >= h) next
      n = split(cols, c, " "); line = ""
      for (i = 1; i <= n; i++) line = line (i > 1 ? "," : "") $(col[c[i]])
      print line }' "$file" | sort
}

# The two runs go at once (each its own run id, registry entry and
# namespaces): what is compared is the schedule's times, which the host's
# load does not move, and one after the other they took 5 of the test's
# 5.5 s. Each one's output and exit status are read once both have ended.
hn_snapshot "$HN_TMP/before"
for run in 1 2; do
  name=hn-replay-$$-$run
  { hn_run "$name" "$hiernet" "$here/replay.lua" >"$HN_TMP/$name.log"; echo "$HN_RC" >"$HN_TMP/$name.rc"; } &
done
wait
for run in 1 2; do
  name=hn-replay-$$-$run
  cat "$HN_TMP/$name.log"
  HN_RC=$(cat "$HN_TMP/$name.rc")
  [[ $HN_RC -eq 0 ]] || fail "run $run: exit $HN_RC: $(head -n1 "$HN_TMP/$name.stderr")"
  hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before"
  out=$HN_TMP/$name
  rows "$out/churn.csv" t_s node event how >"$HN_TMP/churn.$run"
  rows "$out/moves.csv" t_s node from to gap_s >"$HN_TMP/moves.$run"
  rows "$out/trace_changes.csv" t bw delay loss >"$HN_TMP/trace.$run"
done
for kind in churn moves trace; do
  n=$(wc -l <"$HN_TMP/$kind.1")
  [[ $n -ge 1 ]] || fail "$kind: no row before ${HORIZON} s to compare"
  if cmp -s "$HN_TMP/$kind.1" "$HN_TMP/$kind.2"; then
    echo "ok: $kind: $n rows the same in both runs"
  else
    fail "$kind differs between two runs: $(diff "$HN_TMP/$kind.1" "$HN_TMP/$kind.2" | head -n 6 | tr '\n' ' ')"
  fi
done
hn_finish
