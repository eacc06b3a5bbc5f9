-- hiernet.algo.decentral on backend none: D-PSGD, gossip (push-sum) and
-- EASGD learn; the Metropolis weights are doubly stochastic; push-sum keeps
-- the total weight.
local hn = require("hiernet")
local dc = require("hiernet.algo.decentral")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "dc", backend = "none" }
local workers = {}
for i = 1, 5 do workers[i] = net:node("w" .. i) end
for i = 1, 5 do net:link(workers[i], workers[i % 5 + 1]) end
local center = net:node("center")
net:link(center, workers[1])
net:start()

-- Mixing weights of a ring plus a chord: rows and columns sum to 1.
local adj = dc.graph(workers, "ring")
adj[1][3], adj[3][1] = true, true
local W = dc.metropolis(adj)
for i = 1, 5 do
  local row, col = 0, 0
  for j = 1, 5 do row = row + (W[i][j] or 0); col = col + (W[j][i] or 0) end
  T.near(row, 1, 1e-12, "metropolis row " .. i)
  T.near(col, 1, 1e-12, "metropolis column " .. i)
end
-- The workers' own links form the ring.
assert(dc.connected(dc.graph(workers, "links")), "links graph of a ring is connected")

local function train(algo, extra)
  local o = { algo = algo, workers = workers, model = T.model, dataset = T.dataset, batch = 32,
              steps = 50, worker_opt = { lr = 0.2 }, eval_limit = 300, prefix = algo .. "_", progress = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return dc.train(o)
end

local d = train("dpsgd")
T.learned(d, 0.5, "dpsgd")
T.eq(d.graph, "links", "dpsgd: default graph")
T.eq(d.steps, 50, "dpsgd: every worker made 50 steps")

local g = train("gossip", { graph = "complete" })
T.learned(g, 0.6, "gossip")
-- Push-sum conserves the sum of the weights (the last element of x): N.
local total = 0
for _, w in ipairs(workers) do
  local size = w:norm{ x = "x" }.size
  total = total + w:read{ tensor = "x", range = { size - 1, 1 } }.values[1]
end
T.near(total, #workers, 1e-4, "gossip: total push-sum weight")

local e = train("easgd", { center = center, period = 2, alpha = 0.2 })
T.learned(e, 0.6, "easgd")
assert(e.updates_applied >= 5 * 50 // 2, "easgd: elastic exchanges " .. e.updates_applied)

local ok, err = pcall(train, "gossip", { compress = "int8" })
assert(not ok and err:find("compression is supported for easgd"), tostring(err))
ok, err = pcall(train, "easgd", {})
assert(not ok and err:find("needs option 'center'"), tostring(err))
ok, err = pcall(train, "gossip", { worker_opt = { lr = 0.1, momentum = 0.9 } })
assert(not ok and err:find("'momentum' is not used here"), tostring(err))
ok, err = pcall(train, "easgd", { center = center, eval_node = workers[1] })
assert(not ok and err:find("'eval_node' is not used %(the centre is evaluated%)"), tostring(err))
print("algo_decentral: ok")
