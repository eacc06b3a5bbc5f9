# shellcheck shell=bash
# quickstart_paths.sh — the quickstart's paths and BSP step measured on the
# namespace cluster (tests/lib/cluster.sh, sourced before this), shared by
# netns.cluster.quickstart and tools/bench/multihost.
#
#   qs_paths HN NET_LUA NAME [HOSTS]   # starts the quickstart's network
#       (quickstart_net.lua) on m1, placed over HOSTS when given, and
#       prints "rtt_min_ms rtt_avg_ms goodput_bps" of the path t1 -> cloud1:
#       50 pings, and the best of three 2 s iperf3 runs (a loaded host
#       only ever lowers a run's goodput)
#   qs_hold HN LUA NAME ARGS... / qs_release NAME   # a network held by
#       LUA on m1 while the caller measures it from outside
#   qs_iperf SERVER_PID CLIENT_PID ADDR # one 2 s iperf3, bits/s received
#   qs_run HN NAME [HOSTS] [ARGS]       # scenarios/quickstart.lua (quick,
#       no plots, backend user) on m1, results in $CLUSTER_DIR/q-NAME
#   qs_step DIR                         # "step_s bsp_rounds median_s": the
#       mean BSP round of DIR/bsp_steps.csv (time between the ends of the
#       first and last applied rounds over their count), the number of
#       applied rounds and their median. Only applied rounds (k filled): a
#       round the run's stop cut has its rows dated at the stop. A round
#       ends at its rows' median time, as one straggler's row may carry the
#       stop's time too. The median is what a rare slow round leaves
#       alone: an 8 s run has 9 to 13 rounds, and one round in which every
#       worker's comm_ms grows by 200 to 400 ms at once moves the mean by
#       2 to 4%.
#   qs_rounds DIR                       # "q25_s gaps rtos drops_loss
#       drops_queue cut_drops starved_share": the lower quartile of the BSP
#       rounds from the second round's end on (0 with fewer than two) and
#       their count, the training's RTOs (bsp_summary.json tcp.rtos), the
#       run's drops on the links by cause (links.csv's last sample), those
#       on the links whose ends are on two machines (run.json placement's
#       cut_links, by links.csv's names: "a-b#2" for the second of parallel
#       links; none on one machine), and the share of the run's compute
#       commands other programs starved of CPU (run.json overload). The
#       first gap is unlike the others (29 runs of four rounds or more, at
#       load 27 to 107): 0.44 to 0.53 s in some, shorter than any later
#       round, 1.1 to 2.1 s in others. Why the
#       lower quartile: a round in which one of its twelve 407 KB transfers
#       recovers lost segments, or waits out an RTO, is 100 to 400 ms
#       longer, and such rounds come at random in either placement (the
#       network's own losses: the links' 0.5% loss and their 100-frame
#       queues overflowing in slow start); a spread run that is really
#       slower is slower in every round, so in its lower quartile.

QS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

qs_hn() { cluster_exec 1 env HIERNET_SSH_CONFIG="$CLUSTER_DIR/ssh_config" TMPDIR="$CLUSTER_DIR" "$@"; }

# The node's "PID ADDR" from the lines quickstart_net.lua printed.
qs_node() { awk -v n="$2" '$1 == "node" && $2 == n { print $3, $4 }' "$1"; }

qs_iperf() { # SERVER_PID CLIENT_PID ADDR: bits/s received
  iperf_serve "$1"
  nsenter -t "$2" -n -- iperf3 -c "$3" -p 5201 -t 2 -O 1 -J |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])'
  iperf_serve_end
}

# qs_hold HN LUA NAME ARGS...: runs LUA (quickstart_net.lua or one like it:
# node lines, ready=, done=) on m1 in the background until it is ready;
# QS_HOLD is its pid, its node lines in $CLUSTER_DIR/nout-NAME.
qs_hold() {
  local hn=$1 lua=$2 name=$3 d=$CLUSTER_DIR _
  shift 3
  qs_hn "$hn" run "$lua" --out "$d/n-$name" --quiet --set "ready=$d/ready-$name" \
    --set "done=$d/done-$name" "$@" >"$d/nout-$name" 2>"$d/nerr-$name" &
  QS_HOLD=$!
  for _ in $(seq 1200); do
    [[ -e $d/ready-$name ]] && return 0
    cluster_alive "$QS_HOLD" || break
    sleep 0.05
  done
  return 1
}

