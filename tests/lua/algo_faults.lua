-- How the algorithms react to a worker that dies and comes back, on backend
-- none (node:kill / node:restart; partitions need an emulated backend and
-- are tests/integration/network/faults.lua's): SSP, fastest-k, adaptive-k,
-- EASGD and hierarchical averaging go on without the dead worker and take it
-- back after its restart; all-reduce and D-PSGD with on_failure = "fail"
-- stop with an error naming it.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local dc = require("hiernet.algo.decentral")
local hier = require("hiernet.algo.hier")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "afaults", backend = "none" }
local cloud = net:node("cloud", { tier = "cloud" })
local edges, w = {}, {}
for e = 1, 2 do
  edges[e] = net:node("e" .. e, { tier = "edge" })
  net:link(cloud, edges[e])
end
for i = 1, 4 do
  w[i] = net:node("w" .. i, { tier = "terminal" })
  net:link(edges[(i - 1) // 2 + 1], w[i])
end
net:start()

local SECONDS, KILL_AT, RESTART_AT = 3.0, 0.8, 1.6

-- The fault schedule, on the training's clock (its at_start option): w3
-- dies KILL_AT s in and is restarted at RESTART_AT. `at` gets the times.
local function schedule()
  local at = {}
  return function()
    hn.sleep(KILL_AT); w[3]:kill(); at.kill = hn.now()
    hn.sleep(RESTART_AT - KILL_AT); w[3]:restart(); at.restart = hn.now()
  end, at
end

local function options(prefix, extra, fire)
  local o = { workers = w, model = T.model, dataset = T.dataset, batch = 32, seconds = SECONDS,
              worker_opt = { method = "sgd", lr = 0.2 }, eval_every = 10, eval_limit = 300,
              prefix = prefix, progress = false, at_start = fire }
  for k, v in pairs(extra) do o[k] = v end
  return o
end

-- steps.csv rows of a worker whose time lies in (a, b) of the training's clock.
local function rows_between(prefix, worker, a, b)
  local n = 0
  for _, r in ipairs(T.csv(prefix .. "steps")) do
    if r.worker == worker and r.time > a and r.time < b then n = n + 1 end
  end
  return n
end

-- Trains through the schedule; the others must go on while w3 is dead and
-- w3 must train again after its restart.
local function goes_on(what, train, extra)
  local prefix = what:gsub("[^%w]", "_") .. "_"
  local fire, at = schedule()
  local s = train(options(prefix, extra, fire))
  assert(at.restart, what .. ": the fault schedule did not finish within the training")
  local kill, restart = at.kill - s.start_s, at.restart - s.start_s
  local others = rows_between(prefix, "w1", kill + 0.1, restart)
  assert(others >= 3, string.format("%s: w1 made %d steps while w3 was dead", what, others))
  T.eq(rows_between(prefix, "w3", kill + 0.3, restart), 0, what .. ": steps of w3 while dead")
  local back = rows_between(prefix, "w3", restart + 0.3, SECONDS + 1)
  assert(back >= 1, what .. ": w3 made no step after its restart")
  T.eq(s.workers_alive, 4, what .. ": workers alive at the end")
  assert(s.final_loss < s.initial_loss, what .. ": did not learn")
  return s
end

goes_on("ssp", ps.train, { server = cloud, mode = "ssp", staleness = 2 })
goes_on("fastest-k", ps.train, { server = cloud, mode = "fastest-k", k = 2 })
goes_on("adaptive-k", ps.train, { server = cloud, mode = "adaptive-k" })
goes_on("easgd", dc.train, { algo = "easgd", center = cloud })
goes_on("hier", hier.train, { cloud = cloud, edges = edges, tau1 = 2, tau2 = 1 })

-- Synchronous ones fail the step, naming the dead worker.
local function fails(what, train, extra)
  local fire, at = schedule()
  local ok, err = pcall(train, options(what .. "_", extra, fire))
  assert(not ok, what .. ": trained on through a dead worker")
  assert(tostring(err):find("w3", 1, true), what .. ": the error does not name w3: " .. tostring(err))
  -- the schedule's restart, before the next training
  local t0 = hn.now()
  while not at.restart do
    assert(hn.now() - t0 < 5, what .. ": the schedule's restart did not come")
    hn.sleep(0.05)
  end
  assert(w[3]:stats(), what .. ": w3 does not answer after its restart")
end
fails("ring", ar.train, { algo = "ring" })
fails("dpsgd", dc.train, { algo = "dpsgd", graph = "ring" })

hn.log("algo_faults ok")
