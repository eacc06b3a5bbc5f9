#!/usr/bin/env bash
# clang_format.sh SOURCE_DIR — the lint test: every C source and header of the
# repository, CUDA's included (git ls-files *.c *.h *.cu *.cuh), is formatted as .clang-format says, by
# clang-format 14 (other versions format differently). Fails naming the files
# that are not; `clang-format-14 -i FILE` fixes one. Exit 77 without
# clang-format 14 or outside a git checkout.
set -uo pipefail
root=${1:?usage: clang_format.sh SOURCE_DIR}
cd "$root" || exit 1
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $fmt ]] || ! "$fmt" --version | grep -q 'version 14\.'; then
  echo "SKIP: clang-format 14 is not installed (tools/setup installs it)"
  exit 77
fi
if ! files=$(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null) || [[ -z $files ]]; then
  echo "SKIP: not a git checkout: no list of sources"
  exit 77
fi
present=()
for f in $files; do
  [[ -f $f ]] && present+=("$f")
done
# One clang-format for every file: its start costs more than formatting a
# file (all 262 files in one process took 2 CPU-s, one process each about
# 55), and it goes on past a file that differs, naming each in its
# "FILE:LINE:COL: error:" lines. Should it fail without naming one
# (it could not read a file), every file is checked on its own, as before.
bad=()
if ! out=$("$fmt" --dry-run --Werror "${present[@]}" 2>&1 >/dev/null); then
  named=$(sed -nE 's/^(.+):[0-9]+:[0-9]+: error:.*$/\1/p' <<<"$out" | sort -u)
  for f in "${present[@]}"; do
    grep -qxF -- "$f" <<<"$named" && bad+=("$f")
  done
  if ((${#bad[@]} == 0)); then
    for f in "${present[@]}"; do
      "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done
  fi
fi
n=$(wc -w <<<"$files")
if ((${#bad[@]})); then
  echo "clang-format: ${#bad[@]} of $n files differ from .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: clang-format-14 -i FILE"
  exit 1
fi
echo "clang-format: $n files formatted"
