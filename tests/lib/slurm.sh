# slurm.sh — a real Slurm cluster on the namespace test cluster of
# cluster.sh (sourced by bash tests after it; issue 20).
#
#   source tests/lib/cluster.sh; source tests/lib/slurm.sh
#   slurm_require               # exits 77 with one line when this host cannot
#   cluster_up 4 && slurm_up 4  # m1 the head, m2..m4 Slurm's nodes
#   slurm_exec 1 salloc -N 3 hiernet doctor --hosts slurm
#   slurm_down                  # then cluster_down; slurm_up's traps run both
#
# Machine 1 is the head: it runs slurmctld and is where salloc (and so a
# hiernet controller) runs, outside the allocation, so that every machine
# of the allocation is reached through srun. Machines 2..N each run one
# slurmd whose NodeName is the machine's UTS hostname (mI), found by slurmd
# itself from gethostname(). Every machine runs its own munged (Debian
# munge: tools/setup slurm) with a key made for this cluster, on a socket
# in the machine's own /run (the same path on every machine, each its own
# tmpfs), which slurm.conf names with AuthInfo=socket=. The configuration
# ($SLURM_CONF), state, spool, logs and pid files all live in
# $CLUSTER_DIR/slurm; nothing is written under /etc, /var or the host's
# /run. Each machine also gets a bind-mounted /etc/hosts naming every
# machine (in its own mount namespace), as a real cluster's name service
# would: salloc, srun and hiernet resolve mI there.
#
# Slurm's choices that namespaces dictate: ProctrackType=proctrack/pgid and
# TaskPlugin=task/none (the machines share the host's cgroup v1 tree, which
# a cgroup plugin per slurmd would fight over), no accounting, select/linear
# (an allocation gets whole machines, as hiernet's placement assumes).
#
# Daemons are started by pid with SIGKILL as their parent-death signal and
# in the foreground (-D, -F); slurm_down ends them by pid (TERM, then KILL
# after 2 s), and cluster_down ends whatever they forked (slurmstepd) as it
# ends every process left in a machine's namespaces; slurm_up's traps run
# both on exit, SIGINT and SIGTERM. A SIGKILLed test runs no trap: its
# daemons and salloc die of their parent-death signal, but a job step then
# running would outlive it (seen with `salloc srun sleep 600`: the orphaned
# srun on the head, the step's slurmstepd, which slurmd forked away to
# init, and its task), holding their machines' namespaces. So slurm_up
# also starts a janitor: a subshell that outlives the test, sees it gone
# (polling its pid) and then ends every process left in the machines'
# namespaces and removes the directory. slurm_down ends it first, by pid.

SLURM_DIR=
SLURM_CONF=
SLURM_HEAD=1
SLURM_DAEMONS=() # pids of every munged, slurmctld and slurmd started
SLURM_JANITOR=   # pid of the janitor (below)
SLURM_MUNGE_SOCKET=/run/hn-munge/munge.socket

slurm_require() {
  local tool
  for tool in slurmctld slurmd salloc srun scontrol sinfo munged munge; do
    command -v "$tool" >/dev/null ||
      cluster_skip "$tool is not installed (Debian slurm-wlm and munge: tools/setup slurm)"
  done
}

# slurm_exec I CMD...: CMD in machine I with the cluster's slurm.conf,
# ended with the test (a salloc must not outlive it).
slurm_exec() {
  local i=$1
  shift
  cluster_exec "$i" setpriv --pdeathsig KILL env SLURM_CONF="$SLURM_CONF" "$@"
}

# slurm_daemon I NAME CMD...: CMD in machine I, in the background, its
# output in $SLURM_DIR/mI/NAME.out; its pid is noted.
slurm_daemon() {
  local i=$1 name=$2
  shift 2
  nsenter -t "${CLUSTER_HOLDERS[$i]}" -n -u -m -- setpriv --pdeathsig KILL "$@" \
    </dev/null >"$SLURM_DIR/m$i/$name.out" 2>&1 &
  SLURM_DAEMONS+=($!)
  disown $!
}

# slurm_wait WHAT PID CMD...: polls CMD for up to 20 s while PID lives.
slurm_wait() {
  local what=$1 pid=$2 _
  shift 2
  for _ in $(seq 200); do
    "$@" && return 0
    cluster_alive "$pid" || break
    sleep 0.1
  done
  echo "slurm_up: $what" >&2
  return 1
}

slurm_hosts_file() {
  local i
  echo "127.0.0.1 localhost"
  for ((i = 1; i <= CLUSTER_N; i++)); do echo "$(cluster_addr "$i") m$i"; done
}

# Machine I's /etc/hosts, and its munged on the cluster's key.
slurm_machine_up() {
  local i=$1
  mkdir -p "$SLURM_DIR/m$i/spool" &&
    cluster_exec "$i" mount --bind "$SLURM_DIR/hosts" /etc/hosts &&
    cluster_exec "$i" mkdir -m 755 -p "${SLURM_MUNGE_SOCKET%/*}" || return 1
  # munged wants its socket's directory searchable by all, its key private.
  slurm_daemon "$i" munged munged -F --socket="$SLURM_MUNGE_SOCKET" \
    --key-file="$SLURM_DIR/munge.key" --pid-file="$SLURM_DIR/m$i/munged.pid" \
    --seed-file="$SLURM_DIR/m$i/munged.seed" --log-file="$SLURM_DIR/m$i/munged.log"
  slurm_wait "munged of m$i does not answer ($SLURM_DIR/m$i/munged.out)" "${SLURM_DAEMONS[-1]}" \
    slurm_munge_answers "$i"
}

