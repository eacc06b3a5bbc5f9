#!/usr/bin/env bash
# test_cluster_parts.sh — one network built as two parts on two machines of
# the namespace cluster, each by part_build over SSH from m1, as the agent
# will (label netns, serial: it measures a rate and a delay; issue 20):
#   - hn-part-make encodes the parts on the host: h1 - s1 (a switch) on
#     m1, s1 - h2 cut to m2 at RATE, on BACKEND (kernel: no delay, this
#     kernel may lack sch_netem; user: DELAY each way), h1 with cpu=0.5
#     (a cgroup);
#   - hn-part-end builds each on its machine and holds it until its stdin
#     closes; the cut link's end in h2 is VXLAN with the part's VNI
#     (kernel), or a TAP of hiernet-linkd, whose UDP socket on m2's
#     underlay address is connected to m1's on the VNI's port (user);
#   - h1 pings h2's node address across the machines, and a whole
#     1500-byte packet with DF set crosses;
#   - on user, m2's underlay has UNDERLAY of delay each way (a linkd link
#     of its own: cluster_underlay_delay), which the parts declare for the
#     cut link (topo_link.underlay_delay_us): the median RTT of twenty
#     pings h1 -> h2 is within 0.3 ms of 2 x (DELAY - UNDERLAY) plus the
#     underlay's RTT (the median of twenty pings between the machines) and
#     a ping's serialization at RATE both ways, i.e. about 2 x DELAY, not
#     2 x (DELAY + UNDERLAY); a part whose cut link's delay is below
#     UNDERLAY is refused in one line naming the link and both figures;
#   - TCP goodput h1 -> h2 within 5% of RATE x 1448 / 1514;
#   - the same part built again on m1 fails in one line naming the link
#     and its VNI (taken), and m1's part on m2 is refused; on user, so is
#     one on m1 while its underlay's MTU is 1549, naming both figures;
#   - while built: m1's registry holds RUN-m1, the cgroup hiernet-RUN-m1-net
#     exists; once stdin is closed: the peers, their namespaces, the
#     registry entries, the cgroup, linkd and its sockets, and hn-part-end
#     are gone on both.
# Usage: test_cluster_parts.sh HN_PART_MAKE HN_PART_END HIERNET_PEER [BACKEND HIERNET_LINKD HN_LINKD_CTL]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
MAKE=$(realpath "$1")
END=$(realpath "$2")
PEER=$(realpath "$3")
BACKEND=${4:-kernel}
# hn-part-end finds hiernet-linkd by $HIERNET_LINKD: it is not its sibling.
END_ENV=(env "HIERNET_LINKD=$(realpath "${5:-/dev/null}")")
RATE=20000000 # a low packet rate: two cores shared with a loaded host must keep up
RUN=parts$$
DELAY_US=0 UNDERLAY_US=0
[[ $BACKEND == user ]] && DELAY_US=5000 UNDERLAY_US=1000

cluster_require
for tool in iperf3 ping python3; do
  command -v "$tool" >/dev/null || cluster_skip "$tool is not installed"
done
cluster_up 2 || { echo "FAIL: cluster_up 2"; exit 1; }
if ((UNDERLAY_US)); then
  cluster_underlay_delay 2 "$UNDERLAY_US" "$(realpath "$6")" "$(realpath "$5")" ||
    { echo "FAIL: cluster_underlay_delay"; exit 1; }
fi

dir=$CLUSTER_DIR/parts
mkdir -p "$dir"
vni_base=$((RANDOM * 256 + 1))
made=$("$MAKE" "$dir" "$RUN" "$vni_base" "$RATE" "$BACKEND" "$DELAY_US" "$UNDERLAY_US") ||
  { echo "FAIL: hn-part-make"; exit 1; }
H2_ADDR=$(awk '$1 == "h2" {print $2}' <<<"$made")
VNI=$(awk '$1 == "vni" {print $2}' <<<"$made")
PORT=$((16384 + VNI % 8192)) # proto/linkd_methods.h, LINKD_UNDERLAY_PORT

# Each part on its machine over SSH from m1, stdin a fifo we hold open.
SSH_PIDS=()
FDS=()
for i in 1 2; do
  mkfifo "$dir/in$i"
  cluster_ssh 1 "$i" "${END_ENV[@]}" "$END" "$dir/m$i.part" "m$i" "$PEER" <"$dir/in$i" >"$dir/out$i" 2>"$dir/err$i" &
  SSH_PIDS[$i]=$!
  exec {fd}>"$dir/in$i"
  FDS[$i]=$fd
done
close_inputs() {
  local i
  for i in 1 2; do [[ -n ${FDS[$i]:-} ]] && exec {FDS[$i]}>&-; FDS[$i]=; done
}
teardown() { iperf_serve_end; close_inputs; cluster_end KILL "${SSH_PIDS[@]}"; cluster_down; }
trap teardown EXIT
trap 'teardown; exit 130' INT
trap 'teardown; exit 143' TERM

