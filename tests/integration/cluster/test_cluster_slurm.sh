#!/usr/bin/env bash
# test_cluster_slurm.sh — `--hosts slurm` under a real Slurm (label netns,
# serial; issue 20): slurmctld on the head machine m1, one slurmd on each
# of m2..m4 of the namespace test cluster (tests/lib/slurm.sh), each
# machine with its own munged. From m1:
#   - sinfo names m2..m4 idle, each node's NodeHostName its UTS hostname;
#   - `salloc -N 3 hiernet doctor --hosts slurm` prints one table: m2..m4
#     reachable (an agent started by srun on each answered), root, veth,
#     same version; each slurmd's log shows the step it launched; run in a
#     step on m2 (where sbatch runs a script), m2 is the local machine;
#   - `salloc -N 3 hiernet clean --hosts slurm`: one line per machine;
#   - `salloc -N 3 hiernet run scenarios/quickstart.lua --hosts slurm`
#     places the quickstart over m2..m4, whose agents (srun) answer: run.json
#     names the 3 machines with their control RTT; the run then goes on, or
#     (while remote parts cannot be built) is refused with exit 3 in the
#     line checked below. Its trainings last 2 s each, not quick's 8: what
#     is checked is that the run over the allocation ends well, not a
#     figure of the training (the run took 11 s at load 17, 24 s at
#     load 11 to 13 with 8 s trainings);
#   - no job, no agent and no step is left once salloc returned, and after
#     slurm_down and cluster_down no process or namespace is left and
#     nothing was written under the paths Slurm and MUNGE use by default;
#   - SIGTERM, SIGINT or SIGKILL of a test while a job step runs (a
#     child's cluster of two) leaves no process (daemons, salloc, srun, the
#     step's slurmstepd and task), no namespace and no directory within 5 s.
# Usage: test_cluster_slurm.sh HIERNET
set -uo pipefail
HN=$(realpath "$1") # the agents' command lines name the resolved path (/proc/self/exe)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/slurm.sh"
source "$here/../../lib/checks.sh"

cluster_require
slurm_require
# The paths a packaged Slurm and MUNGE write by default: none may change.
system_paths() {
  ls -lad --time-style=+%s /var/spool/slurm* /var/log/slurm* /var/lib/slurm* /run/slurm* \
    /run/munge /var/log/munge /var/lib/munge /etc/slurm /etc/munge 2>/dev/null
  ls -la --time-style=+%s /var/log/munge /var/lib/munge /etc/slurm 2>/dev/null
}
system_before=$(system_paths)

cluster_up 4 || { echo "FAIL: cluster_up 4"; exit 1; }
slurm_up 4 || { echo "FAIL: slurm_up 4"; exit 1; }
D=$CLUSTER_DIR
# salloc on the head, with scratch files in the cluster's directory.
on_head() { slurm_exec 1 env TMPDIR="$D" "$@"; }

# --- the cluster ---
expect_eq "sinfo: m2..m4 idle" "$(on_head sinfo -h -N -o '%N %T' | sort | tr '\n' ' ')" \
  "m2 idle m3 idle m4 idle "
for m in 2 3 4; do
  expect_eq "m$m: NodeHostName is its UTS hostname" \
    "$(on_head scontrol show node "m$m" | grep -o 'NodeHostName=[^ ]*')" "NodeHostName=m$m"
done

# --- doctor ---
on_head salloc -N 3 "$HN" doctor --hosts slurm >"$D/doctor.out" 2>"$D/doctor.err"
expect_eq "salloc -N 3 hiernet doctor --hosts slurm: exit 0" "$?" 0
echo "--- doctor's table"
cat "$D/doctor.out"
expect_eq "doctor: header" "$(head -n1 "$D/doctor.out" | tr -s ' ')" \
  "machine address reachable privilege kernel features hiernet version"
expect_eq "doctor: one row per machine of the allocation" "$(awk 'NR > 1 && !/^ / {print $1}' "$D/doctor.out" | tr '\n' ' ')" \
  "m2 m3 m4 "
