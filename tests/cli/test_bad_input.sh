#!/usr/bin/env bash
# Bad input, table-driven: malformed scenarios and parameters, each of which
# must end the run with exit 1 (scenario error) or 2 (bad input), one
# stderr line (the traceback goes to log.txt) that names the file and line where there is one and the value
# at fault, run.json "failed" with that line as its error (exit 1, and
# exit 2 for bad input found once the run is under way: EXIT "2r") or no
# results directory at all (exit 2), and nothing left behind: every case
# runs under bench_leftovers (no process, namespace, cgroup or registry
# entry may survive it) with a registry of its own that must end empty.
#
# A case: bad_case NAME EXIT 'text of the first stderr line' 'scenario' [ARGS].
# The scenario of a case named net_* follows three lines that make network
# "bad" (backend none) with nodes a and b; peer_* adds net:start() (four
# lines); raw_* is the whole file. File names are c_NAME.lua.
# Usage: test_bad_input.sh HIERNET_BINARY
set -u
HN=$(readlink -f "$1")
LEFTOVERS=$(dirname "$HN")/bench_leftovers
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
in_scratch_dir registry
[[ -x $LEFTOVERS ]] || { echo "SKIP: $LEFTOVERS not built"; exit 77; }
cases=0 ran_cases=0

prelude() {
  case $1 in
    net_* | peer_*)
      printf 'local hn = require("hiernet")\n'
      printf 'local net = hn.network{ name = "bad", backend = "none" }\n'
      printf 'local a, b = net:node("a"), net:node("b")\n'
      ;;&
    peer_*) printf 'net:start()\n' ;;
  esac
}

bad_case() {
  local name=$1 want=$2 text=$3 body=$4 ran=0
  shift 4
  [[ $want == 1 || $want == *r ]] && ran=1
  want=${want%r}
  cases=$((cases + 1))
  { prelude "$name"; printf '%s\n' "$body"; } >"c_$name.lua"
  "$LEFTOVERS" --grace 2 --report "$name.left" -- "$HN" run "c_$name.lua" --out "r-$name" --quiet "$@" \
    >"$name.out" 2>"$name.err"
  local got=$? first
  first=$(grep -v '^bench_leftovers:' "$name.err" | head -n1)
  [[ $got -eq $want ]] && ok || bad "$name: exit $got, want $want; stderr: $first"
  [[ $(grep -vc '^bench_leftovers:' "$name.err") -eq 1 ]] && ok ||
    bad "$name: the error is not one line: $(grep -v '^bench_leftovers:' "$name.err" | sed -n 2p)"
  [[ $first == *"$text"* ]] && ok || bad "$name: first stderr line lacks '$text': '$first'"
  if [[ $ran -eq 1 ]]; then
    printf '%s\0%s\0' "$name" "$first" >>run_json.expected
    ran_cases=$((ran_cases + 1))
  else
    [[ ! -e r-$name ]] && ok || bad "$name: bad input left a results directory"
  fi
  grep -q '"processes":0,"namespaces":0,"interfaces":0,"cgroups":0,"registry":0' "$name.left" &&
    ok || bad "$name: left something behind: $(cat "$name.left"; grep '^bench_leftovers: left' "$name.err")"
  [[ -z $(ls -A "$HIERNET_RUN_DIR") ]] && ok || bad "$name: registry entries remain: $(ls -A "$HIERNET_RUN_DIR")"
}

# ---- syntax and files (exit 2, before anything is created) ----
bad_case raw_syntax_eq 2 'c_raw_syntax_eq.lua:1: unexpected symbol near' 'local x = = 1'
bad_case raw_syntax_string 2 'c_raw_syntax_string.lua:2: unfinished string' $'local hn = require("hiernet")\nprint("abc'
bad_case raw_syntax_end 2 "c_raw_syntax_end.lua:3: 'end' expected (to close 'if' at line 1) near <eof>" \
  $'if true then\n  print(1)'
bad_case raw_syntax_goto 2 "c_raw_syntax_goto.lua:2: no visible label 'nowhere' for <goto> at line 1" 'goto nowhere'
printf '\033Lua\x54\x00' >c_raw_binary.lua
cases=$((cases + 1))
expect_exit 2 "binary chunk" -- "$HN" run c_raw_binary.lua --quiet
expect_err "attempt to load a binary chunk" "a precompiled chunk is refused"
cases=$((cases + 1))
expect_exit 2 "missing scenario" -- "$HN" run no/such/file.lua --quiet
expect_err "cannot open no/such/file.lua" "a missing scenario is named"
mkdir adir.lua
cases=$((cases + 1))
expect_exit 2 "directory as scenario" -- "$HN" run adir.lua --quiet
expect_err "adir.lua" "a directory given as scenario is named"
[[ ! -e results ]] && ok || bad "bad scenario files created a results directory"