built() { grep -qx built "$dir/out$1"; }
for _ in $(seq 600); do
  built 1 && built 2 && break
  cluster_alive "${SSH_PIDS[1]}" && cluster_alive "${SSH_PIDS[2]}" || break
  sleep 0.1
done
for i in 1 2; do
  built "$i" || { echo "FAIL: m$i's part was not built: $(cat "$dir/err$i")"; exit 1; }
done
pass "both parts built"
pid_of() { awk -v n="$2" '$1 == "node" && $2 == n {print $4}' "$dir/out$1"; }
H1=$(pid_of 1 h1)
H2=$(pid_of 2 h2)
node() { local pid=$1; shift; nsenter -t "$pid" -n -- "$@"; }
PEER_NETNS=("$(readlink "/proc/$H1/ns/net")" "$(readlink "/proc/$H2/ns/net")")

# The sockets of machine I on UDP port PORT: "local peer" pairs.
udp_on() { cluster_exec "$1" ss -Hnu "sport = :$PORT" | awk '{print $(NF - 1), $NF}'; }
if [[ $BACKEND == kernel ]]; then
  expect_eq "h2's end of the cut link is VXLAN with the part's VNI" \
    "$(node "$H2" ip -d link show | grep -o 'vxlan id [0-9]*')" "vxlan id $VNI"
else
  expect_eq "h2's end of the cut link is a TAP" \
    "$(node "$H2" ip -d link show | grep -c 'tun type tap')" 1
  expect_eq "m2's linkd holds one socket from its underlay address to m1's, on the VNI's port" \
    "$(udp_on 2)" "10.250.0.2:$PORT 10.250.0.1:$PORT"
fi
node "$H1" ping -c 1 -W 2 -q "$H2_ADDR" >/dev/null && pass "h1 pings h2 across machines" ||
  fail "h1 does not ping h2 ($H2_ADDR)"
# Twenty pings' RTTs, in ms: "median min max".
rtt_stats() {
  "$@" ping -c 20 -i 0.05 -W 2 "$RTT_TO" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -g |
    awk '{v[NR] = $1} END {if (NR) print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2, v[1], v[NR]}'
}
if [[ $BACKEND == user ]]; then
  read -r underlay _ < <(RTT_TO=10.250.0.2 rtt_stats cluster_exec 1)
  read -r rtt rtt_min rtt_max < <(RTT_TO=$H2_ADDR rtt_stats node "$H1")
  echo "RTT h1 -> h2: median $rtt ms (min $rtt_min, max $rtt_max); underlay's median $underlay ms;" \
    "configured 2 x $DELAY_US us, underlay 2 x $UNDERLAY_US us (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # A ping's 98-byte frame also takes 98 x 8 / RATE to serialize each way.
  want=$(python3 -c "print(round(2 * ($DELAY_US - $UNDERLAY_US) / 1000 + $underlay + 2 * 98 * 8e3 / $RATE, 3))")
  python3 -c "import sys; sys.exit(0 if abs($rtt - $want) <= 0.3 else 1)" &&
    pass "h1 -> h2 RTT within 0.3 ms of 2 x (delay - underlay delay + serialization) + the underlay's RTT, $want ms" ||
    fail "h1 -> h2 RTT $rtt ms is not within 0.3 ms of $want ms"
fi
node "$H1" ping -c 1 -W 2 -M do -s 1472 -q "$H2_ADDR" >/dev/null &&
  pass "a 1500-byte packet with DF crosses" || fail "a 1500-byte packet with DF did not cross"

goodput_check "goodput h1 -> h2 across the cut link" "$(python3 -c "print($RATE * 1448 / 1514)")" \
  "$H2" "$H1" "$H2_ADDR"

# Bad input, one line each, nothing left: the same part again on m1 (its
# VNI is taken there), and m1's part on m2.
again=$(cluster_ssh 1 1 "${END_ENV[@]}" "$END" "$dir/m1.part" m1 "$PEER" </dev/null 2>&1)
expect_eq "the same VNI again on m1 fails the build" "$? $(wc -l <<<"$again")" "1 1"
[[ $again == *"link s1-h2: "*"VNI $VNI"* ]] && pass "... naming the link and the VNI: $again" ||
  fail "the collision's message names neither the link nor the VNI: $again"
wrong=$(cluster_ssh 1 2 "${END_ENV[@]}" "$END" "$dir/m1.part" m2 "$PEER" </dev/null 2>&1)
expect_eq "m1's part on m2 is refused" "$? $wrong" \
  "1 hn-part-end: part of network 'net' for machine 'm1' reached machine 'm2'"
