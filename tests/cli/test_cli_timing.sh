#!/usr/bin/env bash
# The wall-clock bounds of test_cli.sh's peer failures, in the serial pass
# (label serial, RUN_SERIAL: on an idle host, not beside the CPU-heavy
# tests): a dead peer's pending call fails within 100 ms; a silent peer's
# start fails at HIERNET_START_TIMEOUT (1 s), a garbling one's at once, and
# the stop that follows kills it at the stop deadline (2-3 s).
# Usage: test_cli_timing.sh HIERNET_BINARY
set -u
HN=$1
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
source "$here/peer_failures.sh"
in_scratch_dir

write_peer_death clit
expect_exit 0 "peer death" -- "$HN" run death.lua --out r-death --quiet
ms=$(sed -n 's/^peer death noticed in \([0-9.]*\) ms$/\1/p' out.txt)
[[ -n $ms ]] && python3 -c "import sys; sys.exit(0 if $ms < 100 else 1)" && ok ||
  bad "peer death noticed within 100 ms: $(cat out.txt) $err"

write_misbehaving_peers clit 30.74
run_misbehaving_peers
grep -q "start false after 1\.[0-9] s: .*did not answer within 1 s" mute.txt && ok || bad "silent peer: $(cat mute.txt)"
grep -q "start false after 0\.[0-9] s" garbage.txt && ok || bad "garbling peer start: $(cat garbage.txt)"
grep -q "stop after [23]\.[0-9] s" garbage.txt && ok || bad "garbling peer is killed at the stop deadline: $(cat garbage.txt)"
misbehaving_peers_gone 30.74

report
