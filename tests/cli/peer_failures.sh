# peer_failures.sh — the peer failures test_cli.sh checks for what happens
# and test_cli_timing.sh for how fast (serial pass), written once. Source
# it after lib.sh; its functions write and run in the working directory.

# death.lua: a frozen peer is killed while a call to it is pending; the call
# fails naming node TAG"dead_n1" and the signal, and the script prints
# "peer death noticed in N ms".
write_peer_death() {
  local node=$1dead_n1
  cat >death.lua <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "d", backend = "none" }
local n = net:node("$node")
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
assert(err:find("node '$node'", 1, true) and err:find("signal 9", 1, true), err)
print(string.format("peer death noticed in %.1f ms", waited * 1000))
LUA
}

# mute-peer.sh (never answers), garbage-peer.sh (sends bytes that are no
# message) and start.lua, which starts node TAG"start_n1" with one of them
# and prints "start OK after S s: ERR" and "stop after S s". The peers sleep
# SLEEP.1 and SLEEP.2 seconds, which names them in the process table
# (misbehaving_peers_gone SLEEP checks that none is left).
write_misbehaving_peers() {
  local tag=$1 sleep=$2
  printf '#!/bin/sh\nexec sleep %s1\n' "$sleep" > mute-peer.sh
  printf '#!/bin/sh\nprintf "\\301\\301\\301" >&3\nexec 3>&-\nexec sleep %s2\n' "$sleep" > garbage-peer.sh
  chmod +x mute-peer.sh garbage-peer.sh
  cat >start.lua <<LUA
local hn = require("hiernet")
local net = hn.network{ name = "s", backend = "none" }
net:node("${tag}start_n1")
local t0 = hn.now()
local ok, err = pcall(net.start, net)
print(string.format("start %s after %.1f s: %s", tostring(ok), hn.now() - t0, tostring(err)))
t0 = hn.now()
net:stop()
print(string.format("stop after %.1f s", hn.now() - t0))
LUA
}

# run_misbehaving_peers: $HN runs start.lua with each of them (the silent one with a
# 1 s start timeout), exit 0 checked; their outputs in mute.txt and
# garbage.txt. The two runs go at once: each only waits on its own peer's
# timers (the start timeout, the stop deadline), so neither delays the
# other, and the silent one's 1 s start is spent inside the other's stop.
run_misbehaving_peers() {
  HIERNET_PEER=$PWD/mute-peer.sh HIERNET_START_TIMEOUT=1 \
    "$HN" run start.lua --out r-mute --quiet >mute.txt 2>mute.err &
  local mute=$! got
  trap "kill $mute 2>/dev/null; rm -rf \"\$work\"" EXIT # not left running if the test is ended
  HIERNET_PEER=$PWD/garbage-peer.sh "$HN" run start.lua --out r-garbage --quiet >garbage.txt 2>garbage.err
  got=$?
  [[ $got -eq 0 ]] && ok || bad "garbling peer: exit $got, want 0; stderr: $(cat garbage.err)"
  wait "$mute"
  got=$?
  trap 'rm -rf "$work"' EXIT
  [[ $got -eq 0 ]] && ok || bad "silent peer: exit $got, want 0; stderr: $(cat mute.err)"
}

# Killed peers may take a moment to leave the process table: poll, 5 s at most.
misbehaving_peers_gone() {
  local pattern="^sleep ${1//./\\.}[12]"
  wait_until 100 0.05 eval '[[ -z $(ps -eo args= | grep -E "$pattern") ]]' && ok ||
    bad "a misbehaving peer survived its run"
}