if ((UNDERLAY_US)); then
  mkdir -p "$dir/short"
  "$MAKE" "$dir/short" "$RUN" "$vni_base" "$RATE" user 100 "$UNDERLAY_US" >/dev/null ||
    fail "hn-part-make short"
  short=$(cluster_ssh 1 1 "${END_ENV[@]}" "$END" "$dir/short/m1.part" m1 "$PEER" </dev/null 2>&1)
  expect_eq "a cut link of less delay than the underlay's is refused" "$? $short" \
    "1 hn-part-end: network 'net': link s1-h2: delay 0.1 ms is below the underlay's one-way delay of 1 ms between its machines, which every packet already takes"
fi
if [[ $BACKEND == user ]]; then # the VXLAN MTU rule holds for linkd's datagrams too
  cluster_exec 1 ip link set eth0 mtu 1549
  small=$(cluster_ssh 1 1 "${END_ENV[@]}" "$END" "$dir/m1.part" m1 "$PEER" </dev/null 2>&1)
  rc=$?
  cluster_exec 1 ip link set eth0 mtu "${CLUSTER_MTU:-1550}"
  expect_eq "an underlay MTU below 1550 is refused" "$rc $small" \
    "1 hn-part-end: network 'net': link s1-h2: underlay eth0 has MTU 1549, below the 1550 that a 1500-byte packet needs over VXLAN (50 bytes of headers): raise the underlay's MTU"
fi
mkdir -p "$dir/none"
"$MAKE" "$dir/none" "$RUN" "$vni_base" "$RATE" none >/dev/null || fail "hn-part-make none"
none=$(cluster_ssh 1 1 "${END_ENV[@]}" "$END" "$dir/none/m1.part" m1 "$PEER" </dev/null 2>&1)
expect_eq "a part on backend none is refused" "$? $none" \
  "1 hn-part-end: part wire: part: backend 'none': a part needs an emulating backend"

expect_eq "m1's registry entry is named by run and machine" \
  "$(awk '$1 == "registry" {print $2}' "$dir/out1")" "$RUN-m1"
expect_eq "m1's registry holds it" "$(cluster_exec 1 ls /run/hiernet)" "$RUN-m1"
expect_eq "m2's registry holds its own" "$(cluster_exec 2 ls /run/hiernet)" "$RUN-m2"
cgroups() { find /sys/fs/cgroup -maxdepth 3 -type d -name "hiernet-$RUN-m*" 2>/dev/null; }
[[ -n $(cgroups) ]] && pass "h1's cgroup is named by run and machine: $(cgroups | head -1)" ||
  fail "no cgroup hiernet-$RUN-m1-net"

# The end of the sessions' stdin releases both parts. A process's start,
# in clock ticks since boot (defined before RELEASED reads it: an unset
# RELEASED made every holder look newer and the check below vacuous).
started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
RELEASED=$(started self)
[[ $RELEASED =~ ^[0-9]+$ ]] || fail "the release's start time is '$RELEASED'"
close_inputs
for i in 1 2; do
  for _ in $(seq 300); do cluster_alive "${SSH_PIDS[$i]}" || break; sleep 0.1; done
  wait "${SSH_PIDS[$i]}"
  rc=$?
  expect_eq "m$i's hn-part-end released its part and exited 0" "$(tail -1 "$dir/out$i") $rc" "released 0"
done
for pid in "$H1" "$H2"; do cluster_alive "$pid" && fail "peer $pid is alive"; done
# Who holds a node's namespace: "/proc/PID/... -> net:[inode] (comm)".
# Namespace inodes are reused once freed, and other tests on this host
# make namespaces meanwhile: a process started after the release began
# ($RELEASED, clock ticks since boot) holds a new namespace, not ours.
ns_holders() {
  local line pid st
  find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -lname 'net:*' -printf '%p -> %l\n' 2>/dev/null |
    grep -F -f <(printf -- '-> %s\n' "${PEER_NETNS[@]}") | while read -r line; do
    pid=$(cut -d/ -f3 <<<"$line")
    st=$(started "$pid")
    [[ -n $st ]] && ((st <= RELEASED)) && echo "$line ($(cat "/proc/$pid/comm" 2>/dev/null))"
  done
}
for _ in $(seq 50); do [[ -z $(ns_holders) ]] && break; sleep 0.1; done
expect_eq "no process holds a node namespace" "$(ns_holders)" ""
expect_eq "m1's registry is empty" "$(cluster_exec 1 ls /run/hiernet)" ""
expect_eq "m2's registry is empty" "$(cluster_exec 2 ls /run/hiernet)" ""
expect_eq "no cgroup is left" "$(cgroups)" ""
expect_eq "no socket is left on m1's port" "$(udp_on 1)" ""
expect_eq "no socket is left on m2's port" "$(udp_on 2)" ""
rest=$(cluster_procs | grep -vxF -f <(printf '%s\n' "${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}"))
expect_eq "only the machines' holders and sshd are left in them" "$rest" ""

cluster_down_checked teardown "$CLUSTER_UNDERLAY_CTL" "$CLUSTER_UNDERLAY_LINKD"

checks_exit
