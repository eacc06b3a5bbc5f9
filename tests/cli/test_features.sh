#!/usr/bin/env bash
# Documented command-line features, each with a check that fails when it
# breaks: `hiernet draw` (DOT of the first network, nothing started or
# created; run's --backend, --dilation... refused by draw and place), HIERNET_TRACEBACK=1 (the traceback on stderr too), --backend
# (overrides every network; run.json records it), --set booleans (every
# spelling docs/lua-api.md lists; anything else an error naming it), the
# default results directory (results/<scenario stem>-<timestamp>), and
# hn.version / hn.emulation() against `hiernet version` / `hiernet doctor`.
# Usage: test_features.sh HIERNET_BINARY
set -u
HN=$1
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$here/lib.sh"
in_scratch_dir
json_field() { # FILE KEY -> the string value of the first "KEY": "value"
  grep -o "\"$2\": \"[^\"]*\"" "$1" | head -n1 | cut -d'"' -f4
}

# --- hiernet draw: the network as DOT; the scenario stops at net:start() ---
cat >draw.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "drawn", backend = "none" }
local a, b, c = net:node("alpha", { tier = "cloud" }), net:node("beta"), net:node("gamma")
net:link(a, b, { bw = "10Mbit", delay = "5ms" })
net:link(b, c)
net:start()
local f = io.open(os.getenv("MARK"), "w"); f:write("started"); f:close()
LUA
MARK=$work/mark expect_exit 0 "draw to stdout" -- "$HN" draw draw.lua
grep -qE '^(di)?graph ' out.txt && ok || bad "draw: no DOT graph on stdout: $(head -c 300 out.txt)"
for n in alpha beta gamma; do grep -q "\"$n\"" out.txt && ok || bad "draw: node $n missing"; done
grep -qE '"alpha" -[-|>] "beta"|"beta" -[-|>] "alpha"' out.txt && ok || bad "draw: link alpha-beta missing"
grep -qE '"beta" -[-|>] "gamma"|"gamma" -[-|>] "beta"' out.txt && ok || bad "draw: link beta-gamma missing"
grep -qE '"alpha" -[-|>] "gamma"|"gamma" -[-|>] "alpha"' out.txt && bad "draw: a link alpha-gamma that was never made" || ok
grep -q "10Mbit" out.txt && grep -q "5ms" out.txt && ok || bad "draw: the link's bw/delay not shown"
[[ ! -e mark ]] && ok || bad "draw ran the scenario past net:start()"
[[ ! -e results ]] && ok || bad "draw created a results directory"
MARK=$work/mark expect_exit 0 "draw --out" -- "$HN" draw draw.lua --out net.dot
grep -q '"alpha"' net.dot && ok || bad "draw --out: net.dot lacks the nodes"
# run's own options are refused, not taken and ignored, by draw and place
for cmd in draw place; do
  for opt in --dilation-max=4 --backend=user --quiet; do
    MARK=$work/mark expect_exit 2 "$cmd $opt" -- "$HN" "$cmd" draw.lua "$opt"
    expect_err "hiernet $cmd: '$opt' is an option of hiernet run: $cmd creates nothing" "$cmd $opt"
  done
done
[[ ! -e mark ]] && ok || bad "draw or place with a run option ran the scenario"

# --- HIERNET_TRACEBACK=1: the error's traceback on stderr as well ---
cat >err.lua <<'LUA'
local function inner() error("deliberate") end
local function outer() inner() end
outer()
LUA
expect_exit 1 "error without HIERNET_TRACEBACK" -- "$HN" run err.lua --out r-err1 --quiet
[[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "without HIERNET_TRACEBACK stderr is one line: $(cat err.txt)"
grep -q "stack traceback" r-err1/log.txt && ok || bad "log.txt lacks the traceback"
HIERNET_TRACEBACK=1 expect_exit 1 "error with HIERNET_TRACEBACK=1" -- "$HN" run err.lua --out r-err2 --quiet
expect_err "err.lua:1: deliberate" "HIERNET_TRACEBACK=1: the error line"
expect_err "stack traceback" "HIERNET_TRACEBACK=1: traceback on stderr"
grep -q "'outer'" err.txt && ok ||
  bad "HIERNET_TRACEBACK=1: the traceback does not name the calling function"
HIERNET_TRACEBACK=0 expect_exit 1 "HIERNET_TRACEBACK=0" -- "$HN" run err.lua --out r-err3 --quiet
[[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "HIERNET_TRACEBACK=0 is off: $(cat err.txt)"

# --- --backend overrides the scenario's backend; run.json records it ---
cat >backend.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "b", backend = "kernel" }
net:node("h1")
print("backend=" .. net.backend)
LUA
expect_exit 0 "--backend none" -- "$HN" run backend.lua --backend none --out r-back --quiet
expect_out "backend=none" "--backend none overrides backend = \"kernel\""
[[ $(json_field r-back/run.json backend) == none ]] && ok || bad "run.json backend: $(grep backend r-back/run.json)"

# --- --set booleans: every documented spelling, and a bad one ---
cat >flag.lua <<'LUA'
local hn = require("hiernet")
print("flag=" .. tostring(hn.param("flag", false)) .. " other=" .. tostring(hn.param("other", true)))
LUA
n=0
for spelling in true 1 yes on false 0 no off; do
  n=$((n + 1))
  want=$([[ $spelling =~ ^(true|1|yes|on)$ ]] && echo true || echo false)
  "$HN" run flag.lua --set flag="$spelling" --out "r-flag$n" --quiet >out.txt 2>err.txt
  grep -qx "flag=$want other=true" out.txt && ok || bad "--set flag=$spelling: $(cat out.txt err.txt)"
done
"$HN" run flag.lua --set flag=maybe --out r-flagbad --quiet >out.txt 2>err.txt
rc=$?
[[ $rc -ne 0 ]] && ok || bad "--set flag=maybe was accepted"
grep -q "flag" err.txt && grep -q "maybe" err.txt && ok || bad "--set flag=maybe: error names neither: $(cat err.txt)"

# --- the default results directory ---
mkdir dflt && cp flag.lua "dflt/my scen+1.lua"
(cd dflt && "$HN" run "my scen+1.lua" --quiet >/dev/null 2>&1)
dirs=(dflt/results/my-scen-1-*)
[[ -f ${dirs[0]}/run.json ]] && ok || bad "default results directory: $(ls -R dflt | head)"
[[ ${dirs[0]} =~ my-scen-1-[0-9]{8}-[0-9]{6}$ ]] && ok || bad "default directory name: ${dirs[0]}"

# --- hn.version and hn.emulation() against the commands ---
cat >api.lua <<'LUA'
local hn = require("hiernet")
local backend = hn.emulation()
print("version=" .. hn.version)
print("emulation=" .. backend)
LUA
expect_exit 0 "api scenario" -- "$HN" run api.lua --out r-api --quiet
v=$("$HN" version | sed -n 's/^hiernet \([^ ]*\) .*/\1/p')
[[ -n $v ]] && ok || bad "hiernet version printed no 'hiernet VERSION ...' line: $("$HN" version)"
expect_out "version=$v" "hn.version is what hiernet version prints"
[[ $(json_field r-api/run.json hiernet) == "$v" ]] && ok || bad "run.json versions.hiernet is not $v"
picked=$("$HN" doctor 2>/dev/null | sed -n 's/^backend auto picks: \([a-z]*\),.*/\1/p')
if [[ -n $picked ]]; then
  expect_out "emulation=$picked" "hn.emulation() picks what hiernet doctor picks"
else
  bad "hiernet doctor printed no 'backend auto picks:' line"
fi

report
