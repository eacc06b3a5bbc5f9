#!/usr/bin/env bash
# cleanup.sh — nothing is left after a run ends: normally, with a Lua error,
# on SIGINT, on SIGTERM, and after SIGKILL of the controller followed by
# `hiernet clean`. For each ending, cleanup.lua starts a kernel-backend and a
# user-backend network (peers, linkd, a switch, cgroups, programs in nodes)
# and lists what it owns; then lib.sh's hn_check_left looks for survivors:
# processes (by pid + start time, and peers by their unique node names),
# network namespaces, host interfaces, cgroups, registry entries.
# After SIGKILL, peers, linkd, programs and namespaces must vanish by
# themselves (EOF, parent-death signal); only the cgroups and the registry
# entry may wait for `hiernet clean`, which must then remove them.
# Usage: cleanup.sh HIERNET
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1
hn_require_root "$hiernet"
[[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
hn_scratch
scenario=$here/cleanup.lua

# wait_for FILE SECONDS: true once FILE exists.
wait_for() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
  return 1
}

# The controller pid of a live run, from its registry entry.
controller_pid() { awk '$1 == "controller" { print $2 }' "$HN_REG_ROOT/$1/run" 2>/dev/null; }

i=0
for mode in normal error sigint sigterm sigkill; do
  i=$((i + 1))
  name=hn-cleanup-$$-$mode
  tag=cl$$x$i
  echo "== $mode"
  hn_snapshot "$HN_TMP/before-$mode"
  case $mode in
    normal | error)
      hn_run "$name" "$hiernet" "$scenario" "mode=$mode" "tag=$tag"
      want=0
      [[ $mode == error ]] && want=1
      [[ $HN_RC -eq $want ]] || fail "$mode: exit $HN_RC, expected $want"
      if [[ $mode == error ]]; then
        head -n1 "$HN_TMP/$name.stderr" | grep -q "deliberate failure" ||
          fail "error: first stderr line does not name the error: $(head -n1 "$HN_TMP/$name.stderr")"
      fi
      ;;
    sig*)
      sig=${mode#sig}
      sig=${sig^^}
      ready=$HN_TMP/$name.ready
      ( hn_run "$name" "$hiernet" "$scenario" mode=hold "tag=$tag" "ready=$ready"
        echo "$HN_RC" >"$HN_TMP/$name.rc" ) &
      bg=$!
      if ! wait_for "$ready" 20; then
        fail "$mode: the scenario did not get ready within 20 s"
      else
        cpid=$(controller_pid "$name")
        if [[ -z $cpid ]]; then
          fail "$mode: no controller pid in $HN_REG_ROOT/$name/run"
        else
          echo "sending SIG$sig to controller $cpid"
          kill -s "$sig" "$cpid"
        fi
      fi
      wait "$bg"
      rc=$(cat "$HN_TMP/$name.rc" 2>/dev/null || echo none)
      case $sig in INT) want=130 ;; TERM) want=143 ;; KILL) want=137 ;; esac
      [[ $rc == "$want" ]] || fail "$mode: exit $rc, expected $want"
      if [[ $sig == KILL ]]; then
        # Peers, linkd, programs and namespaces go by themselves; cgroups and the registry wait for clean.
        for ((k = 0; k < 30; k++)); do
          early=$(hn_problems "$HN_TMP/$name.owned" "$name" "$HN_TMP/before-$mode" | grep -v -e '^cgroup' -e '^registry')
          [[ -z $early ]] && break
          sleep 0.1
        done
        if [[ -n $early ]]; then
          while read -r line; do fail "after SIGKILL, before clean: $line"; done <<<"$early"
        else
          echo "ok: after SIGKILL every process and namespace of the run vanished by itself"
        fi
        out=$("$hiernet" clean 2>&1)
        crc=$?
        sed 's/^/  clean: /' <<<"$out"
        [[ $crc -eq 0 ]] || fail "hiernet clean: exit $crc"
        # Another run's start-up sweep may have removed the entry first.
        grep -q "$name" <<<"$out" || [[ ! -e $HN_REG_ROOT/$name ]] ||
          fail "hiernet clean did not remove run $name"
      fi
      ;;
  esac
  hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before-$mode"
done
hn_finish
