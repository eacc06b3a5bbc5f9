#!/bin/sh
# Runs one scenario test through the real binary in a fresh results directory.
# Usage: run_scenario_test.sh HIERNET SCENARIO OUT_DIR
set -eu
rm -rf "$3"
exec "$1" run "$2" --out "$3" --quiet
