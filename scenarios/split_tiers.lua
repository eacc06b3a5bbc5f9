-- split_tiers: where to cut LeNet across terminal / edge / cloud. Split
-- learning (hiernet.algo.split) with the model cut into three parts, the
-- terminal holding the data and the first layers, the edge the middle, the
-- cloud the rest; Neurosurgeon's method (Kang et al., ASPLOS 2017: per-layer
-- compute times measured on each device, activation sizes over the actual
-- links) predicts the time of a step for every cut (split.plan), the sweep
-- measures it, and the best predicted cut trains against data-parallel
-- PS (BSP, the terminal's gradients to the cloud) and hierarchical
-- averaging (HierFAVG) on the same network and data.
--
-- A terminal at a quarter of a core's speed behind a 20 Mbit/s, 5 ms
-- uplink to its edge (speed 1), the edge 1 Gbit/s, 10 ms from the cloud
-- (speed 2; the run is dilated 2 times so that it can be). cnn:lenet on Fashion-MNIST, batch 32, one micro-batch per
-- step (split learning: the parts run in turn).
--
--   tools/run scenarios/split_tiers.lua [--set name=value ...]
--     steps=8        measured steps per cut of the sweep (quick: 3)
--     cuts=all       how many cuts of the ranking the sweep measures
--                    (quick: the 3 best predicted and the worst)
--     seconds=60     emulated seconds of each training (quick: 4)
--     target=0.8     the accuracy whose time is measured (quick: 0.3)
--     quick=false    the reduced run of the test suite
--     backend=auto   auto, kernel, user or none
--     dilation=2     the run's time dilation (at least the cloud's speed)
--     model=cnn:lenet  the model cut (cnn:resnet20: 13 places to cut, its
--                    residual blocks whole, 66 cuts)
--     plots=true     plots (cut_time: predicted and measured per cut) and
--                    the report page at the end
--
-- Expected: the terminal's uplink dominates every cut that leaves large
-- activations on it (after conv1 a batch of 32 sends 600 KB, 0.25 s at
-- 20 Mbit/s each way), so the best cuts keep the first layers up to a pool
-- or the flatten on the terminal and put the dense layers further up;
-- measured and predicted times rank the cuts alike (measured/predicted
-- near 1 where the links dominate; above 1 where fixed per-command costs
-- weigh, which the prediction leaves out). summary.json: cuts (per cut
-- parts, predicted_s, measured_s, ratio), cut_bars (the figure's data),
-- results (per training label, steps, final accuracy, time to the target,
-- null when not reached).
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local ps = require("hiernet.algo.ps")
local hier = require("hiernet.algo.hier")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local steps = hn.param("steps", quick and 3 or 8)
local seconds = hn.param("seconds", quick and 4 or 60)
local target = hn.param("target", quick and 0.3 or 0.8)
local model, batch = hn.param("model", "cnn:lenet"), 32

-- Dilation 2: the cloud computes twice as fast as a core of this host.
local net = hn.network{ name = "tiers", backend = ex.backend(), seed = 1, dilation = hn.param("dilation", 2) }
local t1 = net:node("t1", { tier = "terminal", speed = 0.25 })
local e1 = net:node("e1", { tier = "edge", speed = 1 })
local c1 = net:node("c1", { tier = "cloud", speed = 2 })
local up = net:link(t1, e1, { bw = "20Mbit", delay = "5ms" })
local core = net:link(e1, c1, { bw = "1Gbit", delay = "10ms" })
net:start()

local plan = split.plan{ model = model, nodes = { t1, e1, c1 }, links = { up, core }, batch = batch }
hn.log(string.format("split_tiers: %d cuts; best predicted %s: %.3f s per step", #plan.cuts,
                     table.concat(plan.best.parts, " | "), plan.best.predicted_s))

-- The sweep: which of the ranked cuts to measure.
local picks = {}
local want = hn.param("cuts", quick and 3 or "all")
local n_best = want == "all" and #plan.cuts or math.min(tonumber(want), #plan.cuts)
for i = 1, n_best do picks[#picks + 1] = i end
if quick and #plan.cuts > n_best then picks[#picks + 1] = #plan.cuts end

local dataset = { name = "fashion-mnist" }
local cuts, predicted, measured = {}, {}, {}
for _, rank in ipairs(picks) do
  local c = plan.cuts[rank]
  local parts = {}
  for k, node in ipairs({ t1, e1, c1 }) do parts[k] = { node = node, layers = c.parts[k] } end
  local s = split.train{ parts = parts, model = model, dataset = dataset, batch = batch, microbatches = 1,
                         steps = steps, eval_every = 100000, eval_limit = 100, final_eval_limit = 100,
                         prefix = "cut" .. rank .. "_", progress = false }
  cuts[#cuts + 1] = { rank = rank, parts = table.concat(c.parts, " | "), predicted_s = c.predicted_s,
                      compute_s = c.compute_s, transfer_s = c.transfer_s, measured_s = s.step_s,
                      ratio = s.step_s / c.predicted_s }
  predicted[#predicted + 1] = { rank, c.predicted_s }
  measured[#measured + 1] = { rank, s.step_s }
end
ex.table("split_tiers: " .. model .. " cut over terminal | edge | cloud, seconds per step", cuts,
         { "rank", "parts", "predicted_s", "measured_s", "ratio", "compute_s", "transfer_s" })

-- The best predicted cut against data parallelism on the same network.
local common = { workers = { t1 }, model = model, dataset = dataset, batch = batch, seconds = seconds,
                 target_accuracy = target, stop_at_target = false, worker_opt = { method = "sgd", lr = 0.05 },
                 eval_limit = 500, final_eval_limit = 2000, progress = not quick }
local best = {}
for k, node in ipairs({ t1, e1, c1 }) do best[k] = { node = node, layers = plan.best.parts[k] } end
local runs = {
  { label = "split " .. table.concat(plan.best.parts, "|"), fn = split.train,
    extra = { parts = best, microbatches = 1, eval_every = 10, prefix = "split_" } },
  { label = "ps-bsp", fn = ps.train, extra = { server = c1, mode = "bsp", eval_every = 10, prefix = "ps_" } },
  { label = "hier tau1=4", fn = hier.train,
    extra = { cloud = c1, edges = { e1 }, tau1 = 4, tau2 = 1, eval_every = 2, prefix = "hier_" } },
}
local results = {}
for _, run in ipairs(runs) do
  local o = {}
  for k, v in pairs(common) do o[k] = v end
  for k, v in pairs(run.extra) do o[k] = v end
  if run.fn == split.train then o.workers = nil end
  results[#results + 1] = ex.row(run.label, run.fn(o))
end
net:stop()
ex.table(string.format("split_tiers: training for %d s, target %.2f", seconds, target), results,
         { "label", "steps", "time_to_target_s", "final_accuracy" })
ex.finish{ scenario = "split_tiers", model = model, batch = batch, seconds = seconds, target_accuracy = target,
           cuts = cuts, cut_bars = { { label = "predicted", points = predicted }, { label = "measured", points = measured } },
           results = results }
