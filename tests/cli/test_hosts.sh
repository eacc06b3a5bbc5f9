#!/usr/bin/env bash
# Several machines, part one (issue 20): the machines file (--hosts FILE,
# hn.network{hosts =}, --hosts slurm through scontrol), node pins (host=),
# the placement shown by `hiernet place` and `hiernet draw --hosts`, and a
# run whose placement needs another machine refused after its placement is
# in run.json and its agent was asked for (here a stand-in ssh that
# refuses the connection, so the test needs no network: the failure names
# the machine and ssh's own line; the command line is checked). Bad input is one line naming the file and line, or the node
# and the machine, with exit 2.
# Usage: test_hosts.sh HIERNET_BINARY
set -u
HN=$1
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$here/lib.sh"
in_scratch_dir registry
one_line() { [[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "$1: not one line: $(cat err.txt)"; }

# Two stars of a switch and four hosts (1 Gbit/s, 1 ms), the switches
# joined by a 40 ms link: on two equal machines that link is the cut.
cat >two.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "two", backend = "none", hosts = hn.param("hosts", "") ~= "" and hn.param("hosts", "") or nil }
local sw = { net:switch("sa"), net:switch("sb") }
for s, side in ipairs{ "a", "b" } do
  for i = 1, 4 do net:link(sw[s], net:node(side .. i), { bw = "1Gbit", delay = "1ms" }) end
end
net:link(sw[1], sw[2], { bw = "1Gbit", delay = "40ms" })
net:start()
net:stop()
LUA
# Two hosts, each pinned by a parameter.
cat >pin.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "p", backend = "none" }
local x = net:node("x", { host = hn.param("x", "m1") })
net:link(x, net:node("y", { host = hn.param("y", "m1") }), { delay = "1ms" })
net:start()
net:stop()
LUA
cat >hosts.txt <<'EOF'
# the controller's machine and one that is not reachable (TEST-NET-1)
m1 127.0.0.1 cores=4
m2 192.0.2.7 cores=4 user=lab   # no agent there: ssh is refused
EOF

# --- bad machines files: file:line and the value, exit 2 ---
printf 'm1 10.0.0.1\nm2 10.0.0.1\n' >dup.txt
expect_exit 2 "duplicate address" -- "$HN" place pin.lua --hosts dup.txt
expect_err "dup.txt:2: duplicate machine address (first on line 1) '10.0.0.1'" "duplicate address"
one_line "duplicate address"
printf '\nm1 10.0.0.1 gpus=2\n' >key.txt
expect_exit 2 "bad key" -- "$HN" run pin.lua --hosts key.txt --out r-key
expect_err "key.txt:2: unknown key (cores=N, mem=GiB, user=NAME) in 'gpus=2'" "bad key"
[[ ! -e r-key/run.json ]] || ! grep -q '"placement"' r-key/run.json && ok || bad "bad key: a placement recorded"
printf 'm1 10.0.0.1 cores=many\n' >num.txt
expect_exit 2 "bad number" -- "$HN" place pin.lua --hosts num.txt
expect_err "num.txt:1: cores must be an integer from 1, got 'many'" "bad number"
expect_exit 2 "--hosts without a value" -- "$HN" place pin.lua --hosts
expect_err "hiernet place: --hosts needs a value (see hiernet place --help)" "--hosts without a value"
expect_exit 2 "draw --hosts without a value" -- "$HN" draw pin.lua --hosts
expect_err "hiernet draw: --hosts needs a value (see hiernet draw --help)" "draw --hosts without a value"
# clean and doctor share one parser of --hosts (app/clean_hosts.c)
for cmd in clean doctor; do
  expect_exit 2 "$cmd --hosts without a value" -- "$HN" "$cmd" --hosts
  expect_err "hiernet $cmd: --hosts needs a value (see hiernet $cmd --help)" "$cmd --hosts without a value"
  one_line "$cmd --hosts without a value"
  expect_exit 2 "$cmd --hosts= a bad file" -- "$HN" "$cmd" --hosts=dup.txt
  expect_err "hiernet $cmd: --hosts: dup.txt:2: duplicate machine address (first on line 1) '10.0.0.1'" "$cmd --hosts= a bad file"
  expect_exit 2 "$cmd --hosts FILE and more" -- "$HN" "$cmd" --hosts dup.txt --frob
  expect_err "hiernet $cmd: unknown argument '--frob' (see hiernet $cmd --help)" "$cmd --hosts FILE and more"
