#!/usr/bin/env bash
# privileges.sh — least privilege and exposure of a run (docs/guide.md,
# "Privileges"), on the kernel, user and none backends:
#   - every peer and hiernet-linkd runs as the unprivileged peer user (not
#     root), with no capability in any set (CapEff, CapPrm, CapBnd all 0)
#     and NoNewPrivs 1, read from /proc/<pid>/status while the run holds;
#     datasets under /usr/share and the dataset cache stay readable, the
#     cache a fresh HIERNET_CACHE becomes is the peer user's;
#   - a program started in a node keeps the controller's uid (root), and
#     `hiernet exec` still enters a node;
#   - on the emulated backends no socket of the run's processes (controller,
#     template, peers, linkd, programs) listens in the host's network
#     namespace (TCP LISTEN or any UDP socket in /proc/net of the host);
#     on backend none the same check does find the peers' data listeners,
#     which proves that it looks where they would be;
#   - the run leaves nothing behind (lib.sh).
# Usage: privileges.sh HIERNET
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
hiernet=$1
hn_require_root "$hiernet"
[[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
[[ -e /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]] ||
  skip "Debian's dataset-fashion-mnist is not installed (tools/setup)"
peer_uid=$(id -u "${HIERNET_PEER_USER:-nobody}") || skip "no user ${HIERNET_PEER_USER:-nobody}"
hn_scratch
chmod 755 "$HN_TMP" # the dataset cache lives here: the peer user must reach it
mkdir -m 700 "$HN_TMP/private"

field() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$2/status"; }

# check_dropped PID LABEL: the process gave up root for good.
check_dropped() {
  local uid eff prm bnd nnp
  uid=$(field Uid "$1") eff=$(field CapEff "$1") prm=$(field CapPrm "$1")
  bnd=$(field CapBnd "$1") nnp=$(field NoNewPrivs "$1")
  if [[ $uid == "$peer_uid" && $eff =~ ^0+$ && $prm =~ ^0+$ && $bnd =~ ^0+$ && $nnp == 1 ]]; then
    echo "ok: $2 (pid $1): uid $uid, CapEff $eff, CapPrm $prm, CapBnd $bnd, NoNewPrivs $nnp"
  else
    fail "$2 (pid $1): uid ${uid:-?} (want $peer_uid), CapEff ${eff:-?}, CapPrm ${prm:-?}, CapBnd ${bnd:-?}, NoNewPrivs ${nnp:-?}"
  fi
}

# The run's processes: the controller and everything below it.
run_pids() {
  local todo=("$1") p
  while ((${#todo[@]})); do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    echo "$p"
    todo+=($(cat /proc/"$p"/task/*/children 2>/dev/null))
  done
}

# listeners CONTROLLER: sockets of the run's processes that listen (TCP) or
# are bound (UDP) in the host namespace, as "pid proto local-address".
listeners() {
  local p inodes="" host_net=/proc/$1/net
  for p in $(run_pids "$1"); do
    inodes+=" $(find /proc/"$p"/fd -lname 'socket:*' -printf '%l\n' 2>/dev/null | grep -o '[0-9]*' | tr '\n' ' ')"
  done
  for proto in tcp tcp6 udp udp6 raw raw6; do
    awk -v proto="$proto" -v list="$inodes" '
      BEGIN { n = split(list, a, " "); for (i = 1; i <= n; i++) ours[a[i]] = 1 }
      NR > 1 && ($10 in ours) && (proto !~ /^tcp/ || $4 == "0A") { print proto, $2, "inode", $10 }
    ' "$host_net/$proto"
  done
}

for backend in kernel user none; do
  name=hn-privileges-$$-$backend
  echo "== backend $backend"
  hn_snapshot "$HN_TMP/before-$backend"
  ready=$HN_TMP/$name.ready go=$HN_TMP/$name.go cache=$HN_TMP/cache-$backend
  # backend none: a cache the peer user cannot reach; the dataset is then
  # decompressed in memory (checked by the scenario's training step).
  [[ $backend == none ]] && cache=$HN_TMP/private/cache
  ( HIERNET_CACHE=$cache hn_run "$name" "$hiernet" "$here/privileges.lua" "backend=$backend" \
      "ready=$ready" "go=$go"; echo "$HN_RC" >"$HN_TMP/$name.rc" ) &
  bg=$!
  for _ in $(seq 300); do
    grep -q program "$ready" 2>/dev/null && break
    [[ -s $HN_TMP/$name.rc ]] && break # it ended early
    sleep 0.1
  done
  cpid=$(awk '$1 == "controller" { print $2 }' "$HN_REG_ROOT/$name/run" 2>/dev/null)
  if [[ -z $cpid ]] || ! grep -q program "$ready" 2>/dev/null; then
    fail "$backend: the run did not get ready"
  else
    while read -r kind pid label; do
      [[ $kind == peer ]] && check_dropped "$pid" "peer $label"
      if [[ $kind == program ]]; then
        [[ $(field Uid "$pid") == 0 ]] && echo "ok: the node's program runs as root, like the controller" ||
          fail "$backend: the node's program runs as uid $(field Uid "$pid"), not the controller's 0"
      fi
    done <"$ready"
    linkds=$(awk '$2 ~ /^@linkd/ { print $3 }' "$HN_REG_ROOT/$name/nodes")
    [[ $backend != user || -n $linkds ]] || fail "user backend: no linkd in the registry"
    for pid in $linkds; do check_dropped "$pid" "linkd"; done
    out=$("$hiernet" exec "$name" pv2 -- id -u 2>&1)
    [[ $out == 0 ]] && echo "ok: hiernet exec enters a node as root" || fail "$backend: hiernet exec: $out"
    if [[ $backend == none ]]; then
      [[ -z $(ls -A "$cache" 2>/dev/null) ]] && echo "ok: an unreachable cache: the dataset loaded from memory" ||
        fail "none: the unreachable cache $cache holds files"
    elif [[ $(stat -c %U "$cache" 2>/dev/null) == "$(id -un "$peer_uid")" && -n $(ls "$cache") ]]; then
      echo "ok: the fresh dataset cache belongs to the peer user and was filled"
    else
      fail "$backend: dataset cache $cache: owner $(stat -c %U "$cache" 2>&1), files: $(ls "$cache" 2>&1)"
    fi
    found=$(listeners "$cpid")
    if [[ $backend == none ]]; then
      [[ $(grep -c '^tcp' <<<"$found") -ge 3 ]] && echo "ok: backend none: the peers' listeners are found on the host" ||
        fail "backend none: the check found no peer listener on the host: '$found'"
    elif [[ -n $found ]]; then
      while read -r l; do fail "$backend: a process of the run listens in the host namespace: $l"; done <<<"$found"
    else
      echo "ok: nothing of the run listens in the host namespace"
    fi
  fi
  touch "$go"
  wait "$bg"
  rc=$(cat "$HN_TMP/$name.rc" 2>/dev/null)
  [[ $rc == 0 ]] || fail "$backend: exit $rc: $(head -n3 "$HN_TMP/$name.stderr")"
  hn_check_left "$HN_TMP/$name.owned" "$name" "$HN_TMP/before-$backend"
done
hn_finish
