#!/usr/bin/env bash
# bad_input.sh — bad input gives a one-line error that names the value, exit
# code 1 or 2, and leaves nothing behind, even when another network of the
# run was already started (bad_input.lua). The first stderr line must hold
# the expected text and be the only line (the traceback goes to log.txt). Also two CLI errors
# (exit 2): a missing scenario file and an unknown --backend.
# Usage: bad_input.sh HIERNET
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1
hn_require_root "$hiernet"
hn_scratch
scenario=$here/bad_input.lua
long="n$(printf 'x%.0s' {1..30})z"

# check_error NAME WANT_RE [EXIT_CODES]: the first stderr line of run NAME matches WANT_RE,
# and is the only line, the exit code is one of EXIT_CODES (default "1 2").
check_error() {
  local name=$1 want=$2 codes=${3:-"1 2"} err=$HN_TMP/$1.stderr first before=$HN_FAILED
  first=$(head -n1 "$err")
  [[ " $codes " == *" $HN_RC "* ]] || fail "$name: exit $HN_RC, expected one of: $codes"
  grep -qE -- "$want" <<<"$first" || fail "$name: first stderr line lacks '$want': $first"
  [[ $(grep -c . "$err") -le 1 ]] || fail "$name: more than one stderr line: $(sed -n 2p "$err")"
  [[ $HN_FAILED -eq $before ]] && echo "ok: $name: exit $HN_RC: $first"
}

# case:expected text, an extended regex (%T is replaced by the node tag)
cases=(
  "unit:10Mbps"
  "negdelay:-5ms"
  "dup:duplicate node '%Tx'"
  "missing:no node named '%Tnobody'"
  "longname:$long"
  "selflink:linked to itself"
  "disconnect:'%T[xy]'.*'%T[xy]'"
  "bigswitch:switch '%Tsw': 1024 links, but a Linux bridge takes at most 1023 ports"
  "setunit:10Mbps"
)
# Without sch_netem, asking the kernel backend for delay must fail at start and point to the user backend.
if "$hiernet" doctor 2>&1 | grep -q '^MISSING netem'; then
  cases+=("nonetem:sch_netem")
fi

i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  case_name=${c%%:*}
  tag=bi$$x$i
  want=${c#*:}
  want=${want//%T/$tag}
  name=hn-bad-$$-$case_name
  hn_snapshot "$HN_TMP/before-$case_name"
  hn_run "$name" "$hiernet" "$scenario" "case=$case_name" "tag=$tag" >/dev/null
  codes="1 2"
  [[ $case_name == nonetem ]] && codes="1 2 3" # an environment limit may say so with exit 3
  check_error "$name" "$want" "$codes"
  [[ $case_name == nonetem ]] && ! grep -q "user" <(head -n1 "$HN_TMP/$name.stderr") &&
    fail "$name: the error does not name the user backend: $(head -n1 "$HN_TMP/$name.stderr")"
  hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before-$case_name" >"$HN_TMP/$name.left"
  grep -v '^note: ' "$HN_TMP/$name.left"
done

# CLI: usage errors exit 2 with one line, and create no results directory.
HN_RC=0
"$hiernet" run "$HN_TMP/no-such-scenario.lua" --out "$HN_TMP/cli1" >"$HN_TMP/cli1.stdout" 2>"$HN_TMP/cli1.stderr"
HN_RC=$?
check_error cli1 "no-such-scenario.lua" "2"
[[ -e $HN_TMP/cli1 ]] && fail "cli1: a results directory was created"
"$hiernet" run "$scenario" --backend bogus --out "$HN_TMP/cli2" >"$HN_TMP/cli2.stdout" 2>"$HN_TMP/cli2.stderr"
HN_RC=$?
check_error cli2 "bogus" "2"
[[ -e $HN_TMP/cli2 ]] && fail "cli2: a results directory was created"
hn_finish
