# shellcheck shell=bash
# guard.sh — sourced at the top of every benchmark: re-runs the benchmark
# under bench_leftovers (tools/bench/leftovers.c), which afterwards proves
# that it left no process, network namespace, host interface, cgroup or
# registry entry behind, prints what it did leave on stderr, ends it, and
# makes the benchmark exit 4 when it succeeded otherwise. The benchmark's
# own output (its last line, the JSON) is untouched. Builds the helper
# first when it is missing.
if [[ -z ${HN_BENCH_GUARDED:-} ]]; then
  export HN_BENCH_GUARDED=1
  _hn_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  _hn_guard=${HIERNET_BUILD_DIR:-$_hn_root/build}/bin/bench_leftovers
  [[ -x $_hn_guard ]] || "$_hn_root/tools/build" || exit 1
  exec "$_hn_guard" -- "$0" "$@"
fi
