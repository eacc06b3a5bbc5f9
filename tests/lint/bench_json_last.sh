#!/usr/bin/env bash
# bench_json_last.sh SOURCE_DIR — the lint test of README.md's promise that
# every benchmark prints its JSON object as its last line: bench_json_last.py
# on tools/bench/ (statically; nothing is run), then on made-up benchmarks
# that break the promise (a line after the JSON, an EXIT trap that prints,
# a bench_* program whose last printf is not the JSON), which it must refuse
# naming file:line, and on one that keeps it.
set -uo pipefail
root=$(readlink -f "${1:?usage: bench_json_last.sh SOURCE_DIR}")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
check=$here/bench_json_last.py
source "$root/tests/cli/lib.sh"
in_scratch_dir # expect_exit writes out.txt and err.txt there

expect_exit 0 "tools/bench" -- python3 "$check" "$root/tools/bench"
expect_out "benchmarks checked, 0 problems" "tools/bench"

# bench NAME BODY: a made-up benchmark script in its own directory.
bench() {
  mkdir -p "$work/$1"
  printf '#!/usr/bin/env bash\n%s\n' "$2" >"$work/$1/$1"
  chmod +x "$work/$1/$1"
}
bench good $'json="{\\"bench\\":\\"x\\""\necho "figure 1"\nprintf \'{"bench":"x",\' \\\n  >/dev/null\necho "$json}"\necho "to stderr" >&2\ntrap \'rm -rf "$out"\' EXIT'
expect_exit 0 "a benchmark that keeps the promise" -- python3 "$check" "$work/good"
bench trailer $'echo "{\\"bench\\":\\"x\\"}"\necho "done."'
expect_exit 1 "a line after the JSON" -- python3 "$check" "$work/trailer"
expect_err "trailer:3: the last statement that writes to stdout is not the JSON line: echo \"done.\"" "a line after the JSON"
bench trap $'cleanup() {\n  echo "cleaned up"\n}\ntrap cleanup EXIT\necho "$json}"'
expect_exit 1 "an EXIT trap that prints" -- python3 "$check" "$work/trap"
expect_err "trap:3: the EXIT trap writes to stdout after the JSON line: echo \"cleaned up\"" "an EXIT trap that prints"
bench quoted $'trap \'rm -rf "$out"; echo bye\' EXIT\nprintf \'{"bench":"x"}\\n\''
expect_exit 1 "a quoted EXIT trap that prints" -- python3 "$check" "$work/quoted"
expect_err "quoted:2: the EXIT trap writes to stdout" "a quoted EXIT trap that prints"
bench prog $'exec "$root/build/bin/bench_prog" "$@"'
printf 'int main(void) {\n    printf("{\\"bench\\":\\"prog\\"}\\n");\n    printf("done\\n");\n}\n' >"$work/prog/prog.c"
expect_exit 1 "a program that prints after its JSON" -- python3 "$check" "$work/prog"
expect_err "prog.c:3: the last write to stdout is not the JSON line" "a program that prints after its JSON"
report