done
# doctor --hosts with this machine only (no agent): its row, and beneath
# it why its kernel features were not probed when they could not be (here
# as an unprivileged user, where the machine allows it).
printf 'm1 127.0.0.1\n' >local.txt
"$HN" doctor --hosts local.txt >out.txt 2>err.txt
awk '$1 == "m1" && $3 == "local" {f = 1} END {exit !f}' out.txt && ok || bad "doctor --hosts local.txt: no local m1 row: $(cat out.txt err.txt)"
nobody=(setpriv --reuid 65534 --regid 65534 --clear-groups)
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null && chmod o+rx . && chmod o+r local.txt &&
  "${nobody[@]}" test -x "$HN" -a -r local.txt; then
  expect_exit 3 "doctor --hosts unprivileged" -- "${nobody[@]}" "$HN" doctor --hosts local.txt
  expect_out "  kernel features not probed: " "doctor --hosts unprivileged says why"
fi
expect_exit 2 "missing file" -- "$HN" place pin.lua --hosts nowhere.txt
expect_err "nowhere.txt: cannot read: No such file or directory" "missing file"
expect_exit 2 "an empty --hosts" -- "$HN" place pin.lua --hosts ''
expect_err "network 'p': hosts: an empty name: give a machines file or \"slurm\"" "an empty --hosts"
mkdir -p adir
expect_exit 2 "a directory" -- "$HN" place pin.lua --hosts adir
expect_err "adir: cannot read: Is a directory" "a directory"

# --- a pin to a machine the file does not list ---
expect_exit 2 "unknown pin" -- "$HN" place pin.lua --hosts hosts.txt --set y=m9
expect_err "node 'y': host 'm9' is not a machine of hosts.txt" "unknown pin"
one_line "unknown pin"
# a pin that cannot be a machine's name: bad input too, with the scenario's line
expect_exit 2 "empty pin" -- "$HN" place pin.lua --hosts hosts.txt --set x=
expect_err "pin.lua:3: node 'x': host '' is not a machine name (1 to 63 bytes)" "empty pin"
one_line "empty pin"
expect_exit 2 "long pin" -- "$HN" place pin.lua --hosts hosts.txt --set y="$(printf 'm%.0s' {1..64})"
expect_err "node 'y': host 'mmmm" "long pin"

# --- hiernet place: machines, nodes, the cut link with its delay ---
expect_exit 0 "place" -- "$HN" place two.lua --hosts hosts.txt
expect_out "network 'two': 10 nodes on 2 machines of hosts.txt" "place"
expect_out "cut links: 1" "place"
grep -qE '^  sa-sb +m[12]-m[12] +delay 40ms +bw 1Gbit$' out.txt && ok || bad "place: cut link: $(cat out.txt)"
side_a=$(awk '$1 == "sa" {print $2}' out.txt)
side_b=$(awk '$1 == "sb" {print $2}' out.txt)
[[ -n $side_a && $side_a != "$side_b" ]] && ok || bad "place: sa on '$side_a', sb on '$side_b'"
for i in 1 2 3 4; do
  [[ $(awk -v n="a$i" '$1 == n {print $2}' out.txt) == "$side_a" ]] && ok || bad "place: a$i off sa's machine"
  [[ $(awk -v n="b$i" '$1 == n {print $2}' out.txt) == "$side_b" ]] && ok || bad "place: b$i off sb's machine"
