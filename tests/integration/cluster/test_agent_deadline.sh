#!/usr/bin/env bash
# test_agent_deadline.sh — an agent that never answers fails its start
# naming the machine once the hello deadline passes, and its ssh is ended
# (issue 20), at once rather than after the teardown's 10 s. ssh is a stand-in that reads and says nothing, so no machine
# or network is needed.
# Usage: test_agent_deadline.sh HN_AGENT_PROBE
set -u
PROBE=$1
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir bin
cat >bin/ssh <<'SH'
#!/bin/sh
echo $$ >"$(dirname "$0")/../ssh.pid"
exec cat >/dev/null
SH
chmod +x bin/ssh
echo "m2 192.0.2.7" >hosts
FAILED=0
start=$(date +%s.%N)
PATH="$work/bin:$PATH" "$PROBE" hosts --hello-timeout 1 >out.txt 2>err.txt
status=$?
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
[[ $status -eq 3 ]] || { echo "FAIL: exit $status, expected 3"; FAILED=1; }
want="hn-agent-probe: machine 'm2' (192.0.2.7): the agent did not answer hello and 8 pings within 1 s"
grep -qxF "$want" err.txt || { echo "FAIL: stderr: $(cat err.txt)"; FAILED=1; }
awk -v t="$took" 'BEGIN { exit !(t >= 1 && t < 5) }' || { echo "FAIL: took $took s"; FAILED=1; }
pid=$(cat ssh.pid 2>/dev/null)
if [[ -z $pid ]]; then
  echo "FAIL: the stand-in ssh never ran"; FAILED=1
else
  # gone, or a zombie for its new parent to reap: not running
  for _ in $(seq 100); do
    state=$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null | cut -c2)
    [[ -z $state || $state == Z ]] && break
    sleep 0.02
  done
fi
if [[ -n $pid && -n $state && $state != Z ]]; then
  echo "FAIL: the stand-in ssh ($pid) is still running"; kill -KILL "$pid"; FAILED=1
fi
[[ $FAILED -eq 0 ]] && echo "PASS (failed after $took s)"
exit $FAILED