for m in 2 3 4; do
  awk -v m="m$m" '$1 == m && $2 == m && $3 ~ /^[0-9.]+$/ && $4 == "ms" && $5 == "root" && / veth / && $NF == "same" {f = 1} END {exit !f}' "$D/doctor.out" &&
    pass "doctor: m$m reachable through srun, root, veth, same version" || fail "doctor: m$m row: $(cat "$D/doctor.out" "$D/doctor.err")"
  grep -q 'launch task StepId=1\.[0-9]* request' "$D/slurm/m$m/slurmd.log" &&
    pass "m$m's slurmd launched the doctor's agent" || fail "m$m's slurmd.log: no step of job 1"
done

# --- doctor inside the allocation: a step on m2, as sbatch runs its
# script on the first node: m2 is the controller's own machine ---
on_head salloc -N 3 srun -N1 -n1 -w m2 "$HN" doctor --hosts slurm >"$D/doctor2.out" 2>"$D/doctor2.err"
expect_eq "doctor in a step on m2: exit 0" "$?" 0
expect_eq "doctor in a step on m2: m2 local" "$(awk '$1 == "m2" {print $2, $3, $4, $NF}' "$D/doctor2.out")" "m2 local root same"
for m in 3 4; do
  awk -v m="m$m" '$1 == m && $3 ~ /^[0-9.]+$/ && $4 == "ms" && $NF == "same" {f = 1} END {exit !f}' "$D/doctor2.out" &&
    pass "doctor in a step on m2: m$m reachable through srun" || fail "doctor in a step on m2: $(cat "$D/doctor2.out" "$D/doctor2.err")"
done

# --- clean ---
on_head salloc -N 3 "$HN" clean --hosts slurm >"$D/clean.out" 2>"$D/clean.err"
expect_eq "salloc -N 3 hiernet clean --hosts slurm: exit 0" "$?" 0
expect_eq "clean: nothing stale on m2..m4, one line each" \
  "$(sed -n 's/^\(m[0-9]\): clean: nothing stale.*/\1/p' "$D/clean.out" | tr '\n' ' ')" "m2 m3 m4 "

# --- the quickstart, placed over the allocation (job 3) ---
on_head salloc -N 3 "$HN" run "$root/scenarios/quickstart.lua" --hosts slurm --out "$D/r" --quiet \
  --set quick=true --set seconds=2 --set plots=false >"$D/run.out" 2>"$D/run.err"
status=$?
echo "--- salloc -N 3 hiernet run quickstart.lua --hosts slurm: exit $status, stderr:"
cat "$D/run.err"
expect_eq "run: exit 0 (every machine's part built through its srun agent)" "$status" 0
[[ -s $D/r/summary.json ]] && pass "run: summary.json written" || fail "run: no summary.json"
python3 - "$D/r/run.json" <<'PY' && pass "run.json: m2..m4 answered" || fail "run.json machines: $(grep -o '"machines".*' "$D/r/run.json" | head -c 800)"
import json, sys
m = json.load(open(sys.argv[1]))["machines"]
assert sorted(e["machine"] for e in m) == ["m2", "m3", "m4"], m
for e in m:
    assert 0 < e["control_rtt_ms"] < 50 and abs(e["clock_offset_ms"]) < 1, e
    assert e["version"] and e["network"] == "quickstart", e
PY

# --- nothing left ---
expect_eq "no job left" "$(on_head squeue -h)" ""
agents=$(for pid in $(cluster_procs); do tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep "^$HN agent "; done)
expect_eq "no agent left" "$agents" ""
pids=("${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}" "${SLURM_DAEMONS[@]}")
dir=$CLUSTER_DIR
slurm_down
cluster_down
expect_eq "nothing left after slurm_down and cluster_down" "$(cluster_leftovers "${pids[@]}")" ""
[[ ! -e $dir ]] && pass "cluster directory removed" || fail "$dir is still there"
expect_eq "nothing written where Slurm and MUNGE write by default" "$(system_paths)" "$system_before"

