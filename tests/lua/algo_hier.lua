-- hiernet.algo.hier on backend none: the edge and cloud averages are exact
-- (weighted by the given shares, to float rounding) and hierarchical
-- averaging learns on a 3-tier network; the cloud defaults to the tier-cloud
-- node, and a `steps` that tau1 does not divide runs exactly that many.
local hn = require("hiernet")
local hier = require("hiernet.algo.hier")
local topo = require("hiernet.topo")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "hier", backend = "none" }
-- terminal 2 computes at 1/20 of the speed: the exact rounds below meet
-- its model while it is still being written
local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
                           nodes = { terminal = function(i) return { speed = i == 2 and 0.05 or 1 } end } })
net:start()
local cloud, edges, terms = t.cloud[1], t.edge, t.terminal

-- Terminals go to the edge on their route to the cloud.
local groups = hier.assign(terms, edges, cloud)
T.eq(#groups, 2, "groups")
T.eq(table.concat(groups[2].terminals, ","), "4,5,6", "terminals of edge2")

-- ---- exact averages: one edge round, then one with the cloud ----
-- On fresh peers: nothing is made before the first round. Each terminal's
-- model "w" is written by its own round batch (kept in "w0" for the sums
-- here), so the edges wait on models still being written (slowest on
-- terminal 2); the edges' and cloud's "w" and "acc" are made by the round.
local P = 10007
local J = { model_name = "w", model_size = P, workers = terms,
            o = { tau1 = 0, batch = 32, worker_opt = { method = "sgd", lr = 0.1 } } }
local shares = { 0.5, 0.3, 0.2, 0.25, 0.25, 0.5 }
local edge_shares = { 0.4, 0.6 }

-- Terminal i's commands of the first round: its model first.
local function first_write(i)
  return { { "tensor", { name = "w0", size = P, fill = "normal", seed = i } },
           { "scale", { x = "w0", alpha = 1 } }, { "copy", { src = "w0", dst = "w" } } }
end

local function run_round(cloud_round, write)
  local tasks = {}
  for g, group in ipairs(groups) do
    for _, i in ipairs(group.terminals) do
      local cmds = write and write(i) or {}
      local tc = hier.terminal_commands(J, i, group.edge, shares[i])
      table.move(tc, 1, #tc, #cmds + 1, cmds)
      tasks[#tasks + 1] = hn.spawn(function() terms[i]:batch(cmds) end)
    end
    local ecmds = hier.edge_commands(J, group, cloud_round and edge_shares[g] or nil, cloud)
    tasks[#tasks + 1] = hn.spawn(function() group.edge:batch(ecmds) end)
  end
  if cloud_round then
    local ccmds = hier.cloud_commands(J, edges)
    tasks[#tasks + 1] = hn.spawn(function() cloud:batch(ccmds) end)
  end
  hn.wait_all(tasks)
end

local function check_tensor(node, want, what)
  local got = T.read_all(node, "w", P)
  for e = 1, P do
    if math.abs(got[e] - want[e]) > 1e-5 * math.max(1, math.abs(want[e])) then
      error(string.format("%s: element %d is %.8g, want %.8g", what, e - 1, got[e], want[e]))
    end
  end
end

run_round(false, first_write)
local want_edge = { {}, {} }
for i, n in ipairs(terms) do
  local g = i <= 3 and 1 or 2
  for e, v in ipairs(T.read_all(n, "w0", P)) do
    want_edge[g][e] = (want_edge[g][e] or 0) + shares[i] * v
  end
end
for g = 1, 2 do
  check_tensor(edges[g], want_edge[g], "edge " .. g .. " average")
  for _, i in ipairs(groups[g].terminals) do check_tensor(terms[i], want_edge[g], "terminal " .. i .. " got its edge's model") end
end
-- Second round with the cloud: terminals hold their edge's model, so each
-- edge's average is that model again; the cloud weights the two edges.
local want_cloud = {}
for e = 1, P do want_cloud[e] = edge_shares[1] * want_edge[1][e] + edge_shares[2] * want_edge[2][e] end
run_round(true)
check_tensor(cloud, want_cloud, "cloud average")
for i = 1, #terms do check_tensor(terms[i], want_cloud, "terminal " .. i .. " got the cloud's model") end

-- ---- training ----
-- The cloud defaults to the network's one node of tier "cloud".
local s = hier.train{ workers = terms, tau1 = 4, tau2 = 2, model = T.model, dataset = T.dataset,
                      batch = 32, steps = 48, worker_opt = { lr = 0.2 }, eval_limit = 300, progress = false }
T.learned(s, 0.5, "hier")
T.eq(s.steps, 48, "hier: local steps")
T.eq(s.edge_rounds, 12, "hier: edge rounds")
T.eq(s.cloud_rounds, 6, "hier: cloud rounds")
-- steps not a multiple of tau1: the last round is shortened, so exactly 50
-- local steps run on each of the 6 terminals (13 rounds: 12 of 4, one of 2):
-- 6 x 50 batches of 32 samples over the 2400 of the training split.
local odd = hier.train{ cloud = cloud, workers = terms, tau1 = 4, tau2 = 2, model = T.model, dataset = T.dataset,
                        batch = 32, steps = 50, worker_opt = { lr = 0.2 }, eval_limit = 300, prefix = "odd_",
                        progress = false }
T.eq(odd.steps, 50, "hier with steps = 50, tau1 = 4: local steps")
T.eq(odd.edge_rounds, 13, "hier with steps = 50, tau1 = 4: edge rounds")
T.near(odd.epochs * 2400, 6 * 50 * 32, 1e-9, "hier with steps = 50, tau1 = 4: samples used")
local last = 0
for _, row in ipairs(T.csv("odd_steps")) do last = math.max(last, row.step) end
T.eq(last, 50, "hier with steps = 50: the last steps.csv step")
local c = hier.train{ cloud = cloud, workers = terms, tau1 = 4, tau2 = 2, model = T.model, dataset = T.dataset,
                      batch = 32, steps = 48, worker_opt = { lr = 0.2 }, compress = { method = "topk", ratio = 0.2 },
                      prefix = "topk_", progress = false }
T.learned(c, 0.6, "hier with topk compression")
assert(c.bytes < s.bytes, string.format("compression moved fewer bytes: %d vs %d", c.bytes, s.bytes))
-- eval_every counts cloud rounds: 6 rounds, every 3rd evaluated (an
-- evaluation due while the last still runs is skipped and counted: the
-- training does not wait for it).
local e3 = hier.train{ cloud = cloud, workers = terms, tau1 = 4, tau2 = 2, model = T.model, dataset = T.dataset,
                       batch = 32, steps = 48, worker_opt = { lr = 0.2 }, eval_every = 3, eval_limit = 100,
                       prefix = "every3_", progress = false }
T.eq(#T.csv("every3_eval"), e3.evals, "hier: eval.csv rows")
T.eq(e3.evals + e3.evals_skipped, 2, "hier: evaluations due with eval_every = 3")
-- With two cloud nodes the cloud must be named.
local net2 = hn.network{ name = "hier2", backend = "none" }
local t2 = topo.hier(net2, { clouds = 2, edges_per_cloud = 1, terminals_per_edge = 1 })
net2:start()
local ok, err = pcall(hier.train, { workers = t2.terminal, steps = 4, model = T.model, dataset = T.dataset })
assert(not ok and err:find("2 nodes of tier \"cloud\" %(.*%); give option 'cloud'"), tostring(err))
print("algo_hier: ok")