done
grep -qE '^m1 +127\.0\.0\.1 +4 +yes +5 ' out.txt && ok || bad "place: m1's row: $(cat out.txt)"
# the same from the scenario's own hosts =, and the same twice (deterministic)
cp out.txt place1.txt
expect_exit 0 "place from hosts=" -- "$HN" place two.lua --set hosts=hosts.txt
cmp -s out.txt place1.txt && ok || bad "place from hosts= differs from --hosts: $(diff out.txt place1.txt)"
# --out FILE: the same tables in FILE, nothing on stdout
expect_exit 0 "place --out" -- "$HN" place two.lua --hosts hosts.txt --out place2.txt
cmp -s place2.txt place1.txt && [[ ! -s out.txt ]] && ok || bad "place --out: $(diff place2.txt place1.txt)"

# --- hiernet draw --hosts: coloured by machine, the cut dashed ---
expect_exit 0 "draw --hosts" -- "$HN" draw two.lua --hosts hosts.txt
grep -qF "\"a1\" [shape=ellipse, style=filled, fillcolor=" out.txt && grep -qF "label=\"a1\\n@$side_a\"" out.txt &&
  ok || bad "draw --hosts: a1 not labelled with its machine: $(cat out.txt)"
grep -qF '"sa" -- "sb" [label="1Gbit 40ms", fontsize=10, style=dashed' out.txt && ok ||
  bad "draw --hosts: the cut link is not dashed"
[[ $(grep -c 'style=dashed' out.txt) -eq 1 ]] && ok || bad "draw --hosts: more than the cut dashed"

# --- the controller's own machine: named local, this host's name, an interface's address ---
printf 'local 192.0.2.9\nme %s\nlo 127.0.0.1\nother 192.0.2.10\n' "$(hostname)" >mine.txt
expect_exit 0 "local machines" -- "$HN" place pin.lua --hosts mine.txt --set x=other --set y=other
for row in "local 192.0.2.9 - yes" "me $(hostname) - yes" "lo 127.0.0.1 - yes" "other 192.0.2.10 - no"; do
  read -r name addr cores local <<<"$row"
  awk -v n="$name" -v a="$addr" -v c="$cores" -v l="$local" '$1 == n && $2 == a && $3 == c && $4 == l {f = 1} END {exit !f}' out.txt &&
    ok || bad "local machines: no row '$row': $(cat out.txt)"
done

# --- a run that needs the other machine: refused after the placement is recorded ---
mkdir fakebin
cat >fakebin/ssh <<'SH'
#!/bin/sh
printf '%s\n' "$@" >"$(dirname "$0")/../ssh-args.txt"
echo "ssh: connect to host 192.0.2.7 port 22: Connection refused" >&2
exit 255
SH
chmod +x fakebin/ssh
expect_exit 3 "run on two machines" -- env PATH="$work/fakebin:$PATH" "$HN" run two.lua --hosts hosts.txt --out r-two --quiet
expect_err "network 'two': 5 of its 10 nodes are placed on other machines than this one: machine 'm2' (192.0.2.7): the agent's ssh exited with status 255: ssh: connect to host 192.0.2.7 port 22: Connection refused" "run on two machines"
hn_abs=$(readlink -f "$HN")
grep -qxF -- "-T -o BatchMode=yes -o ConnectTimeout=15 -o ControlMaster=auto -o ControlPersist=no -l lab -- 192.0.2.7 exec '$hn_abs' 'agent' '--machine' 'm2'" \
  <(tr '\n' ' ' <ssh-args.txt | sed -E 's/-o ControlPath=[^ ]*\/[0-9]+ //; s/ $//') && ok ||
  bad "run on two machines: ssh's arguments: $(tr '\n' ' ' <ssh-args.txt)"