# ---- command line (exit 2) ----
bad_case raw_set_no_value 2 "--set 'novalue': expected name=value" 'return 1' --set novalue
bad_case raw_set_no_name 2 "--set '=5': expected name=value" 'return 1' --set =5
bad_case raw_set_long_name 2 ': name too long' 'return 1' --set "$(printf 'n%.0s' {1..200})=1"
bad_case raw_backend_warp 2 "--backend: unknown backend 'warp'" 'return 1' --backend warp
cases=$((cases + 1)) # options go before the scenario; after it, words are the scenario's
expect_exit 2 "unknown option" -- "$HN" run --frob c_raw_syntax_eq.lua
expect_err "hiernet run: unknown option '--frob' (see hiernet run --help)" "an unknown option is named"
mkdir -p r-raw_reuse && echo '{}' >r-raw_reuse/run.json
cases=$((cases + 1))
printf 'return 1\n' >ok.lua
expect_exit 2 "--out onto a finished run" -- "$HN" run ok.lua --out r-raw_reuse --quiet
expect_err "results directory 'r-raw_reuse' already holds a run" "a reused --out is named"

# ---- parameters (exit 2 once the run is under way, the line of hn.param) ----
bad_case raw_param_number 2r "c_raw_param_number.lua:2: --set n=abc: 'n' takes a number (its default is 5)" \
  $'local hn = require("hiernet")\nlocal n = hn.param("n", 5)' --set n=abc
bad_case raw_param_seconds 2r "c_raw_param_seconds.lua:2: --set seconds=ten: 'seconds' takes a number (its default is 10.0)" \
  $'local hn = require("hiernet")\nlocal s = hn.param("seconds", 10.0)' --set seconds=ten
bad_case raw_param_bool 2r "c_raw_param_bool.lua:2: --set flag=maybe: 'flag' takes true or false (its default is false)" \
  $'local hn = require("hiernet")\nlocal f = hn.param("flag", false)' --set flag=maybe
bad_case raw_param_inf 2r "c_raw_param_inf.lua:2: --set lr=1e400: 'lr' takes a finite number" \
  $'local hn = require("hiernet")\nlocal lr = hn.param("lr", 0.1)' --set lr=1e400
bad_case raw_param_nan 2r "c_raw_param_nan.lua:2: --set lr=nan: 'lr' takes a number" \
  $'local hn = require("hiernet")\nlocal lr = hn.param("lr", 0.1)' --set lr=nan
# A --set name the scenario never reads is a typo: the run ends with exit 2
# naming it and what the scenario did read (a read at any point counts: in a
# task, late, or with a nil default).
bad_case raw_set_unread 2r "hiernet: --set stpes=100: the scenario never read 'stpes' (it read: seconds, path, steps)" \
  $'local hn = require("hiernet")\nlocal s = hn.param("steps", 10)\nhn.spawn(function() hn.sleep(0.01); hn.param("seconds", 1.5) end)\nhn.param("path")\nhn.sleep(0.02)' \
  --set stpes=100 --set seconds=2 --set path=x
bad_case raw_set_unread_two 2r "hiernet: --set a=1, b=x: the scenario never read 'a', 'b' (it reads no parameter through hn.param)" \
  'return 1' --set a=1 --set b=x
# A shipped scenario's own parameter checks (scenarios/speedup_model.lua:
# the N of its second part, run one per run at the paper's size).
speedup_model=$(readlink -f "$here/../../scenarios/speedup_model.lua")
bad_case raw_speedup_ns 1 "--set ns: '1' is not a whole N >= 2" "dofile('$speedup_model')" \
  --backend none --set first=false --set profiled=true --set ns=1
bad_case raw_speedup_probes 1 "--set probes: '0' is not a whole number >= 1" "dofile('$speedup_model')" \
  --backend none --set first=false --set profiled=true --set probes=0
bad_case raw_speedup_ns_unused 1 "--set ns=16: the N of the second part, which runs only with profiled=true" \
  "dofile('$speedup_model')" --backend none --set ns=16

# ---- networks (exit 1) ----
bad_case raw_net_option 1 "c_raw_net_option.lua:2: hn.network: unknown option 'nme'" \
  $'local hn = require("hiernet")\nhn.network{ nme = "x" }'
bad_case raw_net_backend_type 1 "c_raw_net_backend_type.lua:2: " \
  $'local hn = require("hiernet")\nhn.network{ name = "x", backend = 5 }'
