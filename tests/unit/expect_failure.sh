#!/bin/sh
# Runs a program that must fail: passes only when it exits with STATUS and
# its output (stdout and stderr together) holds TEXT. ctest's
# PASS_REGULAR_EXPRESSION alone ignores the exit status, so a program that
# printed the text and exited 0 would pass.
# Usage: expect_failure.sh STATUS TEXT PROGRAM [ARGS...]
set -u
if [ $# -lt 3 ]; then
  echo "usage: expect_failure.sh STATUS TEXT PROGRAM [ARGS...]" >&2
  exit 2
fi
want=$1 text=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want" ]; then
  echo "expect_failure: $1 exited $rc, want $want" >&2
  exit 1
fi
case $out in
  *"$text"*) exit 0 ;;
esac
echo "expect_failure: the output of $1 lacks: $text" >&2
exit 1
