# cluster_lost.sh — a machine of the namespace cluster lost mid-run (its
# agent SIGKILLed), for the tests of issue 20's "a machine that dies
# mid-run" (sourced after cluster.sh and checks.sh; HN the hiernet binary,
# D the cluster's directory with its hosts file D/hosts).
#
#   cluster_lost_run TAG SCRIPT [run args...]
#       runs SCRIPT on m1 over the machines of D/hosts (output in D/r-TAG,
#       stdout D/TAG.out, stderr D/TAG.err) and, once the scenario created
#       D/TAG.up (it does so on the training's progress), SIGKILLs m3's
#       agent by pid; RC is the run's exit status
#   cluster_lost_clean WHAT
#       `hiernet clean --hosts` (the SIGKILLed agent left its part's
#       registry entry) and cluster_expect_nothing_left

cluster_lost_run() {
  local tag=$1 script=$2 _ pid agent=""
  shift 2
  cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" run "$script" \
    --out "$D/r-$tag" --quiet "$@" >"$D/$tag.out" 2>"$D/$tag.err" &
  local run_pid=$!
  for _ in $(seq 1200); do [[ -e $D/$tag.up ]] && break; cluster_alive "$run_pid" || break; sleep 0.05; done
  for pid in $(cluster_procs_in 3); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$HN agent " && agent=$pid
  done
  [[ -n $agent ]] && pass "$tag: m3's agent runs ($agent) when the scenario made $tag.up" ||
    fail "$tag: no agent on m3 when the scenario made $tag.up: $(tail -n3 "$D/$tag.err")"
  [[ -n $agent ]] && kill -KILL "$agent"
  wait "$run_pid"
  RC=$?
}

cluster_lost_clean() {
  local what=$1
  cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" clean --hosts "$D/hosts" \
    >"$D/clean-$what.out" 2>&1 || fail "$what: clean --hosts: $(cat "$D/clean-$what.out")"
  cluster_expect_nothing_left "$what"
}