bad_case raw_net_name_slash 1 "c_raw_net_name_slash.lua:2: network name 'a/b' is invalid" \
  $'local hn = require("hiernet")\nhn.network{ name = "a/b" }'
bad_case raw_net_name_shell 1 "c_raw_net_name_shell.lua:2: network name '\$(id)' is invalid" \
  $'local hn = require("hiernet")\nhn.network{ name = "$(id)" }'
bad_case raw_net_seed 1 "c_raw_net_seed.lua:2: network 'x': seed must be a non-negative integer" \
  $'local hn = require("hiernet")\nhn.network{ name = "x", seed = 2^70 }'
bad_case raw_net_addr_base 1 "c_raw_net_addr_base.lua:2: network 'x': addr_base '300.0.0.0/8' is not an IPv4 prefix" \
  $'local hn = require("hiernet")\nhn.network{ name = "x", addr_base = "300.0.0.0/8" }'
bad_case raw_net_addr_small 1 "addr_base '10.0.0.0/31' is not an IPv4 prefix like 10.0.0.0/8 (/1 to /24)" \
  $'local hn = require("hiernet")\nhn.network{ name = "x", addr_base = "10.0.0.0/31" }'

# ---- nodes (exit 1, the line of net:node) ----
bad_case net_node_dotdot 1 "c_net_node_dotdot.lua:4: node name '../etc' is invalid" 'net:node("../etc")'
bad_case net_node_slash 1 "c_net_node_slash.lua:4: node name 'a/b' is invalid" 'net:node("a/b")'
bad_case net_node_semicolon 1 "c_net_node_semicolon.lua:4: node name 'x;rm -rf /' is invalid" 'net:node("x;rm -rf /")'
bad_case net_node_dollar 1 "c_net_node_dollar.lua:4: node name '\$(reboot)' is invalid" 'net:node("$(reboot)")'
bad_case net_node_backtick 1 "c_net_node_backtick.lua:4: node name '\`id\`' is invalid" 'net:node("`id`")'
bad_case net_node_space 1 "c_net_node_space.lua:4: node name 'a b' is invalid" 'net:node("a b")'
bad_case net_node_empty 1 "c_net_node_empty.lua:4: node name '' is invalid" 'net:node("")'
bad_case net_node_long 1 "c_net_node_long.lua:4: node name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn' is invalid" \
  'net:node(string.rep("n", 40))'
bad_case net_node_dash 1 "c_net_node_dash.lua:4: node name '-x' is invalid" 'net:node("-x")'
bad_case net_node_newline 1 "c_net_node_newline.lua:4: node name " 'net:node("a\nb")'
bad_case net_node_type 1 "c_net_node_type.lua:4: bad argument #1 to 'node' (string expected, got table)" 'net:node({})'
bad_case net_node_option 1 "c_net_node_option.lua:4: node 'c': unknown option 'cpus'" 'net:node("c", { cpus = 2 })'
bad_case net_node_cpu_neg 1 "c_net_node_cpu_neg.lua:4: node 'c': cpu must be > 0 (a share of one core) and at most 4096, got -1" \
  'net:node("c", { cpu = -1 })'
bad_case net_node_cpu_huge 1 "c_net_node_cpu_huge.lua:4: node 'c': cpu must be > 0 (a share of one core) and at most 4096, got 1000000000.0" \
  'net:node("c", { cpu = 1e9 })'
bad_case net_node_speed 1 "c_net_node_speed.lua:4: node 'c': speed must be > 0, got 0" 'net:node("c", { speed = 0 })'
bad_case net_node_speed_type 1 "c_net_node_speed_type.lua:4: node 'c': " 'net:node("c", { speed = "fast" })'
bad_case net_node_threads 1 "c_net_node_threads.lua:4: node 'c': threads must be an integer from 1 to 256, got 100000" \
  'net:node("c", { threads = 100000 })'
bad_case net_node_threads0 1 "c_net_node_threads0.lua:4: node 'c': threads must be an integer from 1 to 256, got 0" \
  'net:node("c", { threads = 0 })'
bad_case net_node_device 1 "c_net_node_device.lua:4: node 'c': device must be 'cpu' or 'cuda', got 'tpu'" \
  'net:node("c", { device = "tpu" })'
bad_case net_node_tier_type 1 "c_net_node_tier_type.lua:4: node 'c': " 'net:node("c", { tier = {} })'
bad_case net_node_duplicate 1 "c_net_node_duplicate.lua:4: network 'bad': duplicate node 'a'" 'net:node("a")'

