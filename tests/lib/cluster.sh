# cluster.sh — a test cluster of "machines" made of namespaces (sourced by
# bash tests; issue 20).
#
#   source tests/lib/cluster.sh
#   cluster_require             # exits 77 with one line when this host cannot
#   cluster_up 3                # machines m1 m2 m3
#   cluster_ssh 1 2 ip -br addr # from m1, over SSH, a command on m2
#   cluster_down                # also run by the traps cluster_up sets
#
# Machine I is a network, UTS and mount namespace held by one process (its
# "holder", a sleep), with hostname mI, its own tmpfs on /run (so its
# /run/hiernet registry and /run/netns are its own), its own sysfs on /sys
# (its interfaces in /sys/class/net; the host's cgroup tree moved back under
# /sys/fs/cgroup, shared as one kernel's is) and interface eth0 at 10.250.0.I/24
# on a bridge in an underlay namespace of its own. The filesystem is
# otherwise the host's: /tmp, /var and the build tree are shared by all
# machines (docs/design-notes.md, "Several machines", says what an agent
# keeps per machine because of it). Each machine runs a real OpenSSH server
# (Debian openssh-server: tools/setup cluster) on 10.250.0.I:22 with a host
# key made for this cluster, accepting root with a user key made for it; the
# client side is $CLUSTER_DIR/ssh_config (BatchMode, a known_hosts of the
# cluster's own holding exactly those host keys, StrictHostKeyChecking yes).
# The underlay's MTU is $CLUSTER_MTU (default 1550: a 1500-byte emulated
# packet plus VXLAN's 50 bytes).
#
# Every process this starts has SIGKILL as its parent-death signal, so a
# SIGKILLed test leaves no process and so no namespace behind (only
# $CLUSTER_DIR, a directory under $TMPDIR); cluster_down ends every sshd and
# holder by pid, then any process still inside a machine's namespace, and
# removes the directory. cluster_up traps EXIT, INT and TERM to run it: a
# test with traps of its own calls cluster_down from them.
#
# The leftover checks find the cluster's namespaces by inode ("net:[N]"),
# and the kernel gives a freed namespace's inode to the next one any
# process makes: so each namespace noted is pinned (cluster_pin) by a
# sleep outside it holding a descriptor on it, which cluster_down leaves
# running. A pinned namespace keeps its inode until the test exits (the
# pins have SIGKILL as parent-death signal; cluster_unpin ends them by
# pid), so a check after cluster_down can only find what the cluster left,
# whatever other tests make meanwhile; the pins themselves are not counted.

CLUSTER_N=0
CLUSTER_DIR=
CLUSTER_HOLDERS=()  # index 0: the underlay; I: machine I
CLUSTER_SSHD=()     # index I: machine I's sshd
CLUSTER_NETNS=()    # "net:[inode]" of each namespace made, for cluster_leftovers
CLUSTER_PINS=()     # pids of the processes pinning those namespaces (cluster_pin)
CLUSTER_SUBNET=10.250.0

cluster_skip() { echo "SKIP: $*"; exit 77; }

cluster_require() {
  [[ $(id -u) -eq 0 ]] || cluster_skip "needs root (network, UTS and mount namespaces)"
  [[ -x /usr/sbin/sshd ]] || cluster_skip "no /usr/sbin/sshd (Debian openssh-server: tools/setup cluster)"
  local tool
  for tool in ssh ssh-keygen unshare nsenter setpriv ip ss mountpoint; do
    command -v "$tool" >/dev/null || cluster_skip "$tool is not installed"
  done
}

# cluster_exec I CMD...: CMD inside machine I's namespaces (I = 0: the underlay's).
cluster_exec() {
  local holder=${CLUSTER_HOLDERS[$1]}
  shift
  if [[ -z $holder ]]; then echo "cluster_exec: no such machine" >&2; return 2; fi
  nsenter -t "$holder" -n -u -m -- "$@"
}

# cluster_ssh FROM TO CMD...: CMD on machine TO, over SSH from machine FROM.
cluster_ssh() {
  local from=$1 to=$2
  shift 2
  cluster_exec "$from" ssh -F "$CLUSTER_DIR/ssh_config" "m$to" "$@"
}

cluster_addr() { echo "$CLUSTER_SUBNET.$1"; }
# A machines file listing m1..mN at their addresses, into FILE.
cluster_hosts_file() {
  local i
  for ((i = 1; i <= $1; i++)); do echo "m$i $(cluster_addr "$i")"; done >"$2"
}

