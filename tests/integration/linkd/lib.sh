# lib.sh — shared helpers of the hiernet-linkd namespace tests (sourced).
#
# Usage in a test: source lib.sh "$@"   (args: hiernet-linkd hn-linkd-ctl hn-udp-probe)
# Provides: skip/fail/check helpers, namespaces named hn-h3-<pid>-<name> that
# are removed on exit, a coprocess running hn-linkd-ctl (one linkd), rpc
# calls, and a two-node link setup. Exits 77 when the machine cannot run it.

LINKD=$1 CTL=$2 PROBE=$3
FAILED=0
PFX=hn-h3-$$
NSLIST=()

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; FAILED=1; }
pass() { echo "ok: $*"; }
# check "description" python-expression (true = pass); prints the values
check() {
  if python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then pass "$1 [$2]"; else fail "$1 [$2]"; fi
}
finish() { [[ $FAILED -eq 0 ]] && echo "PASS" || echo "FAILED"; exit $FAILED; }

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, TAP devices)"
[[ -c /dev/net/tun ]] || skip "/dev/net/tun is missing"
for tool in ip python3 "$LINKD" "$CTL" "$PROBE"; do
  command -v "$tool" >/dev/null || skip "$tool not found"
done
ip netns add "$PFX-probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns del "$PFX-probe"

cleanup() {
  if [[ -n ${CTL_PID:-} ]]; then
    eval "exec ${CTL[1]}>&-" 2>/dev/null
    wait "$CTL_PID" 2>/dev/null
  fi
  for pid in ${BG_PIDS:-}; do kill "$pid" 2>/dev/null; done
  # what runs in the test's namespaces (an iperf3 under a killed subshell)
  for ns in "${NSLIST[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
  done
  for ns in "${NSLIST[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -f -- "$PFX".* # the tests' scratch files, named after PFX in the working directory
}
trap cleanup EXIT

# ns_add NAME: a namespace with lo up and IPv6 off (no DAD/RS chatter in counters)
ns_add() {
  ip netns add "$PFX-$1" || exit 1
  NSLIST+=("$PFX-$1")
  ip -n "$PFX-$1" link set lo up
  ip netns exec "$PFX-$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}
nsx() { local ns=$1; shift; ip netns exec "$PFX-$ns" "$@"; }
# wait_listening NS PORT [tcp|udp]: returns once a socket in NS listens on
# (tcp) or is bound to (udp) PORT, so a client started next finds its
# server; fails the test after 5 s.
wait_listening() {
  local flag=-Hltn
  [[ ${3:-tcp} == udp ]] && flag=-Hlun
  for _ in $(seq 250); do
    [[ -n $(nsx "$1" ss "$flag" "sport = :$2") ]] && return 0
    sleep 0.02
  done
  fail "nothing listens on $3 port $2 in $1 after 5 s"
  return 1
}
nspath() { echo "/run/netns/$PFX-$1"; }

ctl_start() {
  coproc CTL { exec "$CTL" "$LINKD" "$@"; }
  read -r -t 5 line <&"${CTL[0]}" || { fail "hn-linkd-ctl did not start"; finish; }
  LINKD_PID=${line#linkd pid=}
}

# rpc METHOD k=v ...: sets REPLY_LINE; a failed call fails the test
rpc() {
  echo "$*" >&"${CTL[1]}"
  read -r -t 10 REPLY_LINE <&"${CTL[0]}" || REPLY_LINE="error no reply"
  [[ $REPLY_LINE == ok* ]] || { fail "rpc $*: $REPLY_LINE"; return 1; }
}
# rpc_try METHOD ...: like rpc but an error reply is expected to be possible
rpc_try() {
  echo "$*" >&"${CTL[1]}"
  read -r -t 10 REPLY_LINE <&"${CTL[0]}" || REPLY_LINE="error no reply"
}
# get KEY: value of KEY in REPLY_LINE
get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$REPLY_LINE"; }

# link_pair ID NS_A NS_B SUBNET(e.g. 10.0.1) [emulation k=v ...]: TAP eth<ID> in
# both namespaces, .1 on A and .2 on B
link_pair() {
  local id=$1 a=$2 b=$3 net=$4; shift 4
  rpc link_add id="$id" a.netns_path="$(nspath "$a")" a.ifname="l$id" a.up=true \
      b.netns_path="$(nspath "$b")" b.ifname="l$id" b.up=true "$@" || return 1
  ip -n "$PFX-$a" addr add "$net.1/24" dev "l$id"
  ip -n "$PFX-$b" addr add "$net.2/24" dev "l$id"
}

# ping_avg NS DST COUNT: average RTT in ms after one warm-up ping (ARP)
ping_avg() {
  nsx "$1" ping -c 1 -W 2 "$2" >/dev/null
  nsx "$1" ping -q -c "$3" -i 0.05 -W 2 "$2" | sed -n 's|.* = [0-9.]*/\([0-9.]*\)/.*|\1|p'
}
