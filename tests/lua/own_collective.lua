-- A training family of one's own on the job's round-and-fault frame: the
-- module tests/lua/mods/mean_allreduce.lua (in this scenario's folder,
-- loaded without a rebuild; docs/writing-algorithms.md shows it word for
-- word) uses J:watch_faults, J:rounds, J:abort_between, ar.plan / ar.run,
-- ar.group_indices, ar.record_step and ar.resync, and a server optimizer on
-- the workers' own model through optim{tensor=}. Its final model must equal a
-- sequential reference (tests/lua/lib/reference.lua) to 2e-5 relative: a
-- plain ring, and a hierarchical all-reduce over given groups with a slow
-- worker, momentum in both optimizers and local steps (the worker's
-- momentum must carry over, apart from the server's). steps.csv: one row
-- per worker and step, k = N. Bad groups fail with the checker's message.
-- Faults through the frame: with on_failure = "drop" a worker killed after
-- its second step leaves the others training to the end, every step after
-- it with k = N - 1 and the same model on all of them; with "fail" the
-- training ends with an error naming it.
local hn = require("hiernet")
local mine = require("mods.mean_allreduce")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

T.doc_example("writing-algorithms.md", "A new algorithm module", "mods/mean_allreduce.lua",
              "-- Mean all-reduce, a family")

local N, STEPS, TOL = 4, 4, 2e-5
local runs = 0

local function network(speeds)
  runs = runs + 1
  return R.star("own" .. runs, N, speeds, "cloud")
end

local function case(what, o)
  local net, workers, refs = network(o.speeds)
  local spec = { model = T.model, dataset = T.dataset, seed = 5, batch = 16 }
  local groups = o.groups and o.groups(workers)
  local s = mine.train{ workers = workers, algo = o.algo, groups = groups, model = spec.model,
                        dataset = spec.dataset, seed = spec.seed, batch = spec.batch, steps = STEPS,
                        local_steps = o.local_steps, worker_opt = o.worker_opt, server_opt = o.server_opt,
                        eval_every = 1000, eval_limit = 50, prefix = "c" .. runs .. "_", progress = false }
  T.eq(s.steps, STEPS, what .. ": steps")
  T.eq(s.updates_applied, N * STEPS, what .. ": updates applied")
  local rows = T.csv("c" .. runs .. "_steps")
  T.eq(#rows, N * STEPS, what .. ": steps.csv rows")
  for _, row in ipairs(rows) do T.eq(row.k, N, what .. ": k of " .. row.worker .. " step " .. row.step) end
  local ref = R.new(refs, spec)
  for _ = 1, STEPS do
    ref:sync_step{ worker_opt = o.worker_opt, local_steps = o.local_steps, server_opt = o.server_opt }
  end
  for i = 1, N do R.check_equal(workers[i], "w", refs[1], "w", TOL, what .. ", worker " .. i) end
  hn.log(string.format("%s: |w - reference| = %.3g for a training that moved %.3g", what,
                       R.distance(workers[1], "w", refs[1], "w"), ref:moved()))
  net:stop()
end

case("ring, sgd", { algo = "ring", worker_opt = { lr = 0.1 } })
case("hierarchical over given groups, worker 2 at 1/20, momentum in both optimizers, 2 local steps",
     { algo = "hierarchical", speeds = { 1, 0.05, 1, 1 }, local_steps = 2,
       groups = function(w) return { { w[1], w[2] }, { w[3], w[4] } } end,
       worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 },
       server_opt = { method = "momentum", lr = 1, momentum = 0.5 } })

-- The group checker, through the module.
do
  local net, workers = network()
  local ok, err = pcall(mine.train, { workers = workers, algo = "hierarchical", steps = 1, progress = false,
                                      groups = { { workers[1], workers[2] }, { workers[2], workers[3], workers[4] } } })
  assert(not ok and tostring(err):find("node 'w2' is in two groups", 1, true), tostring(err))
  ok, err = pcall(mine.train, { workers = workers, steps = 1, progress = false, groups = { { workers[1] } } })
  assert(not ok and tostring(err):find("peer 'w2' is in no group", 1, true), tostring(err))
  net:stop()
end
-- A worker killed in the middle: dropped (the others train on, on one
-- model), or the training's end (an error naming it).
do
  local net, workers = network()
  local function kill_w3(stop)
    return T.schedule(function(clock)
      T.after_steps(clock, "w3", 2, "w3's first steps")
      workers[3]:kill()
      if stop then T.wait_for(clock, "steps after the kill", function() return clock.steps() >= 6 end) end
    end, stop)
  end
  local function options(on_failure, fire)
    return { workers = workers, model = T.model, dataset = T.dataset, batch = 16, seconds = 3 * T.LIVENESS_S,
             worker_opt = { lr = 0.1 }, eval_every = 1000, eval_limit = 50, progress = false,
             on_failure = on_failure, prefix = "fault_" .. on_failure .. "_", at_start = fire }
  end
  local fire, at = kill_w3(true)
  local s = mine.train(options("drop", fire))
  T.schedule_done(at, "drop")
  T.eq(s.workers_alive, N - 1, "drop: workers alive")
  local killed_at, rows_after = nil, 0
  for _, row in ipairs(T.csv("fault_drop_steps")) do
    if row.worker == "w3" then killed_at = math.max(killed_at or 0, row.step) end
  end
  for _, row in ipairs(T.csv("fault_drop_steps")) do
    if row.step > killed_at then
      T.eq(row.k, N - 1, "drop: k of " .. row.worker .. " step " .. row.step)
      rows_after = rows_after + 1
    end
  end
  assert(rows_after >= 3 * (N - 1), "drop: rows after the kill: " .. rows_after)
  for _, i in ipairs{ 2, 4 } do R.check_equal(workers[i], "w", workers[1], "w", 0, "drop: worker " .. i .. "'s model") end
  workers[3]:restart()
  fire, at = kill_w3(false)
  local ok, err = pcall(mine.train, options("fail", fire))
  T.schedule_done(at, "fail")
  assert(not ok and tostring(err):find("worker w3 was killed", 1, true), "fail: " .. tostring(err))
  net:stop()
end
hn.log(string.format("%d trainings of mods/mean_allreduce.lua matched their reference", runs - 1))
