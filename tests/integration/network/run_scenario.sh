#!/usr/bin/env bash
# run_scenario.sh — runs one network scenario test through the real binary as
# root, then proves the run left nothing behind (lib.sh hn_check_left).
# Usage: run_scenario.sh HIERNET SCENARIO.lua [key=value ...]
# Needs: iperf3 when the scenario name starts with shaping or latency.
# Exit: 0 pass, 1 fail, 77 skipped (not root, tool missing, or the scenario
# printed a line "SKIP: why" and ended well).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1 scenario=$2
shift 2
hn_require_root "$hiernet"
case $(basename "$scenario") in
  shaping* | latency*) command -v iperf3 >/dev/null || skip "iperf3 not installed" ;;
esac
[[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
hn_scratch

name=hn-$(basename "$scenario" .lua)-$$
for arg in "$@"; do [[ $arg == backend=* ]] && name=$name-${arg#backend=}; done
hn_snapshot "$HN_TMP/before"
hn_run "$name" "$hiernet" "$scenario" "$@"
[[ $HN_RC -eq 0 ]] || fail "$(basename "$scenario") $*: exit $HN_RC: $(head -n1 "$HN_TMP/$name.stderr")"
hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before"
# A scenario that cannot test its point on this host says so on a SKIP
# line; a run that failed or left something behind fails all the same.
skip_line=$(grep -m1 '^SKIP: ' "$HN_TMP/$name.stdout") && [[ $HN_FAILED -eq 0 ]] &&
  skip "${skip_line#SKIP: }"
hn_finish