grep -qE '^ControlPath=/.*/\.ssh-[0-9]+-[0-9]+-[A-Za-z0-9]{6}/1$' ssh-args.txt && ok || bad "no private ControlPath: $(cat ssh-args.txt)"
grep -q '"status": "failed"' r-two/run.json && ok || bad "refused run: status not failed"
grep -qE '"cut_links": \[\{"a": "sa", "b": "sb", "parallel": 0, "machine_a": "m[12]", "machine_b": "m[12]", "delay_us": 40000.000, "bw_bps": 1000000000\}\]' r-two/run.json &&
  ok || bad "refused run: run.json lacks the cut link: $(grep -o '"placement".*' r-two/run.json | head -c 600)"
grep -qF "\"a1\": \"$side_a\"" r-two/run.json && ok || bad "refused run: run.json lacks a1's machine"
grep -q "placed over hosts.txt: m1 5 nodes (local) m2 5 nodes; 1 cut link" r-two/log.txt && ok ||
  bad "refused run: log.txt lacks the placement line"

# --- every node pinned to the controller's machine: the run goes on ---
expect_exit 0 "run pinned here" -- "$HN" run pin.lua --hosts hosts.txt --out r-pin --quiet
grep -qF '"nodes": {"x": "m1", "y": "m1"}, "pinned": ["x", "y"], "cut_links": []' r-pin/run.json && ok ||
  bad "pinned run: run.json's placement: $(grep -o '"placement".*' r-pin/run.json | head -c 600)"
# pins without machines: said in the log, and the run goes on here
expect_exit 0 "pins without hosts" -- "$HN" run pin.lua --out r-nohosts
expect_err "node 'x' is pinned to 'm1', but the network has no machines" "pins without hosts"

# --- --hosts slurm: the allocation through scontrol ---
mkdir -p empty fakebin
expect_exit 2 "slurm outside an allocation" -- env -u SLURM_JOB_NODELIST "$HN" place pin.lua --hosts slurm
expect_err "slurm: SLURM_JOB_NODELIST is not set: not inside a Slurm allocation (salloc, sbatch)" "slurm outside"
one_line "slurm outside"
expect_exit 2 "slurm without scontrol" -- env SLURM_JOB_NODELIST='n[1-2]' PATH="$work/empty" "$HN" place pin.lua --hosts slurm
expect_err "slurm: scontrol not found in PATH (Slurm's client commands, Debian slurm-client) (SLURM_JOB_NODELIST 'n[1-2]')" "slurm without scontrol"
one_line "slurm without scontrol"
cat >fakebin/scontrol <<'EOF'
#!/bin/sh
# scontrol show hostnames n[1-2], as Slurm prints it
[ "$1 $2 $3" = "show hostnames n[1-2]" ] || exit 1
echo n1
echo n2
EOF
chmod +x fakebin/scontrol
expect_exit 0 "slurm" -- env SLURM_JOB_NODELIST='n[1-2]' SLURM_JOB_CPUS_PER_NODE='8,2' PATH="$work/fakebin:$PATH" \
  "$HN" place pin.lua --hosts slurm --set x=n2 --set y=n2
expect_out "network 'p': 2 nodes on 2 machines of slurm" "slurm"
grep -qE '^n1 +n1 +8 +no +0 ' out.txt && grep -qE '^n2 +n2 +2 +no +2 ' out.txt && ok || bad "slurm: machines: $(cat out.txt)"
expect_exit 2 "slurm, cores for one machine of two" -- env SLURM_JOB_NODELIST='n[1-2]' \
  SLURM_JOB_CPUS_PER_NODE='8' PATH="$work/fakebin:$PATH" "$HN" place pin.lua --hosts slurm
expect_err "slurm: SLURM_JOB_CPUS_PER_NODE '8' does not give the cores of the allocation's 2 machines (expected e.g. '8(x2),4')" "slurm bad cpus"
one_line "slurm bad cpus"

report
