# shellcheck shell=bash
# lib.sh — shared helpers of the network scenario tests (sourced by bash).
#
# Provides: skip / fail / note, a private scratch directory removed on exit,
# snapshots of the host's global state (network namespaces, host interfaces,
# hiernet cgroups, registry entries) and hn_check_left, which proves that a
# run left nothing behind.
#
# What a run owns is listed in an "owned" file, written by common.lua
# (H.own) from inside the run, one fact per line:
#   proc <pid> <start> <label>   a process (peer, linkd, program) by pid + start time
#   netns <inode> <label>        a network namespace of the run
#   cgroup <path>                a cgroup directory of the run
#   ifname <name>                an interface name used inside the run
#   node <name>                  a node name unique to this test (ps lookup)
# Processes are matched by pid AND start time (field 22 of /proc/<pid>/stat),
# so a recycled pid is never blamed; nothing is matched by name pattern except
# `node` lines, which only tests with unique node names emit.
#
# Checks tolerate unrelated activity on the host (other runs, other tests):
# a new namespace or interface that is not the run's is reported as a note.

HN_REG_ROOT=${HIERNET_RUN_DIR:-/run/hiernet}
HN_FAILED=0

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; HN_FAILED=1; }
note() { echo "note: $*"; }

# hn_require_root HIERNET: exits 77 with a one-line reason when this machine cannot run the test.
hn_require_root() {
  HN_HIERNET=$1
  [[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, links, cgroups)"
  [[ -x $1 ]] || skip "hiernet binary '$1' not found"
  command -v ip >/dev/null || skip "iproute2 (ip) not installed"
  command -v ping >/dev/null || skip "ping not installed"
}

# hn_scratch: a private scratch directory in $HN_TMP, removed with everything in it on exit.
hn_scratch() {
  HN_TMP=$(mktemp -d /tmp/hn-nettest.XXXXXX) || exit 1
  trap 'hn_on_exit' EXIT
}
hn_on_exit() {
  [[ -n ${HN_KEEP:-} ]] && { echo "kept $HN_TMP"; return; }
  rm -rf "$HN_TMP"
}

# ---- global state ----

# Every network namespace inode referenced by a process (its own or a thread's
# namespace, or an open fd) or by a bind mount.
hn_netns_inodes() {
  {
    find /proc/[0-9]*/ns/net /proc/[0-9]*/task/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 \
      -lname 'net:*' -printf '%l\n'
    grep -o 'net:\[[0-9]*\]' /proc/self/mountinfo
  } 2>/dev/null | grep -o '[0-9][0-9]*' | sort -u
}

# Pids (with their command line) of processes holding namespace inode $1.
hn_netns_holders() { hn_netns_holders_of "$1" | cut -d' ' -f2-; }

hn_host_ifnames() { ip -o link show 2>/dev/null | awk -F': ' '{ split($2, a, "@"); print a[1] }' | sort -u; }
hn_cgroup_dirs() { find /sys/fs/cgroup -maxdepth 3 -type d -name 'hiernet-*' 2>/dev/null | sort; }
hn_registry_entries() { ls -A "$HN_REG_ROOT" 2>/dev/null | sort; }

# hn_snapshot PREFIX: records the global state in PREFIX.{netns,ifnames,cgroups,registry}.
hn_snapshot() {
  hn_netns_inodes >"$1.netns"
  hn_host_ifnames >"$1.ifnames"
  hn_cgroup_dirs >"$1.cgroups"
  hn_registry_entries >"$1.registry"
}

# hn_netns_holders_of INODE...: one line "INODE HOLDERS" per inode given,
# HOLDERS as hn_netns_holders prints them, from one walk of /proc: a note
# per unrelated namespace (other programs' runs on a shared host, dozens
# at a time) walked /proc once each, 0.3-0.5 s a walk at load 30.
hn_netns_holders_of() {
  local links
  links=$(find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -lname 'net:*' -printf '%l %h\n' 2>/dev/null |
    sed -n 's|^net:\[\([0-9]*\)\] /proc/\([0-9]*\)/.*|\1 \2|p' | sort -u)
  local ino p line
  for ino in "$@"; do
    line=
    for p in $(awk -v i="$ino" '$1 == i { print $2 }' <<<"$links"); do
      line+="$p:$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | cut -c1-80);"
    done
    echo "$ino $line"
  done
}

# "state start" of a pid, or nothing when it does not exist.
hn_proc_state_start() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $1, $20 }'; }