# A holder: `setpriv` arms the parent-death signal (kept across the execs),
# `unshare` makes the namespaces, the script sets the machine up, touches its
# ready file and becomes the sleep that holds them.
cluster_holder_start() {
  local ready=$1 script=$2
  shift 2
  setpriv --pdeathsig KILL unshare "$@" --propagation private sh -ec "$script; touch '$ready'; exec sleep infinity" \
    </dev/null >>"$CLUSTER_DIR/holders.log" 2>&1 &
  CLUSTER_HOLDERS+=($!)
  disown $!
  local _
  for _ in $(seq 500); do
    [[ -e $ready ]] && return 0
    cluster_alive "${CLUSTER_HOLDERS[-1]}" || break
    sleep 0.01
  done
  echo "cluster_up: a namespace holder did not start ($CLUSTER_DIR/holders.log):" >&2
  cat "$CLUSTER_DIR/holders.log" >&2
  return 1
}

# Machine I's own /run and /sys: the host's cgroup tree is bound aside on
# the new /run, sysfs is mounted over /sys, and the tree is moved back.
cluster_machine_script() {
  cat <<EOF
mount -t tmpfs -o mode=755,size=16m hn-cluster /run
mkdir -p /run/sshd /run/hn-cgroup
if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup /run/hn-cgroup; fi
mount -t sysfs hn-cluster /sys
if mountpoint -q /run/hn-cgroup; then mount --move /run/hn-cgroup /sys/fs/cgroup; fi
rmdir /run/hn-cgroup
hostname m$1
EOF
}

# cluster_pin PID [NS]: notes PID's network namespace in CLUSTER_NETNS and
# pins it: a sleep (not in it, so no process of the machine) holds a
# descriptor on it, so its inode is no other namespace's until the pin
# ends. With NS ("net:[N]", noted earlier, e.g. by a child test), fails
# unless PID's namespace is still NS (PID gone or reused). The descriptor
# is opened here first, so the inode read is the one the pin holds.
cluster_pin() {
  local pid=$1 want=${2-} fd ns
  exec {fd}<"/proc/$pid/ns/net" || return 1
  ns=$(readlink "/proc/$BASHPID/fd/$fd")
  if [[ -n $want && $ns != "$want" ]]; then
    exec {fd}<&-
    echo "cluster_pin: pid $pid is in $ns, not $want" >&2
    return 1
  fi
  setpriv --pdeathsig KILL sleep infinity 3<&"$fd" </dev/null >/dev/null 2>&1 &
  CLUSTER_PINS+=($!)
  disown $!
  exec {fd}<&-
  [[ " ${CLUSTER_NETNS[*]} " == *" $ns "* ]] || CLUSTER_NETNS+=("$ns")
}

# cluster_pin_noted PIDS NS: pins the namespaces a child test noted (NS,
# its CLUSTER_NETNS, space-separated) while the child still runs, through
# their holders, the first pids of PIDS (its CLUSTER_HOLDERS first);
# CLUSTER_NETNS becomes NS, for the checks once the child is gone.
cluster_pin_noted() {
  local -a pids ns
  read -ra pids <<<"$1"
  read -ra ns <<<"$2"
  CLUSTER_NETNS=()
  local i
  for i in "${!ns[@]}"; do cluster_pin "${pids[$i]}" "${ns[$i]}" || return 1; done
}

