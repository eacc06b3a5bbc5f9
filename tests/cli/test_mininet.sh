#!/usr/bin/env bash
# hiernet.mininet around the Python helper (tests/lua/mininet_import.lua
# checks the topologies themselves): a topology file that changes the
# network or leaves a process behind while it is imported affects neither
# the host's network nor the host's processes (root: the helper runs in an
# empty network namespace under its own init); a Python without the mininet
# package gives one line naming the Debian package; no .pyc is written next
# to the user's file.
# Usage: test_mininet.sh HIERNET_BINARY
set -u
HN=$(readlink -f "$1")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if ! /usr/bin/python3 -c 'import mininet.topo' 2>/dev/null; then
  echo "SKIP: Debian's mininet package is not installed (tools/setup installs it)"
  exit 77
fi
work=$(mktemp -d)
tag="hnmn$$"
cleanup() {
  ip link del "$tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
source "$here/lib.sh"

cat >meddling.py <<PY
import os, subprocess
from mininet.topo import Topo

os.system("ip link add $tag type veth peer name ${tag}b 2>/dev/null")
subprocess.Popen(["sleep", "3000.$$"])


class MeddlingTopo(Topo):
    def build(self):
        self.addLink(self.addHost("h1"), self.addHost("h2"), bw=5)
PY
cat >load.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "m", backend = "none" }
local t = require("hiernet.mininet").load(net, "meddling.py", "MeddlingTopo")
print(string.format("loaded %d hosts, bw %d", #t.hosts, t.links[1]:params().bw))
LUA
expect_exit 0 "load a meddling file" -- "$HN" run load.lua --out r1 --quiet
expect_out "loaded 2 hosts, bw 5000000" "the meddling file's topology"
[[ ! -e __pycache__ ]] && ok || bad "the helper wrote __pycache__ next to the file"
if [[ $(id -u) -eq 0 ]]; then
  ! ip link show "$tag" >/dev/null 2>&1 && ok || bad "the file's ip link add reached the host's network"
  # Killed with the helper, it is gone within moments: up to 2 s.
  sleeper_gone() { [[ -z $(ps -eo args= | grep -xF "sleep 3000.$$") ]]; }
  wait_until 100 0.02 sleeper_gone && ok || bad "a process the file started outlived the helper"
else
  skipped="the sandbox checks not run: need root (unprivileged, the file cannot change the network)"
fi

printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >nosite-python
chmod +x nosite-python
HIERNET_PYTHON=$work/nosite-python expect_exit 1 "no mininet module" -- "$HN" run load.lua --out r2 --quiet
expect_err "install Debian package mininet" "no mininet: names the package"
[[ $(head -n 1 err.txt) == "hiernet.mininet: cannot import mininet: "*"(install Debian package mininet; tools/setup installs it)" ]] &&
  ok || bad "no mininet: first line: $(head -n 1 err.txt)"
HIERNET_PYTHON=$work/no-such-python expect_exit 1 "no python" -- "$HN" run load.lua --out r3 --quiet
expect_err "hiernet.mininet: HIERNET_PYTHON '$work/no-such-python' is not an executable" "no python: names it"
report || exit 1
# A part left out is a skip, not a pass (the parts that ran passed).
if [[ -n ${skipped:-} ]]; then
  echo "SKIP: $skipped"
  exit 77
fi