# qs_release NAME: ends what qs_hold NAME started (its run stops the network).
qs_release() {
  touch "$CLUSTER_DIR/done-$1"
  wait "$QS_HOLD" || { echo "$1: the network's run failed: $(tail -n 2 "$CLUSTER_DIR/nerr-$1")" >&2; return 1; }
}

qs_paths() {
  local hn=$1 lua=$2 name=$3 hosts=${4:-} t1 cloud rtt g=() _
  qs_hold "$hn" "$lua" "$name" --set "hosts=$hosts"
  t1=$(qs_node "$CLUSTER_DIR/nout-$name" t1)
  cloud=$(qs_node "$CLUSTER_DIR/nout-$name" cloud1)
  if [[ -n $t1 && -n $cloud ]]; then
    rtt=$(nsenter -t "${t1% *}" -n -- ping -n -q -c 50 -i 0.02 "${cloud#* }" |
      sed -n 's|^rtt [^=]*= \([0-9.]*\)/\([0-9.]*\)/.*|\1 \2|p')
    for _ in 1 2 3; do g+=("$(qs_iperf "${cloud% *}" "${t1% *}" "${cloud#* }")"); done
  fi
  qs_release "$name" || return 1
  [[ -n $rtt && ${#g[@]} -eq 3 && -n ${g[0]} && -n ${g[1]} && -n ${g[2]} ]] ||
    { echo "qs_paths $name: no figures (rtt '$rtt', goodput '${g[*]}')" >&2; return 1; }
  echo "$rtt $(printf '%s\n' "${g[@]}" | sort -g | tail -n1)"
}

qs_run() {
  local hn=$1 name=$2 hosts=${3:-} args=()
  shift 3
  [[ -n $hosts ]] && args=(--hosts "$hosts")
  qs_hn "$hn" run "$QS_ROOT/scenarios/quickstart.lua" "${args[@]}" --out "$CLUSTER_DIR/q-$name" --quiet \
    --set quick=true --set plots=false --set backend=user "$@" >"$CLUSTER_DIR/qout-$name" 2>"$CLUSTER_DIR/qerr-$name"
}

qs_step() {
  python3 - "$1/bsp_steps.csv" <<'PY'
import csv, statistics, sys
times = {}
for r in csv.DictReader(open(sys.argv[1])):
    if r["k"] != "":
        times.setdefault(int(r["step"]), []).append(float(r["time"]))
ends = [statistics.median(times[k]) for k in sorted(times)]
gaps = [b - a for a, b in zip(ends, ends[1:])]
print("%.4f %d %.4f" % ((ends[-1] - ends[0]) / len(gaps), len(ends), statistics.median(gaps)))
PY
}

qs_rounds() {
  python3 - "$1" <<'PY'
import csv, json, statistics, sys
d = sys.argv[1]
times = {}
for r in csv.DictReader(open(d + "/bsp_steps.csv")):
    if r["k"] != "":
        times.setdefault(int(r["step"]), []).append(float(r["time"]))
ends = [statistics.median(times[k]) for k in sorted(times)][1:]
gaps = sorted(b - a for a, b in zip(ends, ends[1:]))
q25 = statistics.quantiles(gaps, n=4, method="inclusive")[0] if len(gaps) >= 2 else 0
run = json.load(open(d + "/run.json"))
# links.csv names a link as topo_link_describe does: "a-b", "a-b#2" for
# the second of parallel links between a and b (cut_links' parallel 1).
cut = {c["a"] + "-" + c["b"] + ("#%d" % (c["parallel"] + 1) if c.get("parallel") else "")
       for p in run.get("placement") or [] for c in p.get("cut_links") or []}
last = {}
for r in csv.DictReader(open(d + "/links.csv")):
    last[(r["link"], r["dir"])] = (int(r["drops_loss"]), int(r["drops_queue"]), int(r["drops_down"]))
cut_drops = sum(sum(v) for (link, _), v in last.items() if link in cut)
over = run.get("overload") or {}
rtos = json.load(open(d + "/bsp_summary.json")).get("tcp", {}).get("rtos", -1)
print("%.4f %d %d %d %d %d %.3f" % (q25, len(gaps), rtos, sum(v[0] for v in last.values()),
      sum(v[1] for v in last.values()), cut_drops, over.get("starved_share") or 0))
PY
}