# Ends the pins by pid: the namespaces they held may then go, and their
# inodes be reused, so call it after the last leftover check (or not at
# all: the pins die with the test).
cluster_unpin() {
  [[ ${#CLUSTER_PINS[@]} -gt 0 ]] || return 0
  cluster_end KILL "${CLUSTER_PINS[@]}"
  local pid
  for pid in "${CLUSTER_PINS[@]}"; do wait "$pid" 2>/dev/null; done
  CLUSTER_PINS=()
}

cluster_underlay_up() {
  cluster_holder_start "$CLUSTER_DIR/underlay.ready" "true" --net || return 1
  cluster_pin "${CLUSTER_HOLDERS[0]}" || return 1
  cluster_exec 0 ip link add br0 type bridge &&
    cluster_exec 0 ip link set br0 up && cluster_exec 0 ip link set lo up
}

# Machine I's eth0 on the underlay bridge, IPv6 off (no DAD/RS chatter).
cluster_machine_link() {
  local i=$1 mtu=${CLUSTER_MTU:-1550}
  cluster_exec 0 ip link add "u$i" mtu "$mtu" type veth peer name eth0 mtu "$mtu" \
    netns "${CLUSTER_HOLDERS[$i]}" &&
    cluster_exec 0 ip link set "u$i" master br0 up &&
    cluster_exec "$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
      net.ipv6.conf.eth0.disable_ipv6=1 &&
    cluster_exec "$i" ip addr add "$(cluster_addr "$i")/24" dev eth0 &&
    cluster_exec "$i" ip link set eth0 up && cluster_exec "$i" ip link set lo up
}

# cluster_underlay_rate I RATE: limits what machine I sends into the
# underlay to RATE (tc's units, e.g. 50mbit) with HTB on its eth0, which
# counts whole outer frames (a full VXLAN packet: 1564 bytes). Delay on the
# underlay needs sch_netem, which not every kernel has: cluster_underlay_delay
# makes it with hiernet-linkd instead.
cluster_underlay_rate() {
  cluster_exec "$1" tc qdisc replace dev eth0 root handle 1: htb default 1 &&
    cluster_exec "$1" tc class replace dev eth0 parent 1: classid 1:1 htb rate "$2" quantum 1564
}

# cluster_underlay_delay I US LINKD_CTL LINKD: machine I reaches the
# underlay through a hiernet-linkd link that delays each direction by US
# microseconds (so I's one-way delay to any machine is US): a TAP ul0 in
# machine I, MTU as eth0's, takes eth0's address, and its peer ul<I> joins
# the bridge. One such machine per cluster. hn-linkd-ctl (LINKD_CTL) runs
# linkd in the host's namespace until cluster_down closes its input (or
# the test dies: parent-death signal), and the TAPs go with linkd.
CLUSTER_UNDERLAY_CTL=
CLUSTER_UNDERLAY_LINKD= # linkd's pid, for cluster_leftovers
CLUSTER_UNDERLAY_FD=
cluster_underlay_delay() {
  local i=$1 us=$2 ctl=$3 linkd=$4 mtu=${CLUSTER_MTU:-1550} reply m
  mkfifo "$CLUSTER_DIR/ul.in" "$CLUSTER_DIR/ul.out" || return 1
  setpriv --pdeathsig KILL "$ctl" "$linkd" <"$CLUSTER_DIR/ul.in" >"$CLUSTER_DIR/ul.out" 2>>"$CLUSTER_DIR/holders.log" &
  CLUSTER_UNDERLAY_CTL=$!
  exec {CLUSTER_UNDERLAY_FD}>"$CLUSTER_DIR/ul.in"
  exec {m}<"$CLUSTER_DIR/ul.out"
  read -r -t 10 reply <&$m # "linkd pid=N"
  CLUSTER_UNDERLAY_LINKD=${reply#linkd pid=}
  echo "link_add id=1 a.netns_path=/proc/${CLUSTER_HOLDERS[$i]}/ns/net a.ifname=ul0 a.mtu=$mtu" \
    "a.up=true b.netns_path=/proc/${CLUSTER_HOLDERS[0]}/ns/net b.ifname=ul$i b.mtu=$mtu" \
    "b.up=true delay=$us" >&$CLUSTER_UNDERLAY_FD
  read -r -t 10 reply <&$m
  exec {m}<&-
  [[ $reply == ok* ]] || { echo "cluster_underlay_delay: $reply" >&2; return 1; }
  local addr
  addr=$(cluster_addr "$i")
  cluster_exec 0 ip link set "ul$i" master br0 up &&
    cluster_exec "$i" ip addr del "$addr/24" dev eth0 && cluster_exec "$i" ip link set eth0 down &&
    cluster_exec "$i" ip addr add "$addr/24" dev ul0 || return 1
  for ((m = 1; m <= CLUSTER_N; m++)); do cluster_exec "$m" ip neigh flush all; done
}

cluster_underlay_delay_end() {
  [[ -n $CLUSTER_UNDERLAY_CTL ]] || return 0
  exec {CLUSTER_UNDERLAY_FD}>&-
  local _
  for _ in $(seq 50); do cluster_alive "$CLUSTER_UNDERLAY_CTL" || break; sleep 0.1; done
  cluster_alive "$CLUSTER_UNDERLAY_CTL" && kill -KILL "$CLUSTER_UNDERLAY_CTL"
  wait "$CLUSTER_UNDERLAY_CTL" 2>/dev/null
  CLUSTER_UNDERLAY_CTL=
}

cluster_keys() {
  ssh-keygen -q -t ed25519 -N '' -C hiernet-cluster -f "$CLUSTER_DIR/id_ed25519" &&
    cp "$CLUSTER_DIR/id_ed25519.pub" "$CLUSTER_DIR/authorized_keys" || return 1
  cat >"$CLUSTER_DIR/ssh_config" <<EOF
Host *
  User root
  IdentityFile $CLUSTER_DIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $CLUSTER_DIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
EOF
}

cluster_sshd_config() {
  local i=$1
  cat <<EOF
ListenAddress $(cluster_addr "$i"):22
HostKey $CLUSTER_DIR/m$i/host_key
AuthorizedKeysFile $CLUSTER_DIR/authorized_keys
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
EOF
}

# sshd -D stays in the foreground, so $! is its pid; it waits until sshd
# listens (sshd binds before it accepts anything).
cluster_sshd_start() {
  local i=$1 _
  mkdir -p "$CLUSTER_DIR/m$i"
  ssh-keygen -q -t ed25519 -N '' -C "m$i" -f "$CLUSTER_DIR/m$i/host_key" || return 1
  echo "$(cluster_addr "$i") $(cut -d' ' -f1,2 "$CLUSTER_DIR/m$i/host_key.pub")" >>"$CLUSTER_DIR/known_hosts"
  printf 'Host m%s\n  HostName %s\n' "$i" "$(cluster_addr "$i")" >>"$CLUSTER_DIR/ssh_config"
  cluster_sshd_config "$i" >"$CLUSTER_DIR/m$i/sshd_config"
  nsenter -t "${CLUSTER_HOLDERS[$i]}" -n -u -m -- setpriv --pdeathsig KILL \
    /usr/sbin/sshd -D -e -f "$CLUSTER_DIR/m$i/sshd_config" </dev/null >"$CLUSTER_DIR/m$i/sshd.log" 2>&1 &
  CLUSTER_SSHD[$i]=$!
  disown $!
  for _ in $(seq 500); do
    [[ -n $(cluster_exec "$i" ss -Hltn "sport = :22") ]] && return 0
    cluster_alive "${CLUSTER_SSHD[$i]}" || break
    sleep 0.01
  done
  echo "cluster_up: sshd of m$i does not listen ($CLUSTER_DIR/m$i/sshd.log):" >&2
  cat "$CLUSTER_DIR/m$i/sshd.log" >&2
  return 1
}

cluster_up() {
  local n=$1 i
  CLUSTER_N=$n
  CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hn-cluster.XXXXXX") || return 1
  trap cluster_down EXIT
  trap 'cluster_down; exit 130' INT
  trap 'cluster_down; exit 143' TERM
  cluster_keys && cluster_underlay_up || return 1
  for ((i = 1; i <= n; i++)); do
    cluster_holder_start "$CLUSTER_DIR/m$i.ready" "$(cluster_machine_script "$i")" \
      --net --uts --mount || return 1
    cluster_pin "${CLUSTER_HOLDERS[$i]}" || return 1
    cluster_machine_link "$i" && cluster_sshd_start "$i" || return 1
  done
}

# "PATH -> net:[inode]" for every process namespace (/proc/PID/ns/net)
# and descriptor that is one of the cluster's namespaces, but the pins'
# descriptors: one find, as a readlink per descriptor would cost a fork
# each on a busy host.
cluster_netns_users() {
  [[ ${#CLUSTER_NETNS[@]} -gt 0 ]] || return 0
  find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -lname 'net:*' -printf '%p -> %l\n' 2>/dev/null |
    grep -F -f <(printf -- '-> %s\n' "${CLUSTER_NETNS[@]}") |
    grep -v -F -f <(printf '/proc/%s/fd/\n' "${CLUSTER_PINS[@]}" _)
}

# Pids of the processes whose network namespace is one of the cluster's.
cluster_procs() {
  cluster_netns_users | sed -n 's|^/proc/\([0-9]*\)/ns/net -> .*|\1|p'
}

# cluster_expect_nothing_left WHAT: checks (checks.sh's expect_eq) that the
# machines run nothing but their holders and sshd (waiting up to 5 s for
# what is ending) and that their registries are empty.
cluster_expect_nothing_left() {
  local what=$1 rest _ i
  for _ in $(seq 50); do
    rest=$(cluster_procs | grep -vxF -f <(printf '%s\n' "${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}"))
    [[ -z $rest ]] && break
    sleep 0.1
  done
  expect_eq "$what: no process left on the machines" \
    "$(for p in $rest; do echo "$p $(cat /proc/$p/comm 2>/dev/null)"; done)" ""
  expect_eq "$what: registries empty" \
    "$(for ((i = 1; i <= CLUSTER_N; i++)); do cluster_exec "$i" ls -A /run/hiernet 2>/dev/null; done)" ""
}

# Pids of the processes in machine I's network namespace.
cluster_procs_in() {
  local ns pid
  ns=$(readlink "/proc/${CLUSTER_HOLDERS[$1]}/ns/net")
  for pid in $(cluster_procs); do
    [[ $(readlink "/proc/$pid/ns/net" 2>/dev/null) == "$ns" ]] && echo "$pid"
  done
}

# Whether pid is a process that has not exited (a zombie has).
cluster_alive() {
  local state
  state=$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null) || return 1
  [[ $state != " Z"* ]]
}

# Sends SIG to the pids given and waits up to 2 s for them to go.
cluster_end() {
  local sig=$1 pid _
  shift
  for pid in "$@"; do kill "-$sig" "$pid" 2>/dev/null; done
  for _ in $(seq 200); do
    local alive=0
    for pid in "$@"; do cluster_alive "$pid" && alive=1; done
    [[ $alive -eq 0 ]] && return 0
    sleep 0.01
  done
  return 1
}

cluster_down() {
  local -  # set -e of the caller must not stop a teardown halfway
  set +e
  trap - EXIT INT TERM
  [[ -n $CLUSTER_DIR ]] || return 0
  cluster_underlay_delay_end
  cluster_end TERM "${CLUSTER_SSHD[@]}" || cluster_end KILL "${CLUSTER_SSHD[@]}"
  # Sessions an sshd left (a client still connected) live in its machine.
  local rest
  rest=$(cluster_procs | grep -vxF -f <(printf '%s\n' "${CLUSTER_HOLDERS[@]}"))
  [[ -n $rest ]] && cluster_end KILL $rest
  cluster_end KILL "${CLUSTER_HOLDERS[@]}"
  # A process that entered a machine meanwhile (a session starting as its
  # sshd went) is still there: end it too, for up to 2 s.
  local _
  for _ in $(seq 20); do
    rest=$(cluster_procs)
    [[ -z $rest ]] && break
    cluster_end KILL $rest
  done
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=
  CLUSTER_SSHD=()
  CLUSTER_HOLDERS=()
}

# cluster_spread_up N: the start of a test of runs spread over machines:
# the tools checked (exit 77 without them), N machines up, D their
# directory and D/hosts their hosts file.
cluster_spread_up() {
  cluster_require
  cluster_up "$1" || { echo "FAIL: cluster_up $1"; exit 1; }
  D=$CLUSTER_DIR
  cluster_hosts_file "$1" "$D/hosts"
}


# What is left of a cluster that went down (call with the pids noted
# before): one line per process alive or namespace held.
cluster_leftovers() {
  local pid
  for pid in "$@"; do
    cluster_alive "$pid" && echo "process $pid ($(cat "/proc/$pid/comm" 2>/dev/null)) is alive"
  done
  cluster_netns_users
}

# cluster_down_checked TEARDOWN [PID...]: a test's end: TEARDOWN (a
# command: cluster_down, or the test's own function that ends with it)
# takes the cluster down and the traps go, then checks.sh's expect_eq
# checks that nothing is left of it: no holder, sshd or PID given alive,
# no namespace it noted held (waiting up to 5 s for what is ending).
cluster_down_checked() {
  local teardown=$1 pid _
  shift
  local pids=("${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}")
  for pid in "$@"; do [[ -n $pid ]] && pids+=("$pid"); done
  "$teardown"
  trap - EXIT INT TERM
  for _ in $(seq 50); do [[ -z $(cluster_leftovers "${pids[@]}") ]] && break; sleep 0.1; done
  expect_eq "nothing left" "$(cluster_leftovers "${pids[@]}")" ""
}
