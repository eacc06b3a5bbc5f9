-- faults: how synchronization models live through faults. No paper of
-- ../shared/papers measures faults; the scenario builds on two of them:
-- system-paper-hierarchical-ddl.txt (the emulated terminal / edge / cloud
-- network as the experiment) and adaptive-k-momentum-sync.txt (synchronous,
-- bounded-asynchronous and asynchronous models, drop-worker among them),
-- and shows hiernet's fault features (partitions, killed nodes) on them.
--
-- Six terminals under two edges and a cloud server (terminal links
-- 20 Mbit/s, 5 ms; edges 1 Gbit/s, 2 ms). During each training, at the same
-- emulated times: terminal t2 is cut off from the rest (a partition) at 20%
-- of the run and healed at 50%; terminal t5 is killed at 30% and restarted
-- at 60%. Trained with ASP, SSP (s = 3), adaptive-k, BSP dropping away
-- workers (on_failure = "drop"), hierarchical averaging and push-sum gossip,
-- Fashion-MNIST, mlp:784-64-10. A last run, BSP with on_failure = "fail",
-- stops at the partition with an error naming t2.
--
--   tools/run scenarios/faults.lua [--set name=value ...]
--     seconds=30     emulated seconds per training (quick: 4)
--     quick=false    the reduced run of the test suite (ASP and BSP with
--                    "drop", 4 s each)
--     backend=auto   auto, kernel or user (none has no network to cut:
--                    the scenario then says so and shows nothing)
--     plots=true     plots and the report page at the end
--
-- Expected: every model but strict BSP goes on through both faults (the
-- other terminals keep stepping: steps.csv shows the gaps of t2 and t5 only),
-- takes both terminals back (they pull the current model), and ends near
-- the accuracy of a fault-free run; BSP with "fail" reports the cut-off
-- node. summary.json: per run the steps, updates, final accuracy and each
-- faulty terminal's steps while away and after its return; the fault times.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local dc = require("hiernet.algo.decentral")
local hier = require("hiernet.algo.hier")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 4 or 30)

local backend = ex.emulated_backend("faults", "partitions")
if not backend then return end
local net = hn.network{ name = "faults", backend = backend, seed = 1 }
local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
                           links = { cloud_edge = { bw = "1Gbit", delay = "2ms" },
                                     edge_terminal = { bw = "20Mbit", delay = "5ms" } } })
net:start()
local cloud, terms = t.cloud[1], t.terminal
local cut, dead = terms[2], terms[5]

-- The faults of one training, at shares of its length from its start (the
-- job runs at_start when its clock starts); `at` gets the run-clock times.
local function faults(at)
  return function()
    local start = hn.now()
    local function at_share(share) hn.sleep(math.max(0, start + share * seconds - hn.now())) end
    at_share(0.2); net:partition({ cut }, { cloud, t.edge[1], t.edge[2], terms[1], terms[3], terms[4],
                                            terms[5], terms[6] }); at.cut = hn.now()
    at_share(0.3); dead:kill(); at.kill = hn.now()
    at_share(0.5); net:heal(); at.heal = hn.now()
    at_share(0.6); dead:restart(); at.restart = hn.now()
    at.done = true
  end
end

-- Waits until a training's faults have all happened (a training that ends
-- first leaves the schedule running).
local function settle(at)
  while not at.done do hn.sleep(0.05) end
end

local function steps_in(rows, name, from, to)
  local n = 0
  for _, r in ipairs(rows) do
    if r.worker == name and r.time > from and r.time < to then n = n + 1 end
  end
  return n
end

local runs = {
  { label = "asp", fn = ps.train, o = { server = cloud, mode = "asp" } },
  { label = "ssp", fn = ps.train, o = { server = cloud, mode = "ssp", staleness = 3 } },
  { label = "adaptive-k", fn = ps.train, o = { server = cloud, mode = "adaptive-k" } },
  { label = "bsp-drop", fn = ps.train, o = { server = cloud, mode = "bsp", on_failure = "drop" } },
  { label = "hier", fn = hier.train, o = { cloud = cloud, tau1 = 4, tau2 = 2 } },
  { label = "gossip", fn = dc.train, o = { algo = "gossip", graph = "complete" } },
}
if quick then runs = { runs[1], runs[4] } end

local results = {}
for _, run in ipairs(runs) do
  local prefix = run.label:gsub("-", "_") .. "_"
  local o = { workers = terms, model = "mlp:784-64-10", dataset = { name = "fashion-mnist" }, batch = 64,
              seconds = seconds, worker_opt = { method = "sgd", lr = 0.1 }, eval_every = quick and 5 or 10,
              eval_limit = 1000, final_eval_limit = quick and 1000 or 0, prefix = prefix, progress = not quick }
  for k, v in pairs(run.o) do o[k] = v end
  local at = {}
  o.at_start = faults(at)
  local s = run.fn(o)
  settle(at)
  local rows = ex.read_csv(prefix .. "steps")
  local c = {}
  for k, v in pairs(at) do if type(v) == "number" then c[k] = v - s.start_s end end
  results[#results + 1] = ex.row(run.label, s, {
    cut_steps_away = steps_in(rows, cut.name, c.cut + 0.5, c.heal),
    cut_steps_after = steps_in(rows, cut.name, c.heal + 0.5, seconds + 1),
    dead_steps_away = steps_in(rows, dead.name, c.kill + 0.5, c.restart),
    dead_steps_after = steps_in(rows, dead.name, c.restart + 0.5, seconds + 1),
    others_steps_away = steps_in(rows, terms[1].name, c.kill + 0.5, c.heal),
    fault_times = c })
end

-- Strict BSP: the partition ends the training with an error naming t2.
local at = {}
local ok, err = pcall(ps.train, { server = cloud, workers = terms, mode = "bsp", model = "mlp:784-64-10",
                                  dataset = { name = "fashion-mnist" }, batch = 64, seconds = seconds,
                                  worker_opt = { lr = 0.1 }, prefix = "bsp_fail_", progress = false,
                                  at_start = faults(at) })
settle(at)
local bsp_fail = ok and "no error" or tostring(err):gsub("^[^:]*%.lua:%d+: ", "")
hn.log("bsp with on_failure = fail: " .. bsp_fail)
net:stop()

ex.table("faults: t2 cut off 20%-50% of each run, t5 killed 30%-60%", results,
         { "label", "final_accuracy", "steps", "others_steps_away", "cut_steps_away", "cut_steps_after",
           "dead_steps_away", "dead_steps_after" })
ex.finish{ scenario = "faults", seconds = seconds, results = results, bsp_fail_error = bsp_fail }
