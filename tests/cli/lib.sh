# lib.sh — the checking helpers the CLI test scripts share: a scratch
# working directory, exit-code and output checks, the pass/fail counts.
passed=0 failed=0

# in_scratch_dir [registry]: makes $work (removed at exit) and enters it, so
# the out.txt/err.txt of the checks below land there; with "registry",
# HIERNET_RUN_DIR is a registry inside it, so that the runs the test sees
# (and leaves) are its own only.
in_scratch_dir() {
  work=$(mktemp -d) || exit 1
  trap 'rm -rf "$work"' EXIT
  cd "$work" || exit 1
  if [[ ${1-} == registry ]]; then
    export HIERNET_RUN_DIR=$work/registry
    mkdir -p "$HIERNET_RUN_DIR"
  fi
}

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# expect_exit CODE DESCRIPTION -- CMD...: runs CMD with stdout in out.txt and
# stderr in err.txt (also in $err) and checks its exit code.
expect_exit() {
  local want=$1 what=$2; shift 3
  "$@" >out.txt 2>err.txt; local got=$?
  err=$(cat err.txt)
  if [[ $got -eq $want ]]; then ok; else bad "$what: exit $got, want $want; stderr: $err"; fi
}
expect_err() { grep -qF -- "$1" err.txt && ok || bad "$2: stderr lacks '$1': $(cat err.txt)"; }
expect_out() { grep -qF -- "$1" out.txt && ok || bad "$2: stdout lacks '$1': $(cat out.txt)"; }
# wait_until TRIES INTERVAL CMD...: runs CMD until it succeeds, at most
# TRIES times INTERVAL seconds apart; the status of its last run.
wait_until() {
  local tries=$1 interval=$2 i
  shift 2
  for ((i = 1; i < tries; i++)); do
    "$@" && return 0
    sleep "$interval"
  done
  "$@"
}
# The closing line ctest and CI read.
report() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
