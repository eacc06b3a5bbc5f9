-- replay: one run of the networks-that-change features together (issue 22:
-- "the same seed and files give the same schedule"), which replay.sh runs
-- twice and compares. On the user backend, from one start: a linear trace
-- on t1's uplink (a change every 100 ms), churn of t2 and t3 (exponential
-- on/off, kill), random-waypoint moves of t1 and t3 between e1 and e2 (t1
-- moves with its trace playing, t3 while it churns). After RUN_S seconds
-- both stop; l:trace_changes("ba") goes to trace_changes.csv beside the
-- run's churn.csv and moves.csv. Each kind must have happened.
-- Args: owned=, regdir=, tmp= from lib.sh.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local RUN_S = 2.5

local net = hn.network{ name = "replay", backend = "user", seed = 3 }
local cloud = net:node("cloud", { tier = "cloud" })
local e1, e2 = net:node("e1", { tier = "edge" }), net:node("e2", { tier = "edge" })
net:link(cloud, e1, { bw = "100Mbit" })
net:link(cloud, e2, { bw = "100Mbit" })
local t = {}
local uplink
for i = 1, 3 do
  t[i] = net:node("t" .. i, { tier = "terminal" })
  local l = net:link(i == 2 and e2 or e1, t[i], { bw = "20Mbit" })
  if i == 1 then uplink = l end
end
net:start()
H.own(net)

local trace = A.tmp .. "/replay-up.csv"
local f = assert(io.open(trace, "w"))
f:write("t,bw\n0,2Mbit\n0.8,10Mbit\n1.6,4Mbit\n2.4,4Mbit\n")
f:close()

uplink:trace{ file = trace, interp = "linear", step = "100ms", dir = "ba" }
local churn = net:churn{ nodes = { t[2], t[3] }, model = { up_mean_s = 0.5, down_mean_s = 0.25, seed = 9 } }
local mob = net:mobility{ nodes = { t[1], t[3] }, edges = { e1, e2 }, model = "random-waypoint", seed = 5,
                          dwell_s = { 0.3, 0.7 } }
hn.sleep(RUN_S)
mob:stop()
churn:stop()

local changes = uplink:trace_changes("ba")
local rec = hn.record("trace_changes", { "t", "bw", "delay", "loss" })
for _, c in ipairs(changes) do rec:add{ t = c.t, bw = c.bw, delay = c.delay, loss = c.loss } end
H.check(#changes >= 10, "trace: %d changes in %g s", #changes, RUN_S)
H.check(churn.downs >= 1 and mob.moves >= 1, "churn downs %d, moves %d: nothing to compare", churn.downs, mob.moves)
net:stop()
print(string.format("replay: %d trace changes, %d downs, %d moves", #changes, churn.downs, mob.moves))
