-- paper_speedup: the adaptive-k paper's speed-up figures (speed-up over BSP
-- of the time to a target accuracy, per model and network; its Figs. 8-11)
-- in the settings of its Table 4 (../shared/papers/adaptive-k-momentum-
-- sync.txt, Section 5.2 and Tables 2-4; the settings themselves:
-- scenarios/paper_table4.lua and lua/hiernet/papers/adaptive_k.lua).
--
-- Each row's workers compute its zoo model by the paper's device profile
-- and its bytes cross the emulated links, while the surrogate
-- mlp:784-128-10 learns Fashion-MNIST alongside (learn = ..., docs/lua-
-- api.md "Profiled compute"): the timing, staleness and arrival order are
-- the big model's, the accuracy the surrogate's. The speed-up of a mode is
-- BSP's time to the target / the mode's, both on the run's clock; it
-- compares the synchronization models under one timing, it does not
-- predict the paper's CNNs' time to their accuracy (docs/fidelity.md
-- "Profiled compute and the surrogate"). The server aggregates at its
-- host CPU's profile (as paper_table4's server=profile). EASGD (the paper's
-- EAO, mode easgd) is decentral's, its centre on the server, the row's
-- interval as its period (paper_table4); it evaluates the centre every
-- interval local steps, when the centre has taken an exchange of each.
--
--   tools/run scenarios/paper_speedup.lua [--set name=value ...]
--     rows=all       a comma-separated subset of row numbers 1-7 (quick: 2)
--     modes=all      asp, bsp, ssp, adaptive-k, drop-worker, easgd (quick:
--                    bsp,adaptive-k;
--                    bsp always runs, first)
--     workers=32     workers per row (quick: 4)
--     target=0.7     the surrogate's test accuracy whose time is measured
--                    (quick: 0.25, which BSP reaches at its second step)
--     seconds=600    emulated seconds per training at most (quick: 15)
--     async_lr=scaled  the workers' rate of ASP and SSP: scaled (0.1 /
--                    workers: each of their updates applies one worker's
--                    gradient where BSP's applies the mean of all of them,
--                    so a gradient moves the surrogate as far in both) or
--                    paper (0.1, Table 3's one rate for every mode, at
--                    which the surrogate does not learn asynchronously at
--                    32 workers)
--     quick=false    the reduced run of the test suite
--     backend=auto   auto, kernel, user or none
--     plots=true     plots (speedup.png: the speed-up figure) and the
--                    report page at the end
--
-- Expected (docs/cookbook.md "paper_speedup" says what was run): at the
-- paper's size only row 3 was run: BSP reached 0.7 in 197 emulated s (D =
-- 2); ASP at the scaled rate 0.1 / 32 in 84.5 s, a speed-up of 2.33; at
-- BSP's rate 0.1 (async_lr=paper) ASP and adaptive-k did not learn (no
-- speed-up). A mode that does not reach the
-- target within `seconds` has no time and no speed-up (null), and so does
-- every mode of a row whose BSP did not reach it.
-- summary.json: per (row, mode) the time to the target, the speed-up over
-- BSP, the final accuracy, the updates; speedup_bars (the figure's data:
-- per mode the rows' speed-ups).
local hn = require("hiernet")
local ex = require("hiernet.experiment")
local paper = require("hiernet.papers.adaptive_k")

local quick = hn.param("quick", false)
local n_workers = hn.param("workers", quick and 4 or 32)
local target = hn.param("target", quick and 0.25 or 0.7)
local seconds = hn.param("seconds", quick and 15 or 600)
local row_numbers = ex.list_param("rows", quick and "2" or "all", { 1, 2, 3, 4, 5, 6, 7 })
local modes = ex.list_param("modes", quick and "bsp,adaptive-k" or "all", paper.MODES)
local async_lr = hn.param("async_lr", "scaled")
if async_lr ~= "paper" and async_lr ~= "scaled" then
  error("--set async_lr: '" .. tostring(async_lr) .. "' is neither paper nor scaled", 0)
end
local LR = 0.1 -- Table 3's
-- A mode's worker rate: LR, or for ASP and SSP with async_lr=scaled LR / N.
local function rate_of(mode)
  if async_lr == "scaled" and (mode == "asp" or mode == "ssp") then return LR / n_workers end
  return LR
end
paper.check(row_numbers, modes, n_workers)
-- BSP first (added when not asked for): every speed-up is over its time.
local ordered = { "bsp" }
for _, m in ipairs(modes) do
  if m ~= "bsp" then ordered[#ordered + 1] = m end
end
modes = ordered

-- One mode of one row on its started network; returns the training's summary.
local function train(number, mode, server, workers)
  local p = paper.ROWS[number]
  local eval_every = 1
  if paper.PER_PUSH[mode] then eval_every = n_workers end
  if mode == "easgd" then eval_every = p.interval end
  local o = { workers = workers, model = p.model, compute = "profile",
              learn = "mlp:784-128-10", dataset = { name = "fashion-mnist" }, batch = p.batch,
              seconds = seconds, target_accuracy = target, worker_opt = { method = "sgd", lr = rate_of(mode) },
              eval_every = eval_every, eval_limit = 1000, final_eval_limit = 2000,
              prefix = string.format("r%d_%s_", number, mode:gsub("-", "_")), progress = not quick }
  return paper.train(number, mode, server, o)
end

local results, bars_by_mode = {}, {}
for _, r in ipairs(row_numbers) do
  local number = tonumber(r)
  local p = paper.ROWS[number]
  local net, server, workers = paper.build(paper.CLUSTERS[p.cluster], n_workers, { name = "speedup_" .. number,
    backend = ex.backend(), server_profile = true })
  local bsp_time
  for _, mode in ipairs(modes) do
    local s = train(number, mode, server, workers)
    if mode == "bsp" then bsp_time = s.time_to_target_s end
    local speedup = (bsp_time and s.time_to_target_s) and bsp_time / s.time_to_target_s or nil
    results[#results + 1] = ex.row(string.format("%d %s %s", number, p.model, mode), s, {
      row = number, model = p.model, cluster = p.cluster, mode = mode, workers = n_workers,
      speedup_vs_bsp = speedup, lr = rate_of(mode), limited = (s.overload or {}).limited })
    if speedup then
      bars_by_mode[mode] = bars_by_mode[mode] or { label = mode, points = {} }
      table.insert(bars_by_mode[mode].points, { number, speedup })
    end
  end
  net:stop()
end
local bars = {}
for _, mode in ipairs(modes) do bars[#bars + 1] = bars_by_mode[mode] end
ex.table(string.format("paper_speedup: %d workers, time to %.2f (surrogate mlp:784-128-10), %d s at most", n_workers,
                       target, seconds), results,
         { "label", "time_to_target_s", "speedup_vs_bsp", "final_accuracy", "updates_applied", "limited" })
ex.finish{ scenario = "paper_speedup", paper = "adaptive-k momentum-sync, Figs. 8-11", workers = n_workers,
           target_accuracy = target, seconds = seconds, async_lr = async_lr, results = results,
           speedup_bars = bars }
