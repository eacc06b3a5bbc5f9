#!/usr/bin/env bash
# mininet_ping.sh — runs mininet_ping.lua through run_scenario.sh where
# Debian's mininet package (with its examples) is installed.
# Usage: mininet_ping.sh HIERNET backend=kernel|user
# Exit: 0 pass, 1 fail, 77 skipped (not root, no mininet package).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! /usr/bin/python3 -c 'import mininet.topo, mininet.examples' 2>/dev/null; then
  echo "SKIP: Debian's mininet package (with its examples) is not installed (tools/setup installs it)"
  exit 77
fi
exec bash "$here/run_scenario.sh" "$1" "$here/mininet_ping.lua" "${@:2}"