# ---- links and impossible topologies (exit 1) ----
bad_case net_link_self 1 "c_net_link_self.lua:4: " 'net:link(a, a)'
bad_case net_link_twice 1 "c_net_link_twice.lua:5: " $'net:link(a, b)\nnet:link(b, a)'
bad_case net_link_unknown 1 "c_net_link_unknown.lua:4: " 'net:link(a, "zz")'
bad_case net_link_other_net 1 "c_net_link_other_net.lua:5: " $'local c = hn.network{ name = "o", backend = "none" }:node("c")\nnet:link(a, c)'
bad_case net_link_bw_neg 1 'c_net_link_bw_neg.lua:4: link a-b: bw: bad rate "-1Mbit"' 'net:link(a, b, { bw = "-1Mbit" })'
bad_case net_link_ecn_bdp 1 'c_net_link_ecn_bdp.lua:4: link a-b: ecn_threshold: bad ecn_threshold "bdp"' 'net:link(a, b, { ecn_threshold = "bdp" })'
bad_case net_link_bw_huge 1 'c_net_link_bw_huge.lua:4: link a-b: bw: bad rate "1e30bit": above the maximum of 10Tbit' \
  'net:link(a, b, { bw = "1e30bit" })'
bad_case net_link_bw_word 1 'c_net_link_bw_word.lua:4: link a-b: bw: bad rate "fast"' 'net:link(a, b, { bw = "fast" })'
bad_case net_link_delay_neg 1 'c_net_link_delay_neg.lua:4: link a-b: delay: bad time "-5ms"' 'net:link(a, b, { delay = "-5ms" })'
bad_case net_link_delay_huge 1 'c_net_link_delay_huge.lua:4: link a-b: delay: bad time "1e12s": above the maximum of 3600s' \
  'net:link(a, b, { delay = "1e12s" })'
bad_case net_link_jitter 1 'c_net_link_jitter.lua:4: link a-b: jitter: bad time "abc"' 'net:link(a, b, { jitter = "abc" })'
bad_case net_link_loss 1 'c_net_link_loss.lua:4: link a-b: loss: bad loss "150%"' 'net:link(a, b, { loss = "150%" })'
bad_case net_link_loss_neg 1 'c_net_link_loss_neg.lua:4: link a-b: loss: bad loss "-0.1"' 'net:link(a, b, { loss = -0.1 })'
bad_case net_link_queue0 1 'c_net_link_queue0.lua:4: link a-b: queue: bad queue "0": must be positive' 'net:link(a, b, { queue = 0 })'
bad_case net_link_queue_unit 1 'c_net_link_queue_unit.lua:4: link a-b: queue: bad queue "64XB"' 'net:link(a, b, { queue = "64XB" })'
bad_case net_link_option 1 "c_net_link_option.lua:4: link a-b: unknown option 'bandwidth'" 'net:link(a, b, { bandwidth = "1Gbit" })'
bad_case net_link_gilbert 1 'c_net_link_gilbert.lua:4: link a-b: gilbert' 'net:link(a, b, { gilbert = { p = 2 } })'
bad_case net_link_reorder 1 'c_net_link_reorder.lua:4: link a-b: ' 'net:link(a, b, { reorder = "yes" })'
bad_case net_route_none 1 "c_net_route_none.lua:4: network 'bad': no path from 'a' to 'b'" 'net:route(a, b)'
bad_case raw_start_empty 1 "c_raw_start_empty.lua:2: network 'e': start: the network has no nodes" \
  $'local hn = require("hiernet")\nhn.network{ name = "e", backend = "none" }:start()'
bad_case peer_start_twice 1 "c_peer_start_twice.lua:5: network 'bad': start: network is started" 'net:start()'
bad_case peer_node_late 1 "c_peer_node_late.lua:5: network 'bad': cannot add node 'late': network is started" 'net:node("late")'

# ---- peer commands (exit 1, the line of the command) ----
bad_case peer_tensor_2p31 1 "c_peer_tensor_2p31.lua:5: node 'a': tensor: param 'size': 2147483648 is not between 0 and 2147483647" \
  'a:tensor{ name = "t", size = 2^31 }'
bad_case peer_tensor_huge 1 "c_peer_tensor_huge.lua:5: node 'a': tensor: param 'size': 1000000000000 is not between 0 and 2147483647" \
  'a:tensor{ name = "t", size = 1e12 }'
bad_case peer_tensor_neg 1 "c_peer_tensor_neg.lua:5: node 'a': tensor: param 'size': -1 is not between" 'a:tensor{ name = "t", size = -1 }'
bad_case peer_tensor_frac 1 "c_peer_tensor_frac.lua:5: node 'a': tensor: param 'size': expected integer, got number" \
  'a:tensor{ name = "t", size = 1.5 }'
bad_case peer_tensor_name 1 "c_peer_tensor_name.lua:5: node 'a': tensor: param 'name': string too long" \
  'a:tensor{ name = string.rep("x", 300), size = 4 }'
