-- lost_family.lua — a training of one algorithm family spread over the
-- namespace cluster's three machines (hosts=), the node the family cannot
-- do without, or several of its workers, on m3, whose agent the test
-- (test_cluster_lost_family.sh) SIGKILLs once the training made 20 steps:
-- this creates the file named by up= then. family= one of
--   ps     ASP with its server ps on m3 (with w4); w1 on m1, w2 w3 on m2
--   hier   HierFAVG: cloud c on m1, edge e1 on m2 (t1 on m1, t2 on m2),
--          edge e2 on m3 (t3 on m3, t4 on m2: a terminal that survives
--          its edge)
--   gossip push-sum gossip on a ring w1..w5: w1 on m1, w2 w3 on m2, w4 w5 on m3
--   ring   all-reduce ring with on_failure = "drop", placed as gossip
--   dpsgd  D-PSGD on the ring, placed as gossip
--   easgd  EASGD with its centre c on m3 (with w4); w1 on m1, w2 w3 on m2
-- Once the loss is heard (the kill listeners: every node on m3) and the
-- survivors made 5 more steps each (a step in flight at the loss has its
-- row by then), each worker's step count is noted; the training then runs
-- 5 more steps of every survivor and stops. It prints
--   "after NAME N"     steps worker NAME made after the note (0 for the lost)
--   "lost NAME WHY"    each node the kill listeners named, with the cause
--   "model NAME same"  (ring) survivor NAME's model is w1's element for
--                      element, or "model NAME differs at K: A B"
--   "result steps N"   the training's summary steps
-- A failed training's error is raised as it is (one line, the run's).
local hn = require("hiernet")
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "../network/common.lua")
local family = hn.param("family", "")
local up_file = hn.param("up", "")
local net = hn.network{ name = family, backend = "kernel", seed = 1, hosts = hn.param("hosts", "") }
local LIVENESS_S = 20 -- a bound on every wait, far past what the loaded host needs

-- The families' placements: the workers, `survivors` (indices of those not
-- on m3, whose steps go on), `on_m3` the nodes on m3.
local function switch_star(names, where)
  local sw = net:switch("sw", { host = "m1" })
  local nodes = {}
  for i, name in ipairs(names) do
    nodes[i] = net:node(name, { host = where[i] })
    net:link(nodes[i], sw, { bw = "100Mbit" })
  end
  return nodes, sw
end

local FIVE = { names = { "w1", "w2", "w3", "w4", "w5" }, where = { "m1", "m2", "m2", "m3", "m3" } }

