#!/usr/bin/env bash
# test_cluster_ssh.sh — the namespace test cluster of tests/lib/cluster.sh
# (label netns; issue 20): three machines, each its own sshd.
#   - `ssh m2 ...` from m1 runs in m2's network, UTS and mount namespaces
#     (its netns inode, hostname, eth0 address, its own /run and sysfs);
#   - the SSH session's stdin/stdout carries bytes both ways (the channel a
#     `hiernet agent` will speak on), exactly;
#   - host keys are checked: without the cluster's known_hosts the
#     connection is refused (BatchMode, StrictHostKeyChecking yes);
#   - each machine listens on its underlay address on TCP 22 only;
#   - a process holding a machine's namespace after cluster_down is
#     reported by cluster_leftovers (the pins that keep the namespaces'
#     inodes from reuse are not);
#   - nothing is left after cluster_down, nor after a test that fails
#     (set -e), is sent SIGTERM or SIGINT, or is SIGKILLed (the
#     parent-death signal; only its directory remains, removed here).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_require
cluster_up 3 || { echo "FAIL: cluster_up 3"; exit 1; }

expect_eq "ssh m2 runs in m2's network namespace" "$(cluster_ssh 1 2 readlink /proc/self/ns/net)" \
  "$(readlink "/proc/${CLUSTER_HOLDERS[2]}/ns/net")"
expect_eq "ssh m3 runs in m3's UTS namespace" "$(cluster_ssh 1 3 hostname)" m3
expect_eq "ssh m2 ip -br addr shows m2's eth0" \
  "$(cluster_ssh 1 2 ip -br -4 addr show dev eth0 | awk '{sub(/@.*/, "", $1); print $1, $3}')" \
  "eth0 10.250.0.2/24"
expect_eq "m2's /sys/class/net is its own" "$(cluster_ssh 1 2 ls /sys/class/net | tr '\n' ' ')" "eth0 lo "
cluster_ssh 1 1 touch /run/hn-cluster-mark
expect_eq "m1's /run is its own (a file there is not in m2's)" \
  "$(cluster_ssh 1 1 ls /run/hn-cluster-mark) $(cluster_ssh 1 2 ls /run/hn-cluster-mark 2>&1 | grep -c 'No such')" \
  "/run/hn-cluster-mark 1"
[[ ! -e /run/hn-cluster-mark ]] && pass "nor in the host's /run" || fail "m1's /run is the host's"
expect_eq "m1 reaches itself over SSH too" "$(cluster_ssh 1 1 hostname)" m1

# 1 MiB both ways through the session, compared by checksum.
data=$CLUSTER_DIR/payload
head -c 1048576 /dev/urandom >"$data"
expect_eq "stdin/stdout of an SSH session carry 1 MiB exactly" \
  "$(cluster_ssh 1 3 cat <"$data" | sha256sum | cut -d' ' -f1)" "$(sha256sum <"$data" | cut -d' ' -f1)"

if cluster_exec 1 ssh -F "$CLUSTER_DIR/ssh_config" -o UserKnownHostsFile=/dev/null m2 true 2>/dev/null; then
  fail "a host key not in the cluster's known_hosts was accepted"
else
  pass "a host key not in the cluster's known_hosts is refused"
fi

for i in 1 2 3; do
  expect_eq "m$i listens on TCP $(cluster_addr $i):22 only" \
    "$(cluster_exec "$i" ss -Hltn | awk '{print $4}' | tr '\n' ' ')" "$(cluster_addr $i):22 "
done

# Down: every sshd, holder and namespace gone, the directory too. A
# process outside the machines holding a descriptor on m2's namespace is
# what the check must still see (the pins' descriptors it must not).
pids=("${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}")
dir=$CLUSTER_DIR
m2_ns=$(readlink "/proc/${CLUSTER_HOLDERS[2]}/ns/net")
setpriv --pdeathsig KILL sleep 300 3<"/proc/${CLUSTER_HOLDERS[2]}/ns/net" </dev/null >/dev/null 2>&1 &
stray=$!
for _ in $(seq 100); do [[ -e /proc/$stray/fd/3 ]] && break; sleep 0.01; done
cluster_down
expect_eq "after cluster_down, a process holding m2's namespace is left" \
  "$(cluster_leftovers "${pids[@]}")" "/proc/$stray/fd/3 -> $m2_ns"
kill -KILL "$stray"
wait "$stray" 2>/dev/null
expect_eq "nothing left after cluster_down" "$(cluster_leftovers "${pids[@]}")" ""
[[ ! -e $dir ]] && pass "cluster directory removed" || fail "$dir is still there"

# A child test that brings a cluster of 2 up, notes its pids and
# namespaces, then fails, or waits for a signal.
child() {
  local how=$1 state=$2
  exec bash -c '
    source "$1"
    cluster_up 2 || exit 1
    { echo "${CLUSTER_HOLDERS[*]} ${CLUSTER_SSHD[*]}"; echo "${CLUSTER_NETNS[*]}"; echo "$CLUSTER_DIR"; } >"$2.tmp"
    mv "$2.tmp" "$2"
    for _ in $(seq 1000); do [[ -e $2.go ]] && break; sleep 0.02; done
    set -e
    if [[ $3 == error ]]; then false; fi
    setpriv --pdeathsig KILL sleep 60 >/dev/null 2>&1 & wait $!
  ' child "$here/../../lib/cluster.sh" "$state" "$how"
}

# child_check HOW SIGNAL: runs a child, sends SIGNAL once it is up, checks
# its leftovers. Job control (set -m) keeps SIGINT deliverable to a
# background job, which a non-interactive shell would start ignoring it.
child_check() {
  local how=$1 signal=$2 state _ status
  state=$(mktemp -u "${TMPDIR:-/tmp}/hn-cluster-state.XXXXXX")
  set -m
  child "$how" "$state" &
  local pid=$!
  set +m
  for _ in $(seq 1000); do [[ -e $state ]] && break; sleep 0.02; done
  [[ -e $state ]] || { fail "$how: the child's cluster never came up"; kill -KILL -- -"$pid"; return; }
  local -a cpids
  read -ra cpids < <(sed -n 1p "$state")
  # Pinned before the child goes on (its go file), so their inodes are
  # still its namespaces' when the checks below look for them.
  cluster_pin_noted "$(sed -n 1p "$state")" "$(sed -n 2p "$state")" ||
    fail "$how: the child's namespaces could not be pinned"
  touch "$state.go"
  [[ $signal != none ]] && kill "-$signal" "$pid"
  wait "$pid" 2>/dev/null
  status=$?
  local cdir
  cdir=$(sed -n 3p "$state")
  rm -f "$state" "$state.go"
  for _ in $(seq 50); do [[ -z $(cluster_leftovers "${cpids[@]}") ]] && break; sleep 0.1; done
  expect_eq "$how: nothing left (child exit $status)" "$(cluster_leftovers "${cpids[@]}")" ""
  if [[ $signal == KILL ]]; then
    [[ -d $cdir ]] && rm -rf "$cdir"
  else
    [[ ! -e $cdir ]] && pass "$how: directory removed" || fail "$how: $cdir is still there"
  fi
  [[ $how == error ]] && expect_eq "error: the child's status" "$status" 1
}

child_check error none
child_check sigterm TERM
child_check sigint INT
child_check sigkill KILL

checks_exit