bad_case peer_param_typo 1 "c_peer_param_typo.lua:5: node 'a': axpy: unknown param 'alpah'" 'a:axpy{ y = "t", x = "t", alpah = 1 }'
bad_case peer_read_range 1 "c_peer_read_range.lua:6: node 'a': read: param 'range': 1099511627776 values, more than" \
  $'a:tensor{ name = "t", size = 4 }\na:read{ tensor = "t", range = { 0, 2^40 } }'
bad_case peer_read_missing 1 "c_peer_read_missing.lua:5: node 'a': read: tensor 'nope' not found" 'a:read{ tensor = "nope" }'

# ---- churn (exit 2: bad input found once the run is under way) ----
# The file's cases name file, line, node and value; the options' the line.
printf 'node,t_down,t_up\na,1,2\na,1.5,3\n' >avail_back.csv
printf 'a,1,2\nzed,3,4\n' >avail_node.csv
printf '# a comment\nb,-1,2\n' >avail_neg.csv
printf 'b,3,2\n' >avail_order.csv
printf 'a;1;2\n' >avail_sep.csv
bad_case peer_churn_back 2r "avail_back.csv:3: node 'a': t_down 1.5 is before its previous t_up 2" \
  'net:churn{ nodes = { a }, file = "avail_back.csv" }'
bad_case peer_churn_node 2r "avail_node.csv:2: node 'zed' is not among the churn's nodes" \
  'net:churn{ nodes = { a, b }, file = "avail_node.csv" }'
bad_case peer_churn_neg 2r "avail_neg.csv:2: t_down '-1' is not a time in seconds (0 or more)" \
  'net:churn{ nodes = { "b" }, file = "avail_neg.csv" }'
bad_case peer_churn_order 2r "avail_order.csv:1: node 'b': t_up 2 is not after t_down 3" \
  'net:churn{ nodes = { b }, file = "avail_order.csv" }'
bad_case peer_churn_sep 2r "avail_sep.csv:1: expected node,t_down,t_up, got 'a;1;2'" \
  'net:churn{ nodes = { a }, file = "avail_sep.csv" }'
bad_case peer_churn_nofile 2r "c_peer_churn_nofile.lua:5: net:churn: cannot read file nothere.csv" \
  'net:churn{ nodes = { a }, file = "nothere.csv" }'
bad_case peer_churn_notnode 2r "c_peer_churn_notnode.lua:5: net:churn: nodes[2] (nobody) is not a host of network 'bad'" \
  'net:churn{ nodes = { a, "nobody" }, model = { up_mean_s = 1, down_mean_s = 1 } }'
bad_case peer_churn_mean 2r "c_peer_churn_mean.lua:5: net:churn: model.down_mean_s must be a number of seconds above 0, got -2" \
  'net:churn{ nodes = { a }, model = { up_mean_s = 1, down_mean_s = -2 } }'
bad_case peer_churn_how 2r "c_peer_churn_how.lua:5: net:churn: how must be \"kill\" or \"partition\", got 'crash'" \
  'net:churn{ nodes = { a }, model = { up_mean_s = 1, down_mean_s = 1 }, how = "crash" }'
bad_case peer_churn_both 2r "c_peer_churn_both.lua:5: net:churn: give a file or a model (one of them)" \
  'net:churn{ nodes = { a } }'
bad_case peer_churn_option 2r "c_peer_churn_option.lua:5: net:churn: model: unknown option 'up_mean'" \
  'net:churn{ nodes = { a }, model = { up_mean = 1, down_mean_s = 1 } }'
bad_case peer_churn_none 2r "c_peer_churn_none.lua:5: net:churn: how = \"partition\" needs an emulated backend" \
  'net:churn{ nodes = { a }, model = { up_mean_s = 1, down_mean_s = 1 }, how = "partition" }'

# ---- moves and mobility (exit 2; the topology's checks need no emulation) ----
# raw: network "mv" on backend none, cloud c, edges e1 e2, terminal t on e1,
# switch sw with u behind it; then the case's line (line 6).
mv_net='local hn = require("hiernet")
local net = hn.network{ name = "mv", backend = "none" }
local c, e1, e2, t, sw, u = net:node("c"), net:node("e1"), net:node("e2"), net:node("t"), net:switch("sw"), net:node("u")
net:link(c, e1); net:link(c, e2); net:link(e1, t); net:link(c, sw); net:link(sw, u)
net:start()'
printf 't,node,edge\n0.5,t,e2\n0.2,t,e1\n' >moves_back.csv
printf '0.5,t,c9\n' >moves_edge.csv
bad_case raw_move_to_self 2r "c_raw_move_to_self.lua:6: node 't': move: to 't' is not an edge host it could attach to" \
  "$mv_net"$'\nt:move{ to = t }'
