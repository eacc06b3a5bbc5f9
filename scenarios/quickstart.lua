-- quickstart: parameter-server training on Fashion-MNIST over an emulated
-- terminal / edge / cloud network (the setting of the system paper,
-- ../shared/papers/system-paper-hierarchical-ddl.txt: a parameter server,
-- synchronous and asynchronous, on terminal / edge / cloud tiers imitated by
-- per-node compute and link limits).
--
-- A cloud (the parameter server), 2 edges and 3 terminals per edge (the
-- workers). Terminal links are slow and lossy (20 Mbit/s, 10 ms, 0.5% loss),
-- edge links fast (1 Gbit/s, 5 ms). Terminals stand for the small devices
-- they are: they compute at a tenth of this host's speed (the last of each
-- edge at a twentieth), so six of them on a host of two cores are what the
-- host can emulate faithfully, and the network, not the host, sets the
-- step. The run's dilation is "auto": measured on the first compute
-- commands, it stays 1 where the host keeps up (run.json's dilation says why).
-- The same model is trained twice, synchronously (BSP) and asynchronously
-- (ASP), for the same emulated time; a table compares them at the end, and
-- the results directory gets plots and a report page (index.html).
--
--   tools/run scenarios/quickstart.lua [--set name=value ...]
--     seconds=30     emulated seconds per training (quick: 8)
--     quick=false    the reduced run of the test suite (8 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--     modes=bsp,asp  the trainings, in order (bsp, asp or both): the
--                    suite's one-against-three comparison trains BSP alone
--     cloud_edge_delay=5ms  the cloud-edge links' delay (the links a run
--                    spread over machines cuts; the suite slows them to
--                    show that its comparison sees a slower spread run)
--
-- The links are emulated (backend auto: the kernel's qdiscs, or
-- hiernet-linkd where the kernel lacks netem); without the privileges to do
-- that the scenario says so in one line and runs on backend none.
-- Expected: ASP applies about 1.6 times BSP's worker updates in the same
-- time (measured 368 against 228 in 30 s), not several times: its workers
-- skip BSP's wait for the slowest terminal, but each one's step is still
-- bound by its own 20 Mbit/s link, which carries the 407 KB model up and
-- down (about 0.34 s a step before loss slows TCP; BSP's rounds took 0.79 s,
-- ASP's steps 0.48 s per worker). Counted in server steps ASP makes about
-- ten times as many (one per push against one per round of six). Both
-- reach an accuracy of about 0.6-0.7 after 30 s here (measured 0.69 BSP,
-- 0.61 ASP, whose stale gradients make it noisier). summary.json: per
-- mode final and best accuracy, steps, updates, bytes, wall time. The
-- whole run takes about 62 s here (61.3-63.6 s in 17 of 18 runs, 71 s in
-- one, at load averages of 3 to 16 from other programs; plots off). Its
-- overruns (run.json overload.overrun_share) were the cloud server's
-- sends and optimizer steps waiting for the peer's worker thread to wake
-- (3.1-4.8%); the peer now runs those on its loop, and what overruns is
-- the terminals' waits out of their budgets ending late behind other
-- programs' threads: 1.6-3.4% of commands in four runs, 6-10% in two
-- where other programs saturated the host (then with a note naming
-- others' load, and no warning: docs/fidelity.md "Overload"). On the host
-- otherwise idle: 0.19-0.25% in three runs (6-8 of about 3,200 commands),
-- 61.4-61.6 s each, no warning.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 8 or 30)

-- The trainings in order; anything but bsp and asp is an error naming it.
local modes = ex.list_param("modes", "bsp,asp")
for _, mode in ipairs(modes) do
  if mode ~= "bsp" and mode ~= "asp" then
    error(string.format("--set modes=%s: '%s' is not a training (bsp or asp)", hn.param("modes", ""), mode), 0)
  end
end
if #modes == 0 then error("--set modes=" .. hn.param("modes", "") .. ": no training (bsp, asp or both)", 0) end
local cloud_edge_delay = hn.param("cloud_edge_delay", "5ms")

local net = hn.network{ name = "quickstart", backend = ex.backend(), seed = 1, dilation = "auto" }
local t = topo.hier(net, {
  clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
  links = { cloud_edge = { bw = "1Gbit", delay = cloud_edge_delay },
            edge_terminal = { bw = "20Mbit", delay = "10ms", loss = "0.5%" } },
  nodes = { terminal = function(i) return { speed = (i % 3 == 0) and 0.05 or 0.1 } end },
})
net:start()
hn.log(string.format("network up (backend %s): %d nodes; path t1 -> cloud: %s", net.backend, #net:nodes(),
                     table.concat(net:route(t.terminal[1], t.cloud[1]), " -> ")))

local rows = {}
for _, mode in ipairs(modes) do
  local s = ps.train{ server = t.cloud[1], workers = t.terminal, mode = mode, model = "mlp:784-128-10",
                      dataset = { name = "fashion-mnist", partition = "shuffle" }, batch = 64,
                      seconds = seconds, worker_opt = { method = "sgd", lr = 0.1 },
                      server_opt = { method = "sgd", lr = 1.0 }, eval_every = mode == "bsp" and 3 or 15,
                      eval_limit = 1000, final_eval_limit = quick and 2000 or 0, prefix = mode .. "_" }
  rows[#rows + 1] = ex.row(mode, s)
end
net:stop()
ex.table("quickstart: Fashion-MNIST, 6 terminals, " .. seconds .. " s each", rows,
         { "label", "final_accuracy", "best_accuracy", "steps", "updates_applied", "bytes", "wall_s" })
ex.finish{ scenario = "quickstart", backend = net.backend, seconds = seconds, results = rows }
