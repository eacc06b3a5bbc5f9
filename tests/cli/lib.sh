# lib.sh — the checking helpers the CLI test scripts share. Source it from
# inside the test's working directory; it keeps the pass/fail counts.
passed=0 failed=0

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