slurm_munge_answers() {
  cluster_exec "$1" munge -S "$SLURM_MUNGE_SOCKET" -n 2>/dev/null |
    cluster_exec "$1" unmunge -S "$SLURM_MUNGE_SOCKET" >/dev/null 2>&1
}

slurm_config() {
  local n=$1 i hardware
  # The CPU layout slurmd will find (all machines share this host's):
  # another one would drain each node as "differs from hardware".
  hardware=$(slurmd -C | grep -o 'CPUs=.*ThreadsPerCore=[0-9]*') || return 1
  cat <<EOF
ClusterName=hiernet
SlurmctldHost=m$SLURM_HEAD($(cluster_addr "$SLURM_HEAD"))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_MUNGE_SOCKET
StateSaveLocation=$SLURM_DIR/ctld
SlurmctldPidFile=$SLURM_DIR/m$SLURM_HEAD/slurmctld.pid
SlurmctldLogFile=$SLURM_DIR/m$SLURM_HEAD/slurmctld.log
SlurmdSpoolDir=$SLURM_DIR/%n/spool
SlurmdPidFile=$SLURM_DIR/%n/slurmd.pid
SlurmdLogFile=$SLURM_DIR/%n/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/linear
ReturnToService=2
InactiveLimit=0
KillWait=5
MailProg=/bin/true
SlurmctldDebug=info
SlurmdDebug=info
EOF
  for ((i = 1; i <= n; i++)); do
    [[ $i -eq $SLURM_HEAD ]] && continue
    echo "NodeName=m$i NodeAddr=$(cluster_addr "$i") $hardware State=UNKNOWN"
  done
  echo "PartitionName=hiernet Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
}

slurm_ctld_answers() {
  slurm_exec "$SLURM_HEAD" scontrol ping 2>/dev/null | grep -q 'is UP'
}

# Whether every node says idle (sinfo's states, one a line).
slurm_nodes_idle() {
  local states
  states=$(slurm_exec "$SLURM_HEAD" sinfo -h -N -o '%T' 2>/dev/null) || return 1
  [[ $(grep -cx idle <<<"$states") -eq $(($1 - 1)) ]]
}

slurm_up() {
  local n=$1 i
  SLURM_DIR=$CLUSTER_DIR/slurm
  SLURM_CONF=$SLURM_DIR/slurm.conf
  trap 'slurm_down; cluster_down' EXIT
  trap 'slurm_down; cluster_down; exit 130' INT
  trap 'slurm_down; cluster_down; exit 143' TERM
  mkdir -p "$SLURM_DIR/ctld" && slurm_janitor_start && slurm_hosts_file >"$SLURM_DIR/hosts" &&
    slurm_config "$n" >"$SLURM_CONF" || return 1
  (umask 077 && head -c 1024 /dev/urandom >"$SLURM_DIR/munge.key") || return 1
  for ((i = 1; i <= n; i++)); do slurm_machine_up "$i" || return 1; done
  slurm_daemon "$SLURM_HEAD" slurmctld slurmctld -D -f "$SLURM_CONF"
  slurm_wait "slurmctld does not answer ($SLURM_DIR/m$SLURM_HEAD/slurmctld.log)" \
    "${SLURM_DAEMONS[-1]}" slurm_ctld_answers || return 1
  for ((i = 1; i <= n; i++)); do
    [[ $i -eq $SLURM_HEAD ]] && continue
    slurm_daemon "$i" slurmd slurmd -D -f "$SLURM_CONF"
  done
  slurm_wait "not every slurmd registered idle ($SLURM_DIR/m*/slurmd.log)" \
    "${SLURM_DAEMONS[-1]}" slurm_nodes_idle "$n"
}

# Whether pid is alive and not a zombie, with builtins only: the janitor
# polls without forking, and so leaves no child when it is ended.
slurm_pid_alive() {
  local stat
  read -r stat <"/proc/$1/stat" 2>/dev/null && [[ ${stat##*) } != Z* ]]
}

# The janitor: runs no trap of the test (a subshell resets them), and
# sweeps only once the test is gone (a zombie is gone too). It waits on a
# FIFO that nothing writes, opened read-write so the open does not block.
slurm_janitor_start() {
  local test_pid=$BASHPID
  mkfifo "$SLURM_DIR/janitor" || return 1
  (
    exec </dev/null >/dev/null 2>&1 9<>"$SLURM_DIR/janitor"
    while slurm_pid_alive "$test_pid"; do read -r -t 0.5 -u 9; done
    local rest _
    for _ in $(seq 20); do
      rest=$(cluster_procs)
      [[ -z $rest ]] && break
      kill -KILL $rest
      sleep 0.1
    done
    rm -rf "$CLUSTER_DIR"
  ) &
  SLURM_JANITOR=$!
  disown $!
}

slurm_down() {
  local -
  set +e
  if [[ -n $SLURM_JANITOR ]]; then
    cluster_end TERM "$SLURM_JANITOR" || cluster_end KILL "$SLURM_JANITOR"
    SLURM_JANITOR=
  fi
  [[ ${#SLURM_DAEMONS[@]} -gt 0 ]] || return 0
  cluster_end TERM "${SLURM_DAEMONS[@]}" || cluster_end KILL "${SLURM_DAEMONS[@]}"
  SLURM_DAEMONS=()
}
