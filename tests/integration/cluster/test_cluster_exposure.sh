#!/usr/bin/env bash
# test_cluster_exposure.sh — what a run spread over three machines of the
# namespace cluster exposes on their underlay (label netns, parallel
# pass; issue 20, "Exposure"): h1 and the switch s1 on m1 (the
# controller's machine), h2 on m2, h3 on m3, every link a cut link but
# h1-s1. While the network
# runs (a tensor sent h1 -> h2 -> h3 first, so the data plane has been
# used), every TCP and UDP socket of each machine's own network namespace
# (not its nodes': those are the emulated network) is listed with ss, and
# of those bound to the machine's underlay address or to a wildcard:
#   - TCP: only sshd's listener on port 22 (the control channel is the SSH
#     session's; an agent listens on nothing);
#   - UDP on backend kernel: only VXLAN's port 4789 (kernel sockets);
#   - UDP on backend user: only hiernet-linkd's cut-link sockets, on a port
#     in 16384-24575, bound to the underlay address and connected to another
#     machine's underlay address on the same port (docs/guide.md,
#     "Privileges and exposure").
# Each machine must show at least one such UDP socket (every machine has a
# cut link), so the check cannot pass on an empty listing. The runs leave
# nothing behind.
# Usage: test_cluster_exposure.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_spread_up 3

cat >"$D/expose.lua" <<LUA
local hn = require("hiernet")
local backend = hn.param("backend", "kernel")
local net = hn.network{ name = "ex" .. backend, backend = backend, hosts = "$D/hosts" }
local h1 = net:node("h1", { host = "m1" })
local s1 = net:switch("s1", { host = "m1" })
local h2 = net:node("h2", { host = "m2" })
local h3 = net:node("h3", { host = "m3" })
net:link(h1, s1, { bw = "100Mbit" })
net:link(s1, h2, { bw = "100Mbit" })
net:link(s1, h3, { bw = "100Mbit" })
net:start()
h1:tensor{ name = "x", size = 100000, fill = "uniform", seed = 7 }
h1:send{ tensor = "x", to = h2 }
h2:send{ tensor = "x", to = h3 }
print("sent " .. h3:read{ tensor = "x", range = { 0, 4 } }.values[1])
io.open("$D/" .. backend .. ".up", "w"):close()
for _ = 1, 600 do
  if io.open("$D/" .. backend .. ".go") then break end
  hn.sleep(0.05)
end
net:stop()
print("stopped")
LUA

# Whether ADDR (ss's local address, without the port) is machine I's
# underlay address or a wildcard.
on_underlay() {
  case $2 in
    "$(cluster_addr "$1")" | 0.0.0.0 | '*' | '[::]' | '[::ffff:0.0.0.0]') return 0 ;;
  esac
  return 1
}

# The sockets of machine I that face the underlay: "tcp|udp STATE LOCAL PEER".
underlay_sockets() {
  local i=$1 proto state _rq _sq local peer
  for proto in t u; do
    cluster_exec "$i" ss -Hna"$proto" | while read -r state _rq _sq local peer _; do
      on_underlay "$i" "${local%:*}" && echo "$proto $state $local $peer"
    done
  done
}

# One line per socket of machine I that BACKEND must not open.
exposed() {
  local i=$1 backend=$2 proto state local peer port
  while read -r proto state local peer; do
    port=${local##*:}
    if [[ $proto == t ]]; then
      [[ $state == LISTEN && $port == 22 ]] && continue # sshd
      [[ $state != LISTEN && $port == 22 ]] && continue # an SSH session into it
      [[ $state != LISTEN && ${peer##*:} == 22 ]] && continue # m1's ssh to an agent
      echo "m$i: TCP $state $local $peer"
    elif [[ $backend == kernel ]]; then
      [[ $port == 4789 ]] || echo "m$i: UDP $state $local $peer (not VXLAN's 4789)"
    else
      if ((port >= 16384 && port <= 24575)) && [[ $state == ESTAB && ${local%:*} == "$(cluster_addr "$i")" ]] &&
        [[ ${peer##*:} == "$port" && ${peer%:*} == "$CLUSTER_SUBNET".* && ${peer%:*} != "${local%:*}" ]]; then
        continue
      fi
      echo "m$i: UDP $state $local $peer (not a connected cut-link socket)"
    fi
  done
}

for backend in kernel user; do
  rm -f "$D/$backend.up" "$D/$backend.go"
  cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" run "$D/expose.lua" \
    --out "$D/r-$backend" --quiet --set backend=$backend >"$D/$backend.out" 2>"$D/$backend.err" &
  run_pid=$!
  for _ in $(seq 600); do [[ -e $D/$backend.up ]] && break; cluster_alive "$run_pid" || break; sleep 0.05; done
  [[ -e $D/$backend.up ]] && pass "$backend: the network runs over m1..m3" ||
    fail "$backend: the run did not come up: $(tail -n3 "$D/$backend.err")"
  for i in 1 2 3; do
    underlay_sockets "$i" >"$D/$backend.m$i.sockets"
    sed "s/^/  m$i: /" "$D/$backend.m$i.sockets"
    expect_eq "$backend: m$i opens nothing else on its underlay" \
      "$(exposed "$i" "$backend" <"$D/$backend.m$i.sockets")" ""
    n_udp=$(grep -c '^u ' "$D/$backend.m$i.sockets")
    ((n_udp >= 1)) && pass "$backend: m$i has its cut link's UDP socket ($n_udp)" ||
      fail "$backend: m$i: no UDP socket of a cut link on the underlay"
  done
  touch "$D/$backend.go"
  wait "$run_pid"
  expect_eq "$backend: run exit status" "$?" 0
  expect_eq "$backend: stopped" "$(grep -c '^stopped$' "$D/$backend.out")" 1
done

cluster_expect_nothing_left "the runs"
checks_exit
