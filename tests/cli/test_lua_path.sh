#!/usr/bin/env bash
# Where `require` finds a module (lua/modules.h): the scenario's own folder,
# then each directory of HIERNET_LUA_PATH, then the compiled-in library, so
# that a researcher's module loads without rebuilding hiernet. Checks: a new
# module on HIERNET_LUA_PATH (plain and hiernet.algo.*, in the second of
# two directories, the path relative to the working directory); one there
# that replaces a built-in module; the source tree's library through
# HIERNET_LUA_PATH=<root>/lua (the development override); the scenario's
# folder ahead of HIERNET_LUA_PATH; a module missing (exit 1, the places
# tried named) and a module that does not parse (exit 1, file:line). Data
# files (link:trace, net:churn, net:mobility) the same way: a relative path
# in the scenario's folder first, then the working directory; the errors
# name the file read.
# Usage: test_lua_path.sh HIERNET_BINARY SOURCE_ROOT
set -u
HN=$(readlink -f "$1")
ROOT=$(readlink -f "$2")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
in_scratch_dir registry
mkdir -p liba/hiernet/algo libb scen

cat >libb/pathmod.lua <<'LUA'
return { from = "libb" }
LUA
cat >liba/hiernet/algo/mine.lua <<'LUA'
return { train = function() return "mine" end }
LUA
# replaces the built-in hiernet.mininet (not loaded unless required)
cat >liba/hiernet/mininet.lua <<'LUA'
return { replaced = true }
LUA
cat >scen/new_modules.lua <<'LUA'
local m, where = require("pathmod")
print("pathmod " .. m.from .. " " .. where)
print("mine " .. require("hiernet.algo.mine").train())
print("mininet replaced " .. tostring(require("hiernet.mininet").replaced))
print("ps built-in " .. select(2, require("hiernet.algo.ps")))
LUA
expect_exit 0 "new modules on HIERNET_LUA_PATH" -- \
  env HIERNET_LUA_PATH=liba:libb "$HN" run scen/new_modules.lua --out out1 --quiet
expect_out "pathmod libb libb/pathmod.lua" "a plain module from the second directory"
expect_out "mine mine" "hiernet.algo.mine from the first directory"
expect_out "mininet replaced true" "a built-in module replaced"
expect_out "ps built-in lua/hiernet/algo/ps.lua" "a module in neither directory: the compiled-in one"

# The development override: the library from the source tree's files.
cat >scen/dev.lua <<'LUA'
print("topo from " .. select(2, require("hiernet.topo")))
LUA
expect_exit 0 "HIERNET_LUA_PATH=<root>/lua" -- \
  env HIERNET_LUA_PATH="$ROOT/lua" "$HN" run scen/dev.lua --out out2 --quiet
expect_out "topo from $ROOT/lua/hiernet/topo.lua" "the source tree's hiernet.topo"

# The scenario's folder comes first; a bare file name means the working directory.
cat >scen/pathmod.lua <<'LUA'
return { from = "scenario folder" }
LUA
cat >scen/first.lua <<'LUA'
print("pathmod from " .. require("pathmod").from)
LUA
expect_exit 0 "scenario folder first" -- \
  env HIERNET_LUA_PATH=libb "$HN" run scen/first.lua --out out3 --quiet
expect_out "pathmod from scenario folder" "the scenario's folder ahead of HIERNET_LUA_PATH"
expect_exit 0 "a bare scenario file name" -- \
  bash -c "cd scen && HIERNET_LUA_PATH=../libb '$HN' run first.lua --out ../out4 --quiet"
expect_out "pathmod from scenario folder" "the working directory's module for a bare file name"

# Missing: exit 1, the places tried named (the scenario folder, each directory).
cat >scen/missing.lua <<'LUA'
require("nosuchmod")
LUA
expect_exit 1 "a missing module" -- \
  env HIERNET_LUA_PATH=liba:libb "$HN" run scen/missing.lua --out out5 --quiet
expect_err "module 'nosuchmod' not found" "the missing module named"
expect_err "no file 'scen/nosuchmod.lua'" "the scenario folder tried"
expect_err "no file 'libb/nosuchmod/init.lua'" "each HIERNET_LUA_PATH directory tried"

# A module that does not parse: its file and line, not "not found".
printf 'return {\n  x = = 1,\n}\n' >libb/broken.lua
cat >scen/use_broken.lua <<'LUA'
require("broken")
LUA
expect_exit 1 "a module that does not parse" -- \
  env HIERNET_LUA_PATH=libb "$HN" run scen/use_broken.lua --out out6 --quiet
expect_err "error loading module 'broken' from file 'libb/broken.lua'" "the broken module's file"
expect_err "libb/broken.lua:2:" "the broken module's line"

# Data files: a churn schedule of the scenario's folder ahead of the working
# directory's (there t1 goes down at once; here only after 100 s), and one
# found in the working directory when the folder has none.
printf 'node,t_down,t_up\nt1,0.05,0.1\n' >scen/avail.csv
printf 'node,t_down,t_up\nt1,100,101\n' >avail.csv
printf 'node,t_down,t_up\nt1,0.05,0.1\n' >here.csv
cat >scen/data.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "data", backend = "none" }
local e1, e2, t1 = net:node("e1"), net:node("e2"), net:node("t1")
local l = net:link(e1, t1)
net:link(e1, e2)
net:start()
local what = hn.param("what", "churn")
if what == "churn" or what == "cwd" then
  local h = net:churn{ nodes = { t1 }, file = what == "churn" and "avail.csv" or "here.csv" }
  hn.sleep(1)
  print("downs " .. h.downs)
  h:stop()
elseif what == "trace" then
  l:trace{ file = "up.csv" }
else
  net:mobility{ nodes = { t1 }, edges = { e1, e2 }, file = "moves.csv" }
end
LUA
expect_exit 0 "a churn file of the scenario's folder" -- "$HN" run scen/data.lua --out out7 --quiet
expect_out "downs 1" "the scenario folder's avail.csv, not the working directory's"
expect_exit 0 "a churn file of the working directory" -- \
  "$HN" run scen/data.lua --set what=cwd --out out8 --quiet
expect_out "downs 1" "here.csv from the working directory"
printf 't,bw\n0,1Mbit\n2,2Mbit\n1,3Mbit\n' >scen/up.csv
expect_exit 2 "a bad trace of the scenario's folder" -- \
  "$HN" run scen/data.lua --set what=trace --out out9 --quiet
expect_err "scen/up.csv:4: time goes backwards" "the trace read from the scenario's folder"
printf 't,node,edge\n1,t1,e2\n0.5,t1,e1\n' >scen/moves.csv
expect_exit 2 "a bad mobility file of the scenario's folder" -- \
  "$HN" run scen/data.lua --set what=mobility --out out10 --quiet
expect_err "scen/moves.csv:3:" "the moves read from the scenario's folder"
report
