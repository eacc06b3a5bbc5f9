#!/usr/bin/env bash
# test_cluster_quickstart.sh — the quickstart on one machine and spread
# over three of the namespace cluster (label netns, serial; issue 20),
# backend user (hiernet-linkd carries the cut links over UDP), the same
# seed, quick, no plots; the controller runs on m1 both times. Compared:
#   - RTT of the path t1 -> cloud1 (ping from t1's namespace, in the
#     quickstart's network held by quickstart_net.lua): the minimum of 50
#     pings within 0.3 ms (the minimum: on a loaded host the mean carries
#     the scheduling delays of linkd and ping, tens of ms at load 14);
#   - goodput of the same path (iperf3, its bottleneck the 20 Mbit/s
#     terminal link, best of three 2 s runs) within 3%;
#   - the BSP round of the quickstart itself (BSP alone, 8 s of training:
#     9 to 12 rounds where the host has room): the lower quartile of its
#     rounds from the second on (qs_rounds) within 5%, asserted unless
#     other programs starved more than 5% of either run's compute commands
#     of CPU (run.json overload.starved_share; the ratio is then printed,
#     "not asserted"). The cut links must drop nothing.
# Why the lower quartile and not the mean: the quickstart's terminal links
# lose packets by design (0.5% loss: 0.52% to 0.58% of their packets in 39
# of 40 runs) and at their 100-frame queues when a 407 KB transfer
# overshoots in slow start (0 to 1351 drops a run, both placements); the
# cut links lost none. The server's pull is one send to all six workers,
# as slow as its slowest destination, so a round in which one of its
# twelve transfers recovers lost segments or waits out an RTO (200 ms at
# least) is 100 to 400 ms longer for every worker at once. Which rounds
# lose what differs from run to run (timing decides which packets the
# seeded loss hits), so the mean of 10 rounds moves with how many were
# hit, in either placement; a round no loss lengthened takes the same time
# on one machine and on three, and the lower quartile is such a round. A
# spread run that is really slower is slower in every round:
# QS_THREE_ARGS="--set cloud_edge_delay=25ms" (the spread run's cut links
# 20 ms slower each way) doubled its round at load 28 to 31 (not asserted
# there: starved); 7ms, 2 ms slower, was lost in that load's noise. The
# figures, all at load 27 to 107: docs/guide.md, "One machine against
# three". The RTOs and drops of each run are printed.
# Usage: test_cluster_quickstart.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/../../lib/quickstart_paths.sh"

cluster_require
for tool in ping iperf3 python3; do
  command -v "$tool" >/dev/null || cluster_skip "$tool is not installed"
done
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }
trap 'iperf_serve_end; cluster_down' EXIT
trap 'iperf_serve_end; cluster_down; exit 130' INT
trap 'iperf_serve_end; cluster_down; exit 143' TERM
D=$CLUSTER_DIR
cluster_hosts_file 3 "$D/hosts"
load() { cut -d' ' -f1-3 /proc/loadavg; }

one=$(qs_paths "$HN" "$here/quickstart_net.lua" one) || fail "paths on one machine"
three=$(qs_paths "$HN" "$here/quickstart_net.lua" three "$D/hosts") || fail "paths over three machines"
echo "t1 -> cloud1 (rtt min, avg ms; goodput bit/s): one machine $one; three $three (load $(load))"
grep -q "placed over .*m2 .*m3" "$D/n-three/log.txt" 2>/dev/null && pass "the held network: placed over m1..m3" ||
  fail "the held network: $(grep -s 'placed over' "$D/n-three/log.txt")"
read -r rtt1 _ good1 <<<"$one"
read -r rtt3 _ good3 <<<"$three"
if [[ -n ${rtt1:-} && -n ${rtt3:-} ]]; then
  python3 -c "import sys; sys.exit(abs($rtt3 - $rtt1) > 0.3)" &&
    pass "RTT t1 -> cloud1 within 0.3 ms: $rtt1 / $rtt3 ms" || fail "RTT t1 -> cloud1: $rtt1 ms on one machine, $rtt3 on three"
  python3 -c "import sys; sys.exit(abs($good3 / $good1 - 1) > 0.03)" &&
    pass "goodput t1 -> cloud1 within 3%: $good1 / $good3 bit/s" ||
    fail "goodput t1 -> cloud1: $good1 bit/s on one machine, $good3 on three"
fi

# BSP alone (ASP is not compared), 8 s: 9 to 11 rounds at load 30 to 45.
qs_run "$HN" one "" --set modes=bsp --set seconds=8
expect_eq "quickstart on one machine: exit status" "$?" 0
# shellcheck disable=SC2086 # QS_THREE_ARGS: --set options, split on purpose
qs_run "$HN" three "$D/hosts" --set modes=bsp --set seconds=8 ${QS_THREE_ARGS:-}
expect_eq "quickstart over three machines: exit status" "$?" 0
grep -q "placed over .*m2 .*m3" "$D/q-three/log.txt" 2>/dev/null && pass "quickstart: placed over m1..m3" ||
  fail "quickstart: $(grep -s 'placed over' "$D/q-three/log.txt") $(tail -n 2 "$D/qerr-three")"
expect_eq "quickstart: m2 and m3 built their parts" \
  "$(grep -sc 'machine m[23] built its part' "$D/q-three/log.txt")" 2
read -r q1 n1 rto1 loss1 queue1 _ starved1 <<<"$(qs_rounds "$D/q-one")"
read -r q3 n3 rto3 loss3 queue3 cut3 starved3 <<<"$(qs_rounds "$D/q-three")"
echo "BSP round, lower quartile: one machine ${q1:-?} s (of $n1 round times, $rto1 RTOs, drops $loss1 by loss and" \
  "$queue1 at queues); three ${q3:-?} s (of $n3, $rto3 RTOs, drops $loss3 and $queue3)" \
  "(load $(load)); mean, rounds and median: $(qs_step "$D/q-one" 2>&1 | tail -n 1) /" \
  "$(qs_step "$D/q-three" 2>&1 | tail -n 1)"
expect_eq "the cut links dropped nothing" "${cut3:-?}" 0
if ! [[ ${q1:-} =~ ^[0-9.]+$ && ${q3:-} =~ ^[0-9.]+$ && ${starved1:-} && ${starved3:-} ]]; then
  fail "BSP rounds not measured: '$q1' '$q3' ($D/q-one, $D/q-three)"
elif python3 -c "import sys; sys.exit($starved1 <= 0.05 and $starved3 <= 0.05)"; then
  # Others' load stretches rounds at random in either run (doc: "One
  # machine against three"); the run's own overload account says so.
  echo "BSP round three/one: $q1 / $q3 s, not asserted: other programs starved $starved1 and $starved3" \
    "of the runs' compute commands of CPU (above 0.05)"
elif [[ ${n1:-0} -lt 6 || ${n3:-0} -lt 6 ]]; then
  fail "BSP round times: ${n1:-0} and ${n3:-0} from the second round on, 6 needed on each"
else
  python3 -c "import sys; sys.exit(abs($q3 / $q1 - 1) > 0.05)" &&
    pass "BSP round within 5%: $q1 / $q3 s" || fail "BSP round: $q1 s on one machine, $q3 on three"
fi

cluster_expect_nothing_left "the runs"
checks_exit
