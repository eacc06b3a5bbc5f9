-- allreduce_vs_ps: the all-reduce family against a parameter server on
-- three topologies of the same size. No paper of ../shared/papers measures
-- this comparison; it sets side by side the exchange patterns two of them
-- describe: survey-ddls-taxonomy.txt (the survey of distributed deep
-- learning systems and their taxonomy: centralized parameter servers
-- against decentralized all-reduce, ring and tree exchange) and
-- data-parallel-ring-allreduce.txt ("System-Level Optimization of
-- Distributed Training for Deep Neural Networks Using Data Parallelism":
-- synchronous training over a ring all-reduce).
--
-- Six workers (plus, for the parameter server, one server node) on: a star
-- (one switch), a ring (each node linked to its two neighbours) and a
-- 3-tier network (a cloud, two edges, three terminals each). Every link is
-- 100 Mbit/s with 2 ms delay. Synchronous training (BSP for the server; ring,
-- halving-doubling, tree and hierarchical all-reduce) of mlp:784-128-10 on
-- Fashion-MNIST for the same emulated time.
--
--   tools/run scenarios/allreduce_vs_ps.lua [--set name=value ...]
--     seconds=20     emulated seconds per training (quick: 3)
--     quick=false    the reduced run of the test suite (ring and
--                    hierarchical all-reduce against the server, 3 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected: the ring all-reduce's steps are the fastest on every topology
-- (every link carries 2 (N-1)/N of the model per step, the server's link
-- N models); on the ring topology its logical ring maps onto the links and
-- its steps are the fastest of all, while it leads the server by most on
-- the star, whose one server link carries every model (measured: 3.7x the
-- server's speed on the star, 2.6x on the ring); halving-doubling and the
-- tree pay for long paths and idle links, and on the 3-tier network the
-- hierarchical all-reduce (groups = the edges) and the server sit between.
-- summary.json: per (topology, algorithm) seconds per step, steps, bytes,
-- final accuracy.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 3 or 20)
local link = { bw = "100Mbit", delay = "2ms" }
local algos = quick and { "ring", "hierarchical" } or ar.algos

-- Each builder returns the workers and the server node of a fresh network.
local builders = {
  star = function(net)
    local sw, workers = net:switch("sw"), {}
    local server = net:node("server", { tier = "cloud" })
    net:link(sw, server, link)
    for i = 1, 6 do workers[i] = net:node("w" .. i); net:link(sw, workers[i], link) end
    return workers, server
  end,
  ring = function(net)
    local t = topo.ring(net, { n = 7, link = link, prefix = "r" })
    return table.move(t.hosts, 2, 7, 1, {}), t.hosts[1]
  end,
  ["3tier"] = function(net)
    local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
                               links = { cloud_edge = link, edge_terminal = link } })
    return t.terminal, t.cloud[1]
  end,
}

local results = {}
for _, name in ipairs{ "star", "ring", "3tier" } do
  local net = hn.network{ name = "cmp_" .. name, backend = ex.backend(), seed = 1 }
  local workers, server = builders[name](net)
  net:start()
  local common = { workers = workers, model = "mlp:784-128-10", dataset = { name = "fashion-mnist" },
                   batch = 64, seconds = seconds, worker_opt = { method = "sgd", lr = 0.1 },
                   eval_every = 10, eval_limit = 1000, final_eval_limit = 2000, progress = not quick }
  local runs = { { label = "ps-bsp", fn = ps.train, extra = { server = server, mode = "bsp" } } }
  for _, a in ipairs(algos) do
    runs[#runs + 1] = { label = "allreduce-" .. a, fn = ar.train, extra = { algo = a } }
  end
  for _, run in ipairs(runs) do
    local o = { prefix = string.format("%s_%s_", name, run.label:gsub("-", "_")) }
    for k, v in pairs(common) do o[k] = v end
    for k, v in pairs(run.extra) do o[k] = v end
    local s = run.fn(o)
    results[#results + 1] = ex.row(run.label .. " on " .. name, s, { topology = name, algorithm = run.label,
      s_per_step = s.steps > 0 and s.wall_s / s.steps or nil })
  end
  net:stop()
end
ex.table("allreduce_vs_ps: 6 workers, " .. seconds .. " s each", results,
         { "label", "s_per_step", "steps", "bytes", "final_accuracy" })
ex.finish{ scenario = "allreduce_vs_ps", seconds = seconds, results = results }
