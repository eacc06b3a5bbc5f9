#!/usr/bin/env bash
# The wall-clock bounds of test_cli.sh's peer failures, in the serial pass
# (label serial, RUN_SERIAL: on an idle host, not beside the CPU-heavy
# tests): a dead peer's pending call fails within 100 ms; a silent peer's
# start fails at HIERNET_START_TIMEOUT (1 s), a garbling one's at once, and
# the stop that follows kills it at the stop deadline (2-3 s).
# Usage: test_cli_timing.sh HIERNET_BINARY
set -u
HN=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"

cat >death.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "d", backend = "none" }
local n = net:node("clitdead_n1")
net:start()
local pid = assert(n:stats().pid, "stats reports the peer pid")
os.execute("kill -STOP " .. pid)      -- frozen: the next call stays pending
local caller = hn.spawn(function() return pcall(n.ping, n) end)
hn.sleep(0.05)
local t0 = hn.now()
os.execute("kill -KILL " .. pid)
local ok, err = caller:wait()
local waited = hn.now() - t0
assert(not ok, "the pending call fails")
assert(waited < 0.1, "noticed after " .. waited .. " s")
print(string.format("peer death noticed in %.1f ms", waited * 1000))
LUA
expect_exit 0 "peer death within 100 ms" -- "$HN" run death.lua --out r-death --quiet
[[ -n $(grep -F "peer death noticed" out.txt) ]] && ok || bad "peer death scenario output: $err"

printf '#!/bin/sh\nexec sleep 30.741\n' > mute-peer.sh
printf '#!/bin/sh\nprintf "\\301\\301\\301" >&3\nexec 3>&-\nexec sleep 30.742\n' > garbage-peer.sh
chmod +x mute-peer.sh garbage-peer.sh
cat >start.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "s", backend = "none" }
net:node("clitstart_n1")
local t0 = hn.now()
local ok, err = pcall(net.start, net)
print(string.format("start %s after %.1f s: %s", tostring(ok), hn.now() - t0, tostring(err)))
t0 = hn.now()
net:stop()
print(string.format("stop after %.1f s", hn.now() - t0))
LUA
HIERNET_PEER=$PWD/mute-peer.sh HIERNET_START_TIMEOUT=1 \
  expect_exit 0 "silent peer" -- "$HN" run start.lua --out r-mute --quiet
grep -q "start false after 1\.[0-9] s: .*did not answer within 1 s" out.txt && ok || bad "silent peer: $(cat out.txt)"
HIERNET_PEER=$PWD/garbage-peer.sh \
  expect_exit 0 "garbling peer" -- "$HN" run start.lua --out r-garbage --quiet
grep -q "start false after 0\.[0-9] s" out.txt && ok || bad "garbling peer start: $(cat out.txt)"
grep -q "stop after [23]\.[0-9] s" out.txt && ok || bad "garbling peer is killed at the stop deadline: $(cat out.txt)"
# Killed peers may take a moment to leave the process table: poll, 5 s at most.
for _ in $(seq 100); do [[ -z $(ps -eo args= | grep -E "^sleep 30\.74[12]") ]] && break; sleep 0.05; done
[[ -z $(ps -eo args= | grep -E "^sleep 30\.74[12]") ]] && ok || bad "a misbehaving peer survived its run"

report