bad_case raw_move_to_switch 2r "c_raw_move_to_switch.lua:6: node 't': move: to 'sw' is not an edge host it could attach to" \
  "$mv_net"$'\nt:move{ to = sw }'
bad_case raw_move_to_unknown 2r "c_raw_move_to_unknown.lua:6: node 't': move: to nowhere is not a node of this network" \
  "$mv_net"$'\nt:move{ to = "nowhere" }'
bad_case raw_move_same_edge 2r "c_raw_move_same_edge.lua:6: node 't': move: to 'e1' is its edge already" \
  "$mv_net"$'\nt:move{ to = e1 }'
bad_case raw_move_not_terminal 2r "c_raw_move_not_terminal.lua:6: node 'e1': move: it has several links" \
  "$mv_net"$'\ne1:move{ to = e2 }'
bad_case raw_move_behind_switch 2r "c_raw_move_behind_switch.lua:6: node 'u': move: its link goes to switch 'sw'" \
  "$mv_net"$'\nu:move{ to = e2 }'
bad_case raw_move_gap 2r "c_raw_move_gap.lua:6: node 't': move: gap: '5 parsecs' is not a duration" \
  "$mv_net"$'\nt:move{ to = e2, gap = "5 parsecs" }'
bad_case raw_move_option 2r "c_raw_move_option.lua:6: node 't': move: unknown option 'edge'" \
  "$mv_net"$'\nt:move{ edge = e2 }'
bad_case raw_mobility_back 2r "moves_back.csv:3: node 't': t 0.2 is before its previous move at 0.5" \
  "$mv_net"$'\nnet:mobility{ nodes = { t }, edges = { e1, e2 }, file = "moves_back.csv" }'
bad_case raw_mobility_edge 2r "moves_edge.csv:1: node 't': edge 'c9' is not among the mobility's edges" \
  "$mv_net"$'\nnet:mobility{ nodes = { t }, edges = { e1, e2 }, file = "moves_edge.csv" }'
bad_case raw_mobility_attached 2r "c_raw_mobility_attached.lua:6: net:mobility: node 't' is attached to 'e1', which is not among the edges" \
  "$mv_net"$'\nnet:mobility{ nodes = { t }, edges = { c, e2 }, model = "random-waypoint" }'
bad_case raw_mobility_model 2r "c_raw_mobility_model.lua:6: net:mobility: model must be \"random-waypoint\", got 'brownian'" \
  "$mv_net"$'\nnet:mobility{ nodes = { t }, edges = { e1, e2 }, model = "brownian" }'
bad_case raw_mobility_edges 2r "c_raw_mobility_edges.lua:6: net:mobility: edges[2] (node 'sw') is not a host of network 'mv'" \
  "$mv_net"$'\nnet:mobility{ nodes = { t }, edges = { e1, sw }, model = "random-waypoint" }'
bad_case peer_dataset_missing 1 "c_peer_dataset_missing.lua:5: node 'a': dataset: dataset \"/no/such/train\" is unknown" \
  'a:dataset{ name = "/no/such/train" }'
bad_case peer_dataset_dir 1 "c_peer_dataset_dir.lua:5: node 'a': dataset: dataset file /etc/train-images-idx3-ubyte.gz: No such file or directory" \
  'a:dataset{ name = "/etc" }'
bad_case peer_dataset_passwd 1 "c_peer_dataset_passwd.lua:5: node 'a': dataset: dataset file /etc/passwd: cannot derive its labels file" \
  'a:dataset{ name = "/etc/passwd" }'
bad_case peer_dataset_huge 1 "c_peer_dataset_huge.lua:5: node 'a': dataset: param 'n': 1000000000000 is not between" \
  'a:dataset{ name = "synthetic", n = 1e12, dim = 16 }'
bad_case peer_model_arch 1 "c_peer_model_arch.lua:5: node 'a': model: model spec \"resnet5\": unknown architecture" \
  'a:model{ name = "m", arch = "resnet5" }'
bad_case peer_model_zoo 1 "c_peer_model_zoo.lua:5: node 'a': model: model 'resnet50' has no kernels: it computes by profile only" \
  'a:model{ name = "m", arch = "resnet50" }'
bad_case peer_model_huge 1 'c_peer_model_huge.lua:5: node '"'"'a'"'"': model: model spec "mlp:100000000-10": the first layer size '"'"'100000000'"'"' is not a whole number from 1 to' \
  'a:model{ name = "m", arch = "mlp:100000000-10" }'
