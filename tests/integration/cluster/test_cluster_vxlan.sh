#!/usr/bin/env bash
# test_cluster_vxlan.sh — a cross-machine link over the namespace cluster,
# each end made on its own machine over SSH from m1 (as the agent will),
# with emu/nl_vxlan.h through hn-vxlan-end (label netns, serial: it
# measures goodput; issue 20):
#   - a node namespace in m1 and in m2, one VXLAN link (VNI 4243) between
#     them, HTB at 40 Mbit/s at both ends;
#   - the VNI is the one given at both ends; ping works, and a whole
#     1500-byte packet with DF set;
#   - while iperf3 listens in node 2, ss -ltn in each machine shows the
#     test's sshd on its underlay address and nothing else;
#   - TCP goodput within 5% of 40 Mbit/s x 1448 / 1514, and with m1's
#     underlay limited to 20 Mbit/s, of 20 Mbit/s x 1448 / 1564 (the
#     packets cross the underlay, 50 bytes of VXLAN each);
#   - nothing left afterwards (node namespaces included).
# Usage: test_cluster_vxlan.sh HN_VXLAN_END
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
END=$(realpath "$1")  # run over SSH, from the home directory
RATE=40000000  # a low packet rate: two cores shared with a loaded host must keep up

cluster_require
for tool in iperf3 ping python3; do
  command -v "$tool" >/dev/null || cluster_skip "$tool is not installed"
done
cluster_up 2 || { echo "FAIL: cluster_up 2"; exit 1; }

# A node namespace inside each machine, held by a sleep that dies with us.
NODES=()
for i in 1 2; do
  nsenter -t "${CLUSTER_HOLDERS[$i]}" -n -u -m -- setpriv --pdeathsig KILL unshare --net sleep infinity </dev/null &
  NODES[$i]=$!
  disown $!
done
for i in 1 2; do
  for _ in $(seq 500); do
    ns=$(readlink "/proc/${NODES[$i]}/ns/net")
    [[ $ns != "$(readlink /proc/self/ns/net)" && $ns != "$(readlink "/proc/${CLUSTER_HOLDERS[$i]}/ns/net")" ]] && break
    sleep 0.01
  done
  cluster_pin "${NODES[$i]}" || { echo "FAIL: node namespace of m$i not pinned"; exit 1; }
done
node() { local i=$1; shift; nsenter -t "${NODES[$i]}" -n -- "$@"; }
teardown() { iperf_serve_end; cluster_end KILL "${NODES[@]}"; cluster_down; }
trap teardown EXIT
trap 'teardown; exit 130' INT
trap 'teardown; exit 143' TERM

# Each end on its machine, over SSH from m1.
cluster_ssh 1 1 "$END" "${NODES[1]}" vx1 4243 10.250.0.1 10.250.0.2 eth0 10.0.0.1/30 $RATE &&
  cluster_ssh 1 2 "$END" "${NODES[2]}" vx2 4243 10.250.0.2 10.250.0.1 eth0 10.0.0.2/30 $RATE ||
  { echo "FAIL: the link was not made"; exit 1; }

for i in 1 2; do
  expect_eq "node $i's end has VNI 4243" \
    "$(node "$i" ip -d link show "vx$i" | grep -o 'vxlan id [0-9]*')" "vxlan id 4243"
done
node 1 ping -c 1 -W 2 -q 10.0.0.2 >/dev/null && pass "ping across machines" || fail "no ping across machines"
node 1 ping -c 1 -W 2 -M do -s 1472 -q 10.0.0.2 >/dev/null &&
  pass "a 1500-byte packet with DF crosses" || fail "a 1500-byte packet with DF did not cross"

iperf_serve "${NODES[2]}"
for i in 1 2; do
  expect_eq "m$i listens on its sshd only while a node serves" \
    "$(cluster_exec "$i" ss -Hltn | awk '{print $4}' | tr '\n' ' ')" "$(cluster_addr "$i"):22 "
done
iperf_serve_end

goodput_check "vxlan across machines, HTB 40 Mbit/s" "$(python3 -c "print($RATE * 1448 / 1514)")" \
  "${NODES[2]}" "${NODES[1]}" 10.0.0.2
# The packets do cross the underlay: limited to 20 Mbit/s there, where
# each full packet is 1564 bytes (1514 + 50 of VXLAN), the goodput follows.
cluster_underlay_rate 1 20mbit || fail "cannot shape m1's underlay"
goodput_check "the same, m1's underlay at 20 Mbit/s" "$(python3 -c "print(20e6 * 1448 / 1564)")" \
  "${NODES[2]}" "${NODES[1]}" 10.0.0.2

cluster_down_checked teardown "${NODES[@]}"

checks_exit
