#!/usr/bin/env bash
# dilation.sh — a dilated link reports the undilated figures: dilation.lua
# runs on one link at --dilation 1 and at --dilation 4, and every emulated
# figure of the second run is within 5% of the first's:
#   user backend (hiernet-linkd, 100 Mbit, 5 ms):  ping RTT (system ping's real
#     RTT / dilation), a 1-float send (one round trip) and a 2 MB transfer;
#     the RTT is also within 5% of the ideal 2 x 5 ms;
#   kernel backend (veth + HTB, 100 Mbit; no netem here): the 2 MB transfer.
# Both runs must leave nothing behind (lib.sh hn_check_left).
# Usage: dilation.sh HIERNET BACKEND   Exit: 0 pass, 1 fail, 77 skipped.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1 backend=$2
hn_require_root "$hiernet"
[[ $backend != user || -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
hn_scratch
TOLERANCE=0.05

# value NAME KEY: a "result KEY VALUE" line of run NAME.
value() { awk -v k="$2" '$1 == "result" && $2 == k { print $3 }' "$HN_TMP/$1.stdout"; }

for d in 1 4; do
  name=hn-dilation-$backend-d$d-$$
  hn_snapshot "$HN_TMP/before-$d"
  hn_run "$name" "$hiernet" "$here/dilation.lua" "backend=$backend" --dilation "$d"
  [[ $HN_RC -eq 0 ]] || fail "dilation.lua at D=$d: exit $HN_RC: $(head -n1 "$HN_TMP/$name.stderr")"
  hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before-$d"
  [[ $(value "$name" dilation) == "$d" ]] || fail "D=$d: the run reports dilation '$(value "$name" dilation)'"
done
[[ $HN_FAILED -eq 0 ]] || hn_finish

one=hn-dilation-$backend-d1-$$ four=hn-dilation-$backend-d4-$$
# Without a delay (kernel backend) a small send's time is the host's own
# latency, which dilation divides: nothing to compare there.
keys="transfer_ms"
[[ $backend == user ]] && keys="ping_ms small_ms $keys"
for k in $keys; do
  v1=$(value "$one" "$k") v4=$(value "$four" "$k")
  if [[ -z $v1 || -z $v4 ]]; then
    fail "$k missing (D=1: '$v1', D=4: '$v4')"
    continue
  fi
  read -r err ok < <(awk -v a="$v1" -v b="$v4" -v t="$TOLERANCE" \
    'BEGIN { e = b / a - 1; printf "%+.2f%% %d\n", e * 100, (e <= t && e >= -t) }')
  if [[ $ok -eq 1 ]]; then echo "ok: $k at D=4 $v4 ms vs D=1 $v1 ms ($err)"; else
    fail "$k at D=4 $v4 ms vs D=1 $v1 ms ($err, tolerance ${TOLERANCE})"
  fi
done
if [[ $backend == user ]]; then
  rtt=$(value "$four" ping_ms)
  awk -v r="$rtt" -v t="$TOLERANCE" 'BEGIN { exit !(r >= 10 * (1 - t) && r <= 10 * (1 + t)) }' &&
    echo "ok: RTT at D=4 $rtt ms (ideal 10)" || fail "RTT at D=4 $rtt ms, ideal 10 ms +- 5%"
fi
hn_finish