bad_case peer_grad_nomodel 1 "c_peer_grad_nomodel.lua:5: node 'a': grad: model 'm' not found" 'a:grad{ model = "m" }'
bad_case peer_optim_method 1 "c_peer_optim_method.lua:6: node 'a': optim: " \
  $'a:model{ name = "m", arch = "logreg:4-2" }\na:optim{ model = "m", method = "sgdd" }'
bad_case peer_compress_ratio 1 "c_peer_compress_ratio.lua:6: node 'a': compress: ratio 2 is not in (0, 1]" \
  $'a:tensor{ name = "t", size = 4 }\na:compress{ tensor = "t", method = "topk", ratio = 2, out = "c" }'
bad_case peer_send_unknown 1 "c_peer_send_unknown.lua:6: node 'a': send: param 'to': 'nobody' is not a node of network 'bad' (its hosts: a, b)" \
  $'a:tensor{ name = "t", size = 4 }\na:send{ tensor = "t", to = "nobody" }'
bad_case peer_send_other_net 1 "c_peer_send_other_net.lua:8: node 'a': send: param 'to': node 'c' belongs to network 'o', not 'bad'" \
  $'local o = hn.network{ name = "o", backend = "none" }\nlocal c = o:node("c")\no:start()\na:send{ tensor = "t", to = c }'
bad_case peer_send_missing 1 "c_peer_send_missing.lua:5: node 'a': send: " 'a:send{ tensor = "nope", to = b }'
bad_case peer_switch_command 1 "c_peer_switch_command.lua:5: " 'net:find("a"):nosuch()'

# ---- the library: topo builders and trainings name the scenario's line ----
bad_case raw_topo_rate 1 'c_raw_topo_rate.lua:3: link center-h1: bw: bad rate "1e30bit"' \
  $'local hn = require("hiernet")\nlocal net = hn.network{ name = "t", backend = "none" }\nrequire("hiernet.topo").star(net, { n = 2, link = { bw = "1e30bit" } })'
bad_case raw_topo_node 1 "c_raw_topo_node.lua:3: node 'h1': cpu must be > 0" \
  $'local hn = require("hiernet")\nlocal net = hn.network{ name = "t", backend = "none" }\nrequire("hiernet.topo").ring(net, { n = 3, node = { cpu = -1 } })'
bad_case raw_topo_ring 1 "c_raw_topo_ring.lua:3: topo.ring: n must be an integer >= 3, got 2" \
  $'local hn = require("hiernet")\nlocal net = hn.network{ name = "t", backend = "none" }\nrequire("hiernet.topo").ring(net, { n = 2 })'
# A bad model is refused when train's options are checked: the network is
# not even started (a peer would have refused it only after set-up began).
bad_case net_train_model 1 "c_net_train_model.lua:4: allreduce.train: option 'model': model spec \"mlp:784-x-10\": the second layer size 'x' is not a whole number" \
  'require("hiernet.algo.allreduce").train{ workers = { a, b }, model = "mlp:784-x-10", steps = 1 }'
bad_case net_train_resnet 1 "c_net_train_resnet.lua:4: ps.train: option 'model': model spec \"resnet99\": unknown architecture" \
  'require("hiernet.algo.ps").train{ server = a, workers = { b }, model = "resnet99", steps = 1 }'
bad_case peer_train_dataset 1 "c_peer_train_dataset.lua:5: node 'a': dataset: dataset \"/no/such\" is unknown" \
  'require("hiernet.algo.allreduce").train{ workers = { a }, dataset = "/no/such", steps = 1 }'
bad_case peer_train_evals 1 "c_peer_train_evals.lua:5: allreduce.train: give eval_every (steps) or eval_every_s (seconds), not both" \
  'require("hiernet.algo.allreduce").train{ workers = { a, b }, eval_every = 2, eval_every_s = 1, steps = 4 }'

# ---- background traffic (exit 1, at the scenario's line) ----
bad_case peer_traffic_pattern 1 "c_peer_traffic_pattern.lua:5: network 'bad': traffic: unknown pattern 'bursty'" \
  'net:traffic{ from = a, to = b, rate = "1Mbit", pattern = "bursty" }'
bad_case peer_traffic_rate 1 'c_peer_traffic_rate.lua:5: network '"'"'bad'"'"': traffic: rate: bad rate "-5Mbit"' \
  'net:traffic{ from = a, to = b, rate = "-5Mbit" }'
bad_case peer_traffic_same 1 "c_peer_traffic_same.lua:5: network 'bad': traffic: from and to are the same node 'a'" \
  'net:traffic{ from = a, to = a, rate = "1Mbit" }'
