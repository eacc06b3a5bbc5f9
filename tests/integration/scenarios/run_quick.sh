#!/usr/bin/env bash
# run_quick.sh — runs a scenario with --set quick=true and checks its
# summary.json and report page. Usage: run_quick.sh HIERNET SCENARIO.lua KEY...
# (KEY: a field every results[*] entry has; top:KEY a field of the summary).
# Exit: 0 pass, 1 fail, 77 skipped (not root: the scenarios emulate links).
set -u
hiernet=$1 scenario=$2
shift 2
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (the scenarios emulate their links)"; exit 77; }
[[ -c /dev/net/tun ]] || { echo "SKIP: /dev/net/tun is missing"; exit 77; }
out=$(mktemp -d /tmp/hn-scenario.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
name=$(basename "$scenario" .lua)
timeout -s INT "${HN_RUN_TIMEOUT:-240}" "$hiernet" run "$scenario" --set quick=true \
  --out "$out/run" --quiet >"$out/stdout" 2>"$out/stderr"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: $name: exit $rc"
  tail -n 20 "$out/stderr"
  exit 1
fi
python3 "$(dirname "$0")/check_summary.py" "$out/run" "$name" "$@" || { cat "$out/stdout"; exit 1; }
echo "ok: $name"