-- Workers w1..w4 (w1 on m1, w2 w3 on m2, w4 on m3) on a switch, and the
-- node they all reach (key: the training's option) on m3 with w4.
local function build_hub(name, key)
  local workers, sw = switch_star({ "w1", "w2", "w3", "w4" }, { "m1", "m2", "m2", "m3" })
  local hub = net:node(name, { host = "m3" })
  net:link(hub, sw, { bw = "1Gbit" })
  return { workers = workers, [key] = hub, survivors = { 1, 2, 3 }, on_m3 = { name, "w4" } }
end

local function build_hier()
  local c = net:node("c", { host = "m1", tier = "cloud" })
  local e1 = net:node("e1", { host = "m2", tier = "edge" })
  local e2 = net:node("e2", { host = "m3", tier = "edge" })
  net:link(e1, c, { bw = "1Gbit" })
  net:link(e2, c, { bw = "1Gbit" })
  local workers = {}
  for i, spec in ipairs{ { "m1", e1 }, { "m2", e1 }, { "m3", e2 }, { "m2", e2 } } do
    workers[i] = net:node("t" .. i, { host = spec[1], tier = "terminal" })
    net:link(workers[i], spec[2], { bw = "100Mbit" })
  end
  return { workers = workers, cloud = c, survivors = { 1, 2 }, on_m3 = { "e2", "t3" } }
end

local function build_five()
  return { workers = (switch_star(FIVE.names, FIVE.where)), survivors = { 1, 2, 3 }, on_m3 = { "w4", "w5" } }
end

local builders = {
  ps = function() return build_hub("ps", "server") end, hier = build_hier, gossip = build_five,
  ring = build_five, dpsgd = build_five, easgd = function() return build_hub("c", "center") end,
}
if not builders[family] then
  error("lost_family.lua: family '" .. family .. "': not ps, hier, gossip, ring, dpsgd or easgd", 0)
end
local S = builders[family]()
net:start()

local lost = {} -- node name -> why, from the kill listeners
net:on("kill", function(_, node, why) lost[node.name] = tostring(why) end)

local function wait_for(clock, cond, what)
  return H.wait_until(clock, cond, what, LIVENESS_S)
end

-- Every survivor made n more steps than in counts.
local function survivors_made(clock, counts, n)
  return function()
    for _, i in ipairs(S.survivors) do
      local name = S.workers[i].name
      if clock.steps_of(name) < counts[name] + n then return false end
    end
    return true
  end
end

local function counts_now(clock)
  local c = {}
  for _, w in ipairs(S.workers) do c[w.name] = clock.steps_of(w.name) end
  return c
end

local noted, schedule_err, the_clock
local function at_start(clock)
  the_clock = clock
  local ok, err = pcall(function()
    if not wait_for(clock, function() return clock.steps() >= 20 end, "20 steps") then return end
    io.open(up_file, "w"):close()
    local function all_lost()
      for _, name in ipairs(S.on_m3) do if not lost[name] then return false end end
      return true
    end
    if not wait_for(clock, all_lost, "the loss of m3's nodes") then return end
    if not wait_for(clock, survivors_made(clock, counts_now(clock), 5), "5 steps after the loss") then return end
    noted = counts_now(clock)
    if not wait_for(clock, survivors_made(clock, noted, 5), "5 steps after the note") then return end
    clock.stop("schedule done")
  end)
  if not ok then schedule_err = err; clock.stop("schedule failed") end
end

local common = {
  workers = S.workers, model = "logreg:32-4", batch = 32, seconds = 30, eval_every = 100000,
  final_eval_limit = 200, at_start = at_start,
  dataset = { name = "synthetic", n = 2000, dim = 32, classes = 4, partition = "shuffle" },
  worker_opt = { method = "sgd", lr = 0.1 },
}
local function with(extra)
  local o = {}
  for k, v in pairs(common) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

local trainers = {
  ps = function()
    return require("hiernet.algo.ps").train(with{ server = S.server, mode = "asp",
                                                  server_opt = { method = "sgd", lr = 1.0 } })
  end,
  hier = function()
    return require("hiernet.algo.hier").train(with{ cloud = S.cloud, tau1 = 2, tau2 = 2 })
  end,
  gossip = function()
    return require("hiernet.algo.decentral").train(with{ algo = "gossip", graph = "ring" })
  end,
  dpsgd = function()
    return require("hiernet.algo.decentral").train(with{ algo = "dpsgd", graph = "ring" })
  end,
  easgd = function()
    return require("hiernet.algo.decentral").train(with{ algo = "easgd", center = S.center })
  end,
  ring = function()
    return require("hiernet.algo.allreduce").train(with{ algo = "ring", on_failure = "drop" })
  end,
}

-- Survivor i's model against w1's, element for element.
local function compare_models()
  local ref = S.workers[1]:read{ tensor = "w" }.values
  for k = 2, #S.survivors do
    local w = S.workers[S.survivors[k]]
    local got, diff = w:read{ tensor = "w" }.values, nil
    for e = 1, math.max(#ref, #got) do
      if ref[e] ~= got[e] then diff = e; break end
    end
    print(diff and string.format("model %s differs at %d: %s %s", w.name, diff, tostring(ref[diff]),
                                 tostring(got[diff])) or string.format("model %s same", w.name))
  end
end

local ok, s = pcall(trainers[family])
if ok and family == "ring" then compare_models() end
net:stop()
if not ok then error(s, 0) end
if schedule_err then error("the schedule: " .. tostring(schedule_err), 0) end
if not noted then error("the training ended before the survivors' steps were noted: " .. tostring(s.stop_reason), 0) end
local names = {}
for name in pairs(lost) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do print(string.format("lost %s %s", name, lost[name])) end
for _, w in ipairs(S.workers) do
  print(string.format("after %s %d", w.name, the_clock.steps_of(w.name) - noted[w.name]))
end
print(string.format("result steps %d", s.steps))
