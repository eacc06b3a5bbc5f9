-- ps_server_lr: the server learning rate of a parameter server: the system
-- paper's Figure 3 (../shared/papers/system-paper-hierarchical-ddl.txt, the
-- distributed deep learning system on terminal / edge / cloud tiers:
-- "training curve of different learning rate of parameter server").
--
-- Workers push their sgd updates (worker rate fixed at 0.1) to a server that
-- applies them with its own rate: 0.1, 0.5 and 1.0, synchronously (BSP) and
-- asynchronously (ASP). Four terminals under two edges (100 Mbit/s, 5 ms),
-- Fashion-MNIST, mlp:784-128-10, the same emulated time for each.
--
--   tools/run scenarios/ps_server_lr.lua [--set name=value ...]
--     seconds=30     emulated seconds per training (quick: 4)
--     quick=false    the reduced run of the test suite (rates 0.1 and 1.0, 4 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected (the paper's finding): a server rate below 1 wastes part of the
-- workers' updates, so 0.1 learns slowest in both modes; under BSP 1.0 uses
-- them fully and reaches 0.75 first; under ASP, where updates are stale,
-- 0.5 and 1.0 are close (measured: 0.5 first); 1.0 swings the most from one
-- evaluation to the next (the `swing` column: mean absolute change of
-- accuracy between evaluations over the second half of the run).
-- summary.json: one result per (mode, server rate) with final and best
-- accuracy, time to 0.75 (null when not reached), swing (null with fewer
-- than two evaluations in the second half) and updates; eval curves in
-- <mode>_lr<rate>_eval.csv.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 4 or 30)
local rates = quick and { 0.1, 1.0 } or { 0.1, 0.5, 1.0 }

local net = hn.network{ name = "server_lr", backend = ex.backend(), seed = 1 }
local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2,
                           links = { cloud_edge = { bw = "1Gbit", delay = "2ms" },
                                     edge_terminal = { bw = "100Mbit", delay = "5ms" } } })
net:start()

-- Mean absolute change of accuracy between consecutive evaluations, over
-- the second half of the evaluations.
local function swing(prefix)
  local rows = ex.read_csv(prefix .. "eval")
  local first, total, n = math.max(2, #rows // 2 + 1), 0, 0
  for i = first, #rows do
    total, n = total + math.abs(rows[i].accuracy - rows[i - 1].accuracy), n + 1
  end
  return n > 0 and total / n or nil
end

local results = {}
for _, mode in ipairs{ "bsp", "asp" } do
  for _, rate in ipairs(rates) do
    local prefix = string.format("%s_lr%s_", mode, tostring(rate))
    local s = ps.train{ server = t.cloud[1], workers = t.terminal, mode = mode, model = "mlp:784-128-10",
                        dataset = { name = "fashion-mnist" }, batch = 64, seconds = seconds,
                        worker_opt = { method = "sgd", lr = 0.1 }, server_opt = { method = "sgd", lr = rate },
                        target_accuracy = 0.75, stop_at_target = false,
                        eval_every = quick and 4 or 10, eval_limit = 1000,
                        final_eval_limit = quick and 1000 or 0, prefix = prefix, progress = not quick }
    results[#results + 1] = ex.row(mode .. " server lr " .. rate, s, { mode = mode, server_lr = rate,
      swing = swing(prefix) })
  end
end
net:stop()
ex.table("ps_server_lr: worker lr 0.1, " .. seconds .. " s each", results,
         { "label", "final_accuracy", "best_accuracy", "time_to_target_s", "swing", "updates_applied" })
ex.finish{ scenario = "ps_server_lr", paper = "system paper, Figure 3", seconds = seconds, results = results }