bad_case peer_traffic_node 1 "c_peer_traffic_node.lua:5: network 'bad': traffic: to: no node named 'zz'" \
  'net:traffic{ from = a, to = "zz", rate = "1Mbit" }'

# ---- records and tasks (exit 1) ----
bad_case net_record_slash 1 "c_net_record_slash.lua:4: record name 'a/b' is not a valid file name" 'hn.record("a/b", { "x" })'
bad_case net_record_dotdot 1 "c_net_record_dotdot.lua:4: record name '../up' is not a valid file name" 'hn.record("../up", { "x" })'
bad_case net_record_hidden 1 "c_net_record_hidden.lua:4: record name '.hidden' is not a valid file name" 'hn.record(".hidden", { "x" })'
bad_case net_record_nocols 1 "c_net_record_nocols.lua:4: hn.record: give 1 to" 'hn.record("r", {})'
bad_case net_record_twice 1 "c_net_record_twice.lua:5: record 'r': cannot create" $'hn.record("r", { "x" })\nhn.record("r", { "x" })'
bad_case net_record_column 1 "c_net_record_column.lua:5: record 'r': unknown column 'y'" $'local r = hn.record("r", { "x" })\nr:add{ y = 1 }'
bad_case net_sleep_neg 1 "c_net_sleep_neg.lua:4: sleep: seconds must be >= 0, got -1" 'hn.sleep(-1)'
bad_case net_task_error 1 "c_net_task_error.lua:4: deliberate" 'hn.spawn(function() error("deliberate") end); hn.sleep(0.01)'
bad_case net_deadlock 1 "the scenario is waiting for something that can never happen" 'hn.queue():pop()'

# link:trace{}: a bad trace file is bad input (exit 2) naming the file and
# its line, found before the link's backend is looked at (none here).
trace_case() {
  bad_case "net_trace_$1" 2r "c_net_trace_$1.lua:5: link a-b: trace: $1.trace:$2" \
    "local f = assert(io.open(\"$1.trace\", \"w\")); f:write(\"$3\"); f:close()
net:link(a, b, { bw = \"10Mbit\" }):trace{ file = \"$1.trace\"${4-} }"
}
trace_case backwards "4: time goes backwards (1 after 2)" 't,bw\n0,10Mbit\n2,5Mbit\n1,3Mbit\n'
trace_case negative "2: negative rate '-5Mbit'" '0,10Mbit\n1,-5Mbit\n'
trace_case unparsable "2: bad loss \"lots\"" '0,10Mbit,5ms,1%\n1,5Mbit,5ms,lots\n'
trace_case empty " empty trace: no sample" '# only a comment\n'
trace_case mahimahi "3: time goes backwards (3 after 5)" '1\n5\n3\n' ', format = "mahimahi"'

# ---- emulated backends, refused before anything is made (root only) ----
if [[ $(id -u) -eq 0 ]]; then
  bad_case raw_switch_ports 1 "switch 'sw': 1100 links, but a Linux bridge takes at most 1023 ports" \
    $'local hn = require("hiernet")\nlocal net = hn.network{ name = "big", backend = "kernel" }\nlocal sw = net:switch("sw")\nfor i = 1, 1100 do net:link(net:node("h" .. i), sw) end\nnet:start()'
  bad_case raw_kernel_gilbert 1 "network 'g': gilbert burst loss needs backend 'user'" \
    $'local hn = require("hiernet")\nlocal net = hn.network{ name = "g", backend = "kernel" }\nnet:link(net:node("a"), net:node("b"), { gilbert = { p = 0.1, r = 0.5 } })\nnet:start()'
fi

# Every run.json at once: one Python start instead of one per case (each
# start costs more than the case's own run on a loaded host).
check_run_jsons() {
  local verdict name judged=0
  [[ -s run_json.expected ]] || return 0
  while read -r verdict name; do
    judged=$((judged + 1))
    [[ $verdict == ok ]] && ok || bad "$name: run.json does not record the failure"
  done < <(python3 - run_json.expected <<'PY'
import json, sys
fields = open(sys.argv[1], encoding="utf-8").read().split("\0")[:-1]
for name, first in zip(fields[0::2], fields[1::2]):
    try:
        j = json.load(open(f"r-{name}/run.json", encoding="utf-8"))
        good = j["status"] == "failed" and j["error"] == first
    except (OSError, ValueError, KeyError, TypeError):
        good = False
    print("ok" if good else "bad", name)
PY
  )
  [[ $judged -eq $ran_cases ]] && ok || bad "run.json checked for $judged of $ran_cases cases that ran"
}
check_run_jsons

echo "$cases cases"
[[ $cases -ge 60 ]] && ok || bad "only $cases cases"
report
