-- decentral: decentralized training without a parameter server against one
-- with it. From the survey ../shared/papers/survey-ddls-taxonomy.txt (the
-- survey of distributed deep learning systems and their taxonomy:
-- centralized against decentralized optimization, gossip and elastic
-- averaging exchange); elastic averaging SGD is among the works cited by
-- ../shared/papers/survey-distributed-training-refs.txt. No figure of
-- either is reproduced.
--
-- D-PSGD (neighbour averaging each step), push-sum gossip (random
-- neighbour) and EASGD (elastic averaging towards a centre variable on one
-- node) against a BSP parameter server, each on two networks of six workers:
-- a ring (links between neighbouring workers; the server or centre hangs off
-- one of them) and a 3-tier network (a cloud, two edges, three terminals
-- each; the cloud is the server or centre). Links 50 Mbit/s, 5 ms.
-- mlp:784-128-10 on Fashion-MNIST, the same emulated time for each.
--
--   tools/run scenarios/decentral.lua [--set name=value ...]
--     seconds=30     emulated seconds per training (quick: 3)
--     quick=false    the reduced run of the test suite (the server and
--                    D-PSGD, 3 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected: on the ring D-PSGD and gossip exchange only with neighbours over
-- direct links and make several times the server's steps (its one link
-- carries every worker's model); on the 3-tier network their neighbour
-- exchanges cross the edges and the cloud, they make about half as many, and
-- the server holds up better. EASGD communicates every 4 steps and makes
-- many local steps on both; the decentralized runs end at a higher accuracy
-- than the server in the same time, except D-PSGD on the 3-tier network,
-- whose exchanges cross the cloud like the server's (measured: equal). summary.json: per (network,
-- algorithm) the graph, steps, bytes, final accuracy.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local dc = require("hiernet.algo.decentral")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 3 or 30)
local link = { bw = "50Mbit", delay = "5ms" }

local builders = {
  ring = function(net)
    local t = topo.ring(net, { n = 6, link = link, prefix = "w" })
    local hub = net:node("hub", { tier = "cloud" })
    net:link(hub, t.hosts[1], link)
    return t.hosts, hub
  end,
  ["3tier"] = function(net)
    local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
                               links = { cloud_edge = link, edge_terminal = link } })
    return t.terminal, t.cloud[1]
  end,
}

local results = {}
for _, name in ipairs{ "ring", "3tier" } do
  local net = hn.network{ name = "dc_" .. name, backend = ex.backend(), seed = 1 }
  local workers, hub = builders[name](net)
  net:start()
  local runs = {
    { label = "ps-bsp", fn = ps.train, extra = { server = hub, mode = "bsp" } },
    { label = "dpsgd", fn = dc.train, extra = { algo = "dpsgd" } },
    { label = "gossip", fn = dc.train, extra = { algo = "gossip" } },
    { label = "easgd", fn = dc.train, extra = { algo = "easgd", center = hub, period = 4 } },
  }
  for _, run in ipairs(quick and { runs[1], runs[2] } or runs) do
    local o = { workers = workers, model = "mlp:784-128-10", dataset = { name = "fashion-mnist" }, batch = 64,
                seconds = seconds, worker_opt = { method = "sgd", lr = 0.1 }, eval_every = 10,
                eval_limit = 1000, final_eval_limit = 2000, progress = not quick,
                prefix = string.format("%s_%s_", name, run.label:gsub("-", "_")) }
    for k, v in pairs(run.extra) do o[k] = v end
    local s = run.fn(o)
    results[#results + 1] = ex.row(run.label .. " on " .. name, s, { network = name, algorithm = run.label,
      graph = s.graph })
  end
  net:stop()
end
ex.table("decentral: 6 workers, " .. seconds .. " s each", results,
         { "label", "graph", "steps", "bytes", "final_accuracy" })
ex.finish{ scenario = "decentral", seconds = seconds, results = results }
