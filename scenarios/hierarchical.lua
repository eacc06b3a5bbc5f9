-- hierarchical: hierarchical averaging on a terminal / edge / cloud tree
-- against a flat parameter server on the same network. The network is the
-- system paper's (../shared/papers/system-paper-hierarchical-ddl.txt:
-- terminal, edge and cloud tiers); the algorithm is not from the paper
-- collection: hierarchical averaging with edge and cloud periods is
-- HierFAVG (Liu et al. 2020), which no file of ../shared/papers describes.
--
-- A cloud, three edges and four terminals per edge. Terminal links are slow
-- (10 Mbit/s, 10 ms), edge-cloud links faster (100 Mbit/s, 20 ms). Flat BSP
-- (every terminal pushes to the cloud every step) against hierarchical
-- averaging with edge periods tau1 = 2 and tau1 = 8 local steps (the cloud
-- averages every tau2 = 2 edge rounds), mlp:784-128-10 on Fashion-MNIST,
-- the same emulated time for each.
--
--   tools/run scenarios/hierarchical.lua [--set name=value ...]
--     seconds=40     emulated seconds per training (quick: 4)
--     target=0.75    the accuracy whose time is measured (quick: 0.5)
--     quick=false    the reduced run of the test suite (4 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected: the flat server's steps are bound by twelve models crossing the
-- cloud links each step; hierarchical averaging keeps most traffic at the
-- edges and makes many more local steps in the same time, the longer edge
-- period more still, at the price of models drifting apart between averages
-- (its accuracy per step is lower, per second higher). summary.json: per
-- run steps, local steps per worker, bytes, final accuracy, time to the
-- target (null when not reached).
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local hier = require("hiernet.algo.hier")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 4 or 40)
local target = hn.param("target", quick and 0.5 or 0.75)

local net = hn.network{ name = "hierarchical", backend = ex.backend(), seed = 1 }
local t = topo.hier(net, { clouds = 1, edges_per_cloud = 3, terminals_per_edge = 4,
                           links = { cloud_edge = { bw = "100Mbit", delay = "20ms" },
                                     edge_terminal = { bw = "10Mbit", delay = "10ms" } } })
net:start()
local common = { workers = t.terminal, model = "mlp:784-128-10", dataset = { name = "fashion-mnist" },
                 batch = 64, seconds = seconds, target_accuracy = target, stop_at_target = false,
                 worker_opt = { method = "sgd", lr = 0.1 }, eval_limit = 1000, final_eval_limit = 2000,
                 progress = not quick }
local runs = {
  { label = "flat ps-bsp", fn = ps.train, extra = { server = t.cloud[1], mode = "bsp", eval_every = 5, prefix = "flat_" } },
  { label = "hier tau1=2", fn = hier.train, extra = { cloud = t.cloud[1], tau1 = 2, tau2 = 2, eval_every = 1, prefix = "hier2_" } },
  { label = "hier tau1=8", fn = hier.train, extra = { cloud = t.cloud[1], tau1 = 8, tau2 = 2, eval_every = 1, prefix = "hier8_" } },
}
local results = {}
for _, run in ipairs(runs) do
  local o = {}
  for k, v in pairs(common) do o[k] = v end
  for k, v in pairs(run.extra) do o[k] = v end
  local s = run.fn(o)
  -- hier's steps count every terminal's local steps (a steps.csv row is
  -- one edge round of tau1 of them); the flat server's rows are one each.
  local per_worker = s.tau1 and s.steps or s.worker_steps / #t.terminal
  results[#results + 1] = ex.row(run.label, s, { local_steps_per_worker = per_worker })
end
net:stop()
ex.table(string.format("hierarchical: 12 terminals, %d s each, target %.2f", seconds, target), results,
         { "label", "steps", "bytes", "time_to_target_s", "final_accuracy" })
ex.finish{ scenario = "hierarchical", seconds = seconds, target_accuracy = target, results = results }