# Now in clock ticks since boot, the unit of a process's start time.
hn_ticks_now() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", $1 * hz }' /proc/uptime; }

# hn_netns_is_runs INODE ENDFILE: true unless every process holding the
# namespace started after the run ended (ENDFILE: its end in ticks, written
# by hn_run). The kernel recycles namespace inodes: once the run's namespace
# is gone, another run's new one may carry its number, and that one is not
# the run's to report or to end. A namespace held only by a mount, or a run
# without an end file, counts as the run's.
hn_netns_is_runs() {
  local end p st holders=0
  end=$(cat "$2" 2>/dev/null) || return 0
  for p in $(find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -lname "net:\[$1\]" \
    -printf '%h\n' 2>/dev/null | cut -d/ -f3 | sort -un); do
    st=$(hn_proc_state_start "$p")
    [[ -z $st ]] && continue
    holders=1
    ((${st#* } <= end)) && return 0
  done
  ((holders == 0))
}

# hn_problems OWNED RUN_ID BEFORE: prints one line per thing the run left behind.
hn_problems() {
  local owned=$1 run_id=$2 before=$3 kind a b c st now_ns now_if
  now_ns=$(hn_netns_inodes)
  now_if=$(hn_host_ifnames)
  while read -r kind a b c; do
    case $kind in
      proc)
        st=$(hn_proc_state_start "$a")
        if [[ -n $st && ${st#* } == "$b" && ${st%% *} != Z ]]; then
          echo "process $c (pid $a) still runs: $({ tr '\0' ' ' <"/proc/$a/cmdline"; } 2>/dev/null)"
        fi
        ;;
      netns)
        if grep -qx "$a" <<<"$now_ns" && hn_netns_is_runs "$a" "${owned%.owned}.end"; then
          echo "network namespace net:[$a] ($b) still exists, held by: $(hn_netns_holders "$a")"
        fi
        ;;
      cgroup)
        [[ -d $a ]] && echo "cgroup $a still exists"
        ;;
      ifname)
        if grep -qxF "$a" <<<"$now_if" && ! grep -qxF "$a" "$before.ifnames"; then
          echo "interface $a appeared in the host namespace"
        fi
        ;;
      node)
        if pgrep -f -- "hiernet-peer .*--node $a( |\$)" >/dev/null; then
          echo "a peer of node $a still runs"
        fi
        ;;
    esac
  done < <(sort -u "$owned" 2>/dev/null)
  find /sys/fs/cgroup -maxdepth 3 -type d -name "hiernet-$run_id*" 2>/dev/null |
    sed 's/^/cgroup of the run still exists: /'
  ls -Ad "$HN_REG_ROOT/$run_id" "$HN_REG_ROOT"/.*-"$run_id" 2>/dev/null | sed 's/^/registry entry still exists: /'
}

# hn_check_left OWNED RUN_ID BEFORE: fails the test for anything the run left
# (giving exiting processes up to 3 s), notes unrelated changes. Returns 1 on failure.
hn_check_left() {
  local owned=$1 run_id=$2 before=$3 problems i
  for ((i = 0; i < 30; i++)); do
    problems=$(hn_problems "$owned" "$run_id" "$before")
    [[ -z $problems ]] && break
    sleep 0.1
  done
  if [[ ! -s $owned ]]; then
    note "run $run_id listed nothing it owned (did it start?)"
  fi
  local new_ns new_if
  new_ns=$(comm -13 "$before.netns" <(hn_netns_inodes) |
    grep -vxF -f <(awk '$1 == "netns" { print $2 }' "$owned" 2>/dev/null))
  # shellcheck disable=SC2086 # one inode a word
  [[ -n $new_ns ]] && while read -r i holders; do
    note "unrelated new network namespace net:[$i] held by $holders"
  done < <(hn_netns_holders_of $new_ns)
  new_if=$(comm -13 "$before.ifnames" <(hn_host_ifnames))
  for i in $new_if; do
    grep -qx "ifname $i" "$owned" 2>/dev/null || note "unrelated new host interface $i"
  done
  if [[ -n $problems ]]; then
    while read -r i; do fail "$run_id left: $i"; done <<<"$problems"
    hn_remove_leftovers "$owned" "$before"
    return 1
  fi
  echo "ok: $run_id left nothing behind ($(wc -l <"$owned" 2>/dev/null || echo 0) owned items checked)"
  return 0
}

# hn_remove_leftovers OWNED BEFORE: after a failure, ends what the run left:
# its processes that still run (pid + start time checked) and every process
# living in one of its namespaces (the run's programs and their children);
# a namespace that existed before the run, or the host's, is never touched.
# Then `hiernet clean` sweeps the dead run's cgroups and registry entry.
hn_remove_leftovers() {
  local owned=$1 before=$2 kind a b st p host
  host=$(readlink /proc/self/ns/net | grep -o '[0-9][0-9]*')
  while read -r kind a b _; do
    [[ $kind == netns && ( $a == "$host" ) ]] && continue
    [[ $kind == netns ]] && grep -qx "$a" "$before.netns" && continue
    [[ $kind == netns ]] && ! hn_netns_is_runs "$a" "${owned%.owned}.end" && continue
    if [[ $kind == proc ]]; then
      st=$(hn_proc_state_start "$a")
      [[ -n $st && ${st#* } == "$b" ]] && kill -9 "$a" 2>/dev/null && echo "  removed: process $a"
    elif [[ $kind == netns ]]; then
      for p in $(find /proc/[0-9]*/ns/net -lname "net:\[$a\]" -printf '%h\n' 2>/dev/null | cut -d/ -f3); do
        kill -9 "$p" 2>/dev/null && echo "  removed: process $p in namespace net:[$a]"
      done
    fi
  done < <(sort -u "$owned" 2>/dev/null)
  sleep 0.5
  [[ -n ${HN_HIERNET:-} ]] && "$HN_HIERNET" clean 2>&1 | sed 's/^/  clean: /'
}

# hn_run NAME HIERNET SCENARIO ARGS...: runs a scenario with results in
# $HN_TMP/NAME (run id NAME), the owned list in $HN_TMP/NAME.owned and the
# scenario's args owned=, regdir= and tmp= prepended. Sets HN_RC, prints the
# scenario's output (stdout and stderr, indented) and its wall time. A run
# that outlives $HN_RUN_TIMEOUT seconds (default 150) gets SIGTERM, then SIGKILL.
hn_run() {
  local name=$1 hiernet=$2 scenario=$3 t0 t1
  shift 3
  : >"$HN_TMP/$name.owned"
  t0=$(date +%s.%N)
  timeout --kill-after=5 "${HN_RUN_TIMEOUT:-150}" "$hiernet" run "$scenario" --out "$HN_TMP/$name" --quiet \
    "owned=$HN_TMP/$name.owned" "regdir=$HN_REG_ROOT/$name" "tmp=$HN_TMP" "$@" \
    >"$HN_TMP/$name.stdout" 2>"$HN_TMP/$name.stderr"
  HN_RC=$?
  t1=$(date +%s.%N)
  hn_ticks_now >"$HN_TMP/$name.end"
  sed 's/^/  | /' "$HN_TMP/$name.stdout" "$HN_TMP/$name.stderr"
  awk -v a="$t0" -v b="$t1" -v t="${HN_RUN_TIMEOUT:-150}" 'BEGIN { exit !(b - a >= t) }' &&
    echo "$name: timed out after ${HN_RUN_TIMEOUT:-150} s"
  printf '%s: exit %d in %.1f s\n' "$name" "$HN_RC" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}

hn_finish() {
  if [[ $HN_FAILED -eq 0 ]]; then echo "PASS"; exit 0; fi
  echo "FAILED"
  exit 1
}