# --- a signal while a job step runs ---
# A child brings a head and one node up, runs a step (srun sleep) and
# notes its pids, its step's slurmstepd (a daemon that slurmd forked away:
# its parent is init, so only cluster_down's sweep of the machines'
# namespaces ends it), its namespaces and
# directory, then waits for the signal.
child() {
  exec bash -c '
    source "$1/cluster.sh"; source "$1/slurm.sh"
    cluster_up 2 && slurm_up 2 || exit 1
    slurm_exec 1 salloc -N 1 srun sleep 600 >/dev/null 2>&1 &
    for _ in $(seq 200); do
      stepd=$(for p in $(cluster_procs); do [[ $(cat /proc/$p/comm) == slurmstepd ]] && echo $p; done)
      [[ -n $stepd ]] && break
      sleep 0.1
    done
    { echo "${CLUSTER_HOLDERS[*]} ${CLUSTER_SSHD[*]} ${SLURM_DAEMONS[*]} $stepd"
      echo "${CLUSTER_NETNS[*]}"; echo "$CLUSTER_DIR"; echo "$stepd"; } >"$2.tmp"
    mv "$2.tmp" "$2"
    wait
  ' child "$here/../../lib" "$1"
}

# The three children come up at once (their clusters, daemons and steps
# are in namespaces and directories of their own, and a child's bring-up
# is mostly waits on its daemons): the three checks took 5.5 s so at load
# 17, against 33 s one after the other at load 11 to 13. Each child is
# then signalled and checked alone.
# signal_start SIGNAL: starts the child for SIGNAL; its pid in
# CHILD_PID[SIGNAL], its state file in CHILD_STATE[SIGNAL]. Job control
# (set -m) keeps SIGINT deliverable to the background child.
declare -A CHILD_PID CHILD_STATE
signal_start() {
  local signal=$1
  CHILD_STATE[$signal]=$(mktemp -u "${TMPDIR:-/tmp}/hn-slurm-state.XXXXXX")
  set -m
  child "${CHILD_STATE[$signal]}" &
  CHILD_PID[$signal]=$!
  set +m
}

# signal_check SIGNAL: as netns.cluster.ssh's child_check, for the child
# signal_start started.
signal_check() {
  local signal=$1 state=${CHILD_STATE[$1]} pid=${CHILD_PID[$1]} status _
  for _ in $(seq 600); do [[ -e $state ]] && break; sleep 0.05; done
  [[ -e $state ]] || { fail "SIG$signal: the child's cluster never came up"; kill -KILL -- -"$pid"; return; }
  local -a cpids
  read -ra cpids < <(sed -n 1p "$state")
  cluster_pin_noted "$(sed -n 1p "$state")" "$(sed -n 2p "$state")" ||
    fail "SIG$signal: the child's namespaces could not be pinned"
  local cdir stepd
  cdir=$(sed -n 3p "$state")
  stepd=$(sed -n 4p "$state")
  rm -f "$state"
  [[ -n $stepd && $(cat "/proc/$stepd/comm" 2>/dev/null) == slurmstepd ]] &&
    pass "SIG$signal: a job step runs (slurmstepd $stepd)" ||
    fail "SIG$signal: no slurmstepd in the child's cluster ('$stepd')"
  kill "-$signal" "$pid"
  wait "$pid" 2>/dev/null
  status=$?
  for _ in $(seq 50); do [[ -z $(cluster_leftovers "${cpids[@]}") && ! -e $cdir ]] && break; sleep 0.1; done
  expect_eq "SIG$signal: nothing left (child exit $status)" "$(cluster_leftovers "${cpids[@]}")" ""
  [[ ! -e $cdir ]] && pass "SIG$signal: directory removed" || fail "SIG$signal: $cdir is still there"
  rm -rf "$cdir"
}
for signal in TERM INT KILL; do signal_start "$signal"; done
signal_check TERM
signal_check INT
signal_check KILL # no trap runs: slurm.sh's janitor sweeps

checks_exit
