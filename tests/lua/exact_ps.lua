-- ps.train computes what docs/algorithms.md says, exactly: the trained
-- model equals a sequential replay (tests/lua/lib/reference.lua) to float
-- tolerance. The replay takes from steps.csv only what the timing decided
-- (which model version each push was computed on, which version the server
-- took it at, whether it took effect) and recomputes every update and every
-- server step one command at a time on reference peers of its own: the same
-- shards, initial model and mini-batches. For every mode, with equal speeds
-- and with one worker 20 times slower, on fresh peers each time; with
-- sharded servers (every mode's way of pushing), local steps, momentum
-- worker and server optimizers, top-k compression with error feedback,
-- adaptive-k's momentum server (without its BB rate); and BSP's final model
-- is the same whatever the speeds and with the same seed (determinism).
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

local N, STEPS = 3, 6
local TOL = 2e-5
local SLOW = { 1, 0.05, 1 } -- worker 2 at 1/20 of the speed
local SEED = 7

local runs, failures = 0, {}
local irregular = 0 -- pushes that were late, dropped or stale: the arrival order mattered

-- A fresh network: one server or `servers` of them, N workers (speeds), N
-- reference peers.
local function network(o)
  local net = hn.network{ name = "exactps" .. runs, backend = "none" }
  local servers = {}
  for s = 1, o.servers or 1 do
    servers[s] = net:node("server" .. s, { tier = "cloud" })
  end
  local workers = {}
  for i = 1, N do
    workers[i] = net:node("w" .. i, { tier = "terminal", speed = o.speeds and o.speeds[i] or nil })
    for _, server in ipairs(servers) do net:link(server, workers[i]) end
  end
  local refs = R.nodes(net, N, servers[1])
  net:start()
  return net, servers, workers, refs
end

local function train(servers, workers, o, prefix)
  local opts = { workers = workers, mode = o.mode, model = T.model, dataset = T.dataset, seed = SEED,
                 batch = 16, steps = o.steps or STEPS, local_steps = o.local_steps,
                 worker_opt = o.worker_opt or { lr = 0.1 }, server_opt = o.server_opt,
                 compress = o.compress, k = o.k, late = o.late, drop_fraction = o.drop_fraction,
                 staleness = o.staleness, bb = o.bb, theta = o.theta,
                 eval_every = 1000, eval_limit = 50, prefix = prefix, progress = false }
  if #servers > 1 then opts.servers = servers else opts.server = servers[1] end
  return ps.train(opts)
end

-- The replay's options for mode o.mode, from docs/algorithms.md's table:
-- ASP and SSP apply each push alone, adaptive-k has a momentum server
-- (default gamma 0.9, late weight gamma^tau), fastest-k merges a late push
-- with weight 1.
local function replay_options(o)
  local so = o.server_opt or { method = "sgd", lr = o.mode ~= "adaptive-k" and 1 or nil }
  local r = { worker_opt = o.worker_opt or { lr = 0.1 }, local_steps = o.local_steps, server_opt = so,
              compress = o.compress, applies_each = o.mode == "asp" or o.mode == "ssp",
              momentum_server = o.mode == "adaptive-k", late_weight = function() return 1 end }
  if (o.servers or 1) > 1 then r.ranges = function(size) return ps.shard_ranges(size, o.servers) end end
  r.bb = o.mode == "adaptive-k" and o.bb ~= false -- adaptive-k's BB rate, unless bb = false
  if r.momentum_server then
    r.gamma = so.momentum or 0.9
    r.late_weight = function(tau) return r.gamma ^ tau end
  end
  return r
end

-- Checks the k of every round the training reported against the replay's.
local function check_ks(pushes, ks, what)
  for _, p in ipairs(pushes) do
    if p.kind ~= "none" then
      T.eq(p.k, ks[p.taken + 1], string.format("%s: k of the round worker %d's step %d joined", what, p.worker, p.step))
    end
  end
end

-- A plain-sgd worker holds a model version it pulled (its model is never
-- written by its step): the last one its rows name, or the final one sent
-- after the last round.
local function check_workers(workers, refs, pushes, rounds, what)
  local last = {}
  for _, p in ipairs(pushes) do
    if p.version then last[p.worker] = math.max(last[p.worker] or 0, p.version) end
  end
  for i, w in ipairs(workers) do
    local d_final = R.max_diff(w, "w", refs[1], "v." .. rounds)
    local d_last = last[i] and R.max_diff(w, "w", refs[1], "v." .. last[i]) or math.huge
    if not (math.min(d_final, d_last) <= TOL) then
      failures[#failures + 1] = string.format("%s: worker %d's model is no version the reference made " ..
        "(%.3g from the final, %.3g from version %s)", what, i, d_final, d_last, tostring(last[i]))
    end
  end
end

-- Trains case o on a fresh network, replays it, checks; returns the final
-- model's values.
local function case(what, o)
  runs = runs + 1
  local net, servers, workers, refs = network(o)
  local prefix = "c" .. runs .. "_"
  local ok, s = pcall(train, servers, workers, o, prefix)
  if not ok then -- listed with the others: every case runs, and the report says all that failed
    failures[#failures + 1] = string.format("%s: the training failed: %s", what, tostring(s))
    net:stop()
    return {}
  end
  if s.steps ~= (o.steps or STEPS) then
    failures[#failures + 1] = string.format("%s: %d server steps, want %d (stop reason %s)", what, s.steps,
                                            o.steps or STEPS, tostring(s.stop_reason))
    net:stop()
    return {}
  end
  local index = {}
  for i, w in ipairs(workers) do index[w.name] = i end
  local ro = replay_options(o)
  local pushes = R.ps_pushes(T.csv(prefix .. "steps"), index, ro.applies_each)
  local ref = R.new(refs, { model = T.model, dataset = T.dataset, seed = SEED, batch = 16 })
  local ks = ref:ps_replay(pushes, s.steps, ro)
  check_ks(pushes, ks, what)
  if ro.bb_mismatch then
    failures[#failures + 1] = what .. ": BB rates differ: " .. table.concat(ro.bb_mismatch, "; ")
  end
  if ro.bb then
    hn.log(string.format("%s: %d BB rates not compared (an Armijo near tie)", what, ro.bb_skipped or 0))
    -- near ties are the exception: a case that compared no rate checked nothing of BB
    if (ro.bb_skipped or 0) >= #pushes then failures[#failures + 1] = what .. ": no BB rate compared" end
  end
  for _, p in ipairs(pushes) do
    if p.kind ~= "fresh" or p.taken ~= p.version then irregular = irregular + 1 end
  end
  local final_node, final = servers[1], "w"
  if #servers > 1 then final_node, final = workers[1], "w_full" end
  local diff = R.distance(final_node, final, refs[1], "srv")
  local moved = R.distance(refs[1], "srv", refs[1], "w.init")
  local rel = R.max_diff(final_node, final, refs[1], "srv")
  hn.log(string.format("%s: |w - w_ref| = %.3g, |w_ref - w_init| = %.3g (max rel. %.3g)", what, diff, moved, rel))
  if not (rel <= TOL) then
    failures[#failures + 1] = string.format("%s: the model differs from the reference by %.3g (tolerance %g)",
                                            what, rel, TOL)
  end
  if o.check_workers then check_workers(workers, refs, pushes, s.steps, what) end
  local values = R.read_all(final_node, final)
  net:stop()
  return values
end

local function same(a, b, what)
  if #a == 0 or #b == 0 then return end -- a training that failed: listed already
  T.eq(#a, #b, what .. ": sizes")
  for e = 1, #a do
    if math.abs(a[e] - b[e]) > TOL * math.max(1, math.abs(b[e])) then
      failures[#failures + 1] = string.format("%s: element %d: %.9g and %.9g", what, e - 1, a[e], b[e])
      return
    end
  end
end

-- Equal speeds and worker 2 at 1/20: the same checks.
local function both(what, o)
  local even = case(what .. ", equal speeds", o)
  local slow_o = setmetatable({ speeds = SLOW }, { __index = o })
  local slow = case(what .. ", worker 2 at 1/20", slow_o)
  return even, slow
end

-- BSP: the same final model whatever the speeds, and again with the same seed.
local even, slow = both("bsp", { mode = "bsp", check_workers = true })
same(even, slow, "bsp: the same model whatever the speeds")
same(even, case("bsp again, equal speeds", { mode = "bsp" }), "bsp: the same model with the same seed")
-- Two servers: each holds a range (the `at` offsets of pulls and pushes).
local even2, slow2 = both("bsp, 2 servers", { mode = "bsp", servers = 2, check_workers = true })
same(even2, slow2, "bsp, 2 servers: the same model whatever the speeds")
same(even, even2, "bsp: 2 servers train the model one does")
both("bsp, 2 servers, momentum server optimizer",
     { mode = "bsp", servers = 2, server_opt = { method = "momentum", lr = 0.5, momentum = 0.9 } })
-- Two servers in the modes whose pushes go through a slot per worker (a
-- range lands only in a tensor that exists: on fresh servers every first
-- push was refused), and with each range compressed alone.
both("fastest-k k = 2, 2 servers", { mode = "fastest-k", k = 2, servers = 2 })
both("asp, 2 servers", { mode = "asp", servers = 2, steps = 12 })
both("ssp staleness 1, 2 servers, top-k 10% with error feedback",
     { mode = "ssp", staleness = 1, servers = 2, steps = 12, compress = { method = "topk", ratio = 0.1 } })
both("drop-worker 1/3, 2 servers, top-k 10%, momentum worker optimizer, 2 local steps",
     { mode = "drop-worker", drop_fraction = 0.34, servers = 2, local_steps = 2,
       worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 }, compress = { method = "topk", ratio = 0.1 } })
both("adaptive-k, 2 servers", { mode = "adaptive-k", bb = false, servers = 2, steps = 8 })
both("fastest-k k = 2", { mode = "fastest-k", k = 2, check_workers = true })
both("fastest-k k = 2, late merged", { mode = "fastest-k", k = 2, late = "merge" })
both("drop-worker 1/3", { mode = "drop-worker", drop_fraction = 0.34 })
both("bsp, 3 local steps", { mode = "bsp", local_steps = 3 })
both("bsp, momentum worker optimizer, 2 local steps",
     { mode = "bsp", local_steps = 2, worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 } })
both("bsp, top-k 10% with error feedback", { mode = "bsp", compress = { method = "topk", ratio = 0.1 } })
both("fastest-k k = 2, top-k 10% with error feedback",
     { mode = "fastest-k", k = 2, compress = { method = "topk", ratio = 0.1 } })
both("adaptive-k (momentum server, no BB)", { mode = "adaptive-k", bb = false, steps = 8 })
-- With its Barzilai-Borwein rates: every worker's rate is recomputed (and
-- must be its row's lr).
both("adaptive-k with BB rates", { mode = "adaptive-k", steps = 8 })
both("asp", { mode = "asp", steps = 12, server_opt = { method = "sgd", lr = 0.5 }, check_workers = true })
both("ssp staleness 1", { mode = "ssp", staleness = 1, steps = 12 })
both("asp, momentum worker optimizer, 2 local steps",
     { mode = "asp", steps = 12, local_steps = 2, worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 } })

-- The uneven speeds did make pushes late, dropped or stale (the replay
-- followed an order the timing chose, not only the one of equal speeds).
T.le(1, irregular, "pushes late, dropped or stale over all cases")
if #failures > 0 then error(#failures .. " of the checks failed:\n  " .. table.concat(failures, "\n  ")) end
hn.log(string.format("%d trainings matched their replay (%d pushes late, dropped or stale)", runs, irregular))
