#!/usr/bin/env bash
# CLI behaviour of `hiernet`: usage errors and exit codes, a Lua error's
# file:line and traceback, run.json statuses, SIGINT/SIGTERM stopping in
# order with nothing left behind, a peer's death noticed (how promptly:
# test_cli_timing.sh, which runs alone).
# Usage: test_cli.sh HIERNET_BINARY
set -u
HN=$1
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
source "$here/peer_failures.sh"
in_scratch_dir
json_status() { grep -o '"status": "[a-z]*"' "$1/run.json" | cut -d'"' -f4; }
peers_of() { # node-name prefix -> number of live hiernet-peer processes with it
  ps -eo args= | grep -c "^[^ ]*hiernet-peer .*--node $1" || true
}

# --- usage and bad input: exit 2, one line, nothing created ---
expect_exit 2 "no command" -- "$HN"
expect_exit 0 "help" -- "$HN" --help
grep -q "usage: hiernet" out.txt && ok || bad "--help prints usage"
expect_exit 0 "run help" -- "$HN" run --help
grep -q -- "--set name=value" out.txt && ok || bad "run --help documents --set"
expect_exit 0 "version" -- "$HN" version
grep -q "^hiernet [0-9]" out.txt && ok || bad "version line"
expect_exit 2 "unknown command" -- "$HN" frobnicate
expect_err "unknown command 'frobnicate'" "unknown command message"
expect_exit 2 "missing scenario argument" -- "$HN" run
expect_exit 2 "missing scenario file" -- "$HN" run nosuch.lua
expect_err "nosuch.lua" "missing file is named"
[[ ! -e results ]] && ok || bad "a missing scenario creates no results directory"
printf 'local x = = 1\n' >syntax.lua
expect_exit 2 "syntax error" -- "$HN" run syntax.lua
expect_err "syntax.lua:1:" "syntax error has file:line"
[[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "syntax error is one line: $(cat err.txt)"
printf 'return 1\n' >ok.lua
expect_exit 2 "bad --set" -- "$HN" run ok.lua --set novalue
expect_err "expected name=value" "bad --set message"
expect_exit 2 "bad --backend" -- "$HN" run ok.lua --backend warp
expect_err "unknown backend 'warp'" "bad backend message"
expect_exit 2 "unknown option" -- "$HN" run --frob ok.lua

# --- a completed run ---
expect_exit 0 "trivial scenario" -- "$HN" run ok.lua --out r-ok --quiet
[[ $(json_status r-ok) == completed ]] && ok || bad "run.json status completed"
expect_exit 2 "reused --out" -- "$HN" run ok.lua --out r-ok --quiet
expect_err "already holds a run" "reused --out message"

# --- a Lua error in a task: exit 1, one line file:line, traceback in log.txt, teardown ---
cat >err.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "e", backend = "none" }
local n = net:node("clierr_n1")
net:start()
local t = hn.spawn(function()
  hn.sleep(0.01)
  error("deliberate failure")
end)
t:wait()
LUA
expect_exit 1 "lua error" -- "$HN" run err.lua --out r-err --quiet
expect_err "err.lua:7: deliberate failure" "error has file:line: message"
grep -q "stack traceback" r-err/log.txt && ok || bad "log.txt has the error's traceback"
[[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "a Lua error is one line on stderr: $(cat err.txt)"
[[ $(json_status r-err) == failed ]] && ok || bad "run.json status failed"
[[ $(peers_of clierr_) -eq 0 ]] && ok || bad "peers left after a Lua error"
grep -q '"error": "err.lua:7: deliberate failure"' r-err/run.json && ok || bad "run.json records the error"

# --- SIGINT and SIGTERM: stop in order, exit 130/143, run.json interrupted ---
cat >long.lua <<'LUA'
local hn = require("hiernet")
local prefix = ...
local net = hn.network{ name = "l", backend = "none" }
for i = 1, 3 do net:node(prefix .. i) end
net:start()
local f = io.open(os.getenv("READY_FILE"), "w"); f:write("up"); f:close()
hn.sleep(60)
LUA
for sig in INT TERM; do
  want=$([[ $sig == INT ]] && echo 130 || echo 143)
  rm -f ready
  READY_FILE=$PWD/ready "$HN" run long.lua --out "r-$sig" --quiet "clisig${sig}_" 2>err.txt &
  pid=$!
  for _ in $(seq 100); do [[ -e ready ]] && break; sleep 0.05; done
  [[ $(peers_of "clisig${sig}_") -eq 3 ]] && ok || bad "$sig: 3 peers running before the signal"
  kill -s "$sig" "$pid"
  wait "$pid"; got=$?
  [[ $got -eq $want ]] && ok || bad "$sig: exit $got, want $want"
  [[ $(json_status "r-$sig") == interrupted ]] && ok || bad "$sig: run.json interrupted"
  [[ $(peers_of "clisig${sig}_") -eq 0 ]] && ok || bad "$sig: peers left"
done

# --- SIGKILL of the controller: the peers exit on EOF ---
rm -f ready
READY_FILE=$PWD/ready "$HN" run long.lua --out r-KILL --quiet clisigkill_ 2>/dev/null &
pid=$!
for _ in $(seq 100); do [[ -e ready ]] && break; sleep 0.05; done
kill -KILL "$pid"; wait "$pid" 2>/dev/null
for _ in $(seq 40); do [[ $(peers_of clisigkill_) -eq 0 ]] && break; sleep 0.05; done
[[ $(peers_of clisigkill_) -eq 0 ]] && ok || bad "peers survive SIGKILL of the controller"

# --- a peer that dies: pending calls fail, naming the node (how fast:
# test_cli_timing.sh, in the serial pass) ---
write_peer_death cli
expect_exit 0 "peer death" -- "$HN" run death.lua --out r-death --quiet
[[ -n $(grep -F "peer death noticed" out.txt) ]] && ok || bad "peer death scenario output: $err"

# --- peers that misbehave at start: the start fails, and the stop that
# follows kills what does not exit (the time bounds: test_cli_timing.sh) ---
write_misbehaving_peers cli 30.73
run_misbehaving_peers
grep -q "start false after [0-9.]* s: .*did not answer within 1 s" mute.txt && ok || bad "silent peer: $(cat mute.txt)"
grep -q "start false after [0-9.]* s" garbage.txt && ok || bad "garbling peer start: $(cat garbage.txt)"
misbehaving_peers_gone 30.73

# --- the controller library's messages go to the run's log.txt, and not to
# a --quiet stderr: a peer that sends a well-formed msgpack value that is no
# RPC message (the array [9]) is reported and ignored ---
printf '#!/bin/sh\nprintf "\\221\\011" >&3\nexec sleep 30.733\n' > odd-peer.sh
chmod +x odd-peer.sh
HIERNET_PEER=$PWD/odd-peer.sh HIERNET_START_TIMEOUT=1 \
  expect_exit 0 "odd peer" -- "$HN" run start.lua --out r-odd --quiet
grep -q "node 'clistart_n1': malformed message" r-odd/log.txt && ok ||
  bad "library message missing from log.txt: $(cat r-odd/log.txt)"
grep -q "malformed message" err.txt && bad "--quiet run printed a library message: $(cat err.txt)" || ok
for _ in $(seq 100); do [[ -z $(ps -eo args= | grep -E "^sleep 30\.733") ]] && break; sleep 0.05; done

# --- a deadline variable set to what is not seconds is refused at the
# start, naming it and the value, not replaced by its default ---
HIERNET_BUILD_TIMEOUT=3s expect_exit 0 "HIERNET_BUILD_TIMEOUT=3s" -- "$HN" run start.lua --out r-badenv --quiet
expect_out "start false after 0.0 s: network 's': start: HIERNET_BUILD_TIMEOUT='3s' is not a number of seconds above 0" \
  "HIERNET_BUILD_TIMEOUT=3s"
HIERNET_START_TIMEOUT=-1 expect_exit 0 "HIERNET_START_TIMEOUT=-1" -- "$HN" run start.lua --out r-badenv2 --quiet
expect_out "HIERNET_START_TIMEOUT='-1' is not a number of seconds above 0" "HIERNET_START_TIMEOUT=-1"

report
