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

-- The fault schedule runs on the training's progress (steps.csv rows so
-- far, through at_start's clock), never on wall-clock times: on a loaded
-- host a time-based kill may land before any step or after the end.
-- w3 dies after its third step; while it is dead, w1 must make STEPS_DEAD
-- steps (twice, with w3's count taken in between), counted once w3's
-- task has ended (clock.stepping: the rows of pushes on their way at the
-- kill are in by then); then w3 is restarted and must make
-- STEPS_BACK steps, and the schedule stops the training.
local STEPS_DEAD, STEPS_BACK = 3, 3
-- A bound only: the schedule stops every training that goes on.
local BOUND_S = 3 * T.LIVENESS_S

local function goes_on_schedule(clock, at)
  T.after_steps(clock, "w3", 3, "w3's first steps")
  w[3]:kill()
  -- the rows of pushes on their way at the kill are written as w3's task
  -- ends, which a loaded host may delay past w1's next steps
  T.wait_for(clock, "w3's task to end after its kill", function() return not clock.stepping("w3") end)
  T.after_steps(clock, "w1", STEPS_DEAD, "w1 training while w3 is dead")
  at.w3_dead = clock.steps_of("w3")
  T.after_steps(clock, "w1", STEPS_DEAD, "w1 training while w3 is dead")
  at.w3_dead_end = clock.steps_of("w3")
  w[3]:restart()
  T.after_steps(clock, "w3", STEPS_BACK, "w3 training after its restart")
end

local function options(prefix, extra, fire)
  return T.with({ workers = w, model = T.model, dataset = T.dataset, batch = 32, seconds = BOUND_S,
                  worker_opt = { method = "sgd", lr = 0.2 }, eval_every = 10, eval_limit = 300,
                  prefix = prefix, progress = false, at_start = fire }, extra)
end

-- Trains through the schedule; the others go on while w3 is dead (the
-- schedule waits for their steps), w3 makes none then and trains again
-- after its restart.
local function goes_on(what, train, extra)
  local prefix = what:gsub("[^%w]", "_") .. "_"
  local fire, at = T.schedule(goes_on_schedule, true)
  local s = train(options(prefix, extra, fire))
  T.schedule_done(at, what)
  T.eq(s.stop_reason, "schedule done", what .. ": stop reason")
  T.eq(at.w3_dead_end - at.w3_dead, 0, what .. ": steps of w3 while dead")
  local rows = 0
  for _, r in ipairs(T.csv(prefix .. "steps")) do
    if r.worker == "w3" then rows = rows + 1 end
  end
  assert(rows >= at.w3_dead_end + STEPS_BACK, what .. ": w3's rows in steps.csv: " .. rows)
  T.eq(s.workers_alive, 4, what .. ": workers alive at the end")
  assert(s.final_loss < s.initial_loss, what .. ": did not learn")
  return s
end

goes_on("ssp", ps.train, { server = cloud, mode = "ssp", staleness = 2 })
goes_on("fastest-k", ps.train, { server = cloud, mode = "fastest-k", k = 2 })
goes_on("adaptive-k", ps.train, { server = cloud, mode = "adaptive-k" })
goes_on("easgd", dc.train, { algo = "easgd", center = cloud })
goes_on("hier", hier.train, { cloud = cloud, edges = edges, tau1 = 2, tau2 = 1 })

-- Synchronous ones fail the step, naming the dead worker: w3 dies after
-- its third step and is restarted once the training has ended.
local function fails_schedule(clock)
  T.after_steps(clock, "w3", 3, "w3's first steps")
  w[3]:kill()
  local t0 = hn.now()
  while not clock.done() do
    if hn.now() - t0 > T.LIVENESS_S then error("the training went on without w3", 0) end
    hn.sleep(0.01)
  end
  w[3]:restart()
end
local function fails(what, train, extra)
  local fire, at = T.schedule(fails_schedule)
  local ok, err = pcall(train, options(what .. "_", extra, fire))
  assert(not ok, what .. ": trained on through a dead worker")
  assert(tostring(err):find("w3", 1, true), what .. ": the error does not name w3: " .. tostring(err))
  T.schedule_done(at, what)
  assert(w[3]:stats(), what .. ": w3 does not answer after its restart")
end
fails("ring", ar.train, { algo = "ring" })
fails("dpsgd", dc.train, { algo = "dpsgd", graph = "ring" })

hn.log("algo_faults ok")
