-- quickstart: parameter-server training on Fashion-MNIST over an emulated
-- terminal / edge / cloud network.
--
-- A cloud (the parameter server), 2 edges and 3 terminals per edge (the
-- workers). Terminal links are slow and lossy (20 Mbit/s, 10 ms, 0.5% loss),
-- edge links fast (1 Gbit/s, 5 ms); the last terminal of each edge computes
-- at half this host's speed. The same model is trained twice, synchronously
-- (BSP) and asynchronously (ASP), for the same emulated time; a table
-- compares them at the end, and the results directory gets plots and a
-- report page (index.html).
--
--   tools/run scenarios/quickstart.lua [--set seconds=40] [--set quick=true]
--
-- The links are emulated (backend auto: the kernel's qdiscs, or
-- hiernet-linkd where the kernel lacks netem); without the privileges to do
-- that the scenario says so in one line and runs on backend none.
-- Expected: ASP makes several times more updates than BSP in the same time
-- (no worker waits for the slow ones) and reaches a similar accuracy, about
-- 0.70-0.76 after 40 s here (measured 0.74 BSP, 0.71 ASP); BSP's steps are
-- set by the slowest terminal.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 8 or 40)

local net = hn.network{ name = "quickstart", backend = ex.backend(), seed = 1 }
local t = topo.hier(net, {
  clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
  links = { cloud_edge = { bw = "1Gbit", delay = "5ms" },
            edge_terminal = { bw = "20Mbit", delay = "10ms", loss = "0.5%" } },
  nodes = { terminal = function(i) return { speed = (i % 3 == 0) and 0.5 or 1 } end },
})
net:start()
hn.log(string.format("network up (backend %s): %d nodes; path t1 -> cloud: %s", net.backend, #net:nodes(),
                     table.concat(net:route(t.terminal[1], t.cloud[1]), " -> ")))

local rows = {}
for _, mode in ipairs{ "bsp", "asp" } do
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
