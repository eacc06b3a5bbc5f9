-- hiernet.algo.decentral on backend none: D-PSGD, gossip (push-sum) and
-- EASGD learn, also with compression (D-PSGD as CHOCO-SGD, gossip from
-- per-pair copies) and fewer bytes; the Metropolis weights are doubly
-- stochastic; push-sum keeps the total weight; EASGD's centre defaults to
-- the network's cloud node and its evaluations count steps.
local hn = require("hiernet")
local dc = require("hiernet.algo.decentral")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "dc", backend = "none" }
local workers = {}
for i = 1, 5 do workers[i] = net:node("w" .. i) end
for i = 1, 5 do net:link(workers[i], workers[i % 5 + 1]) end
local center = net:node("center", { tier = "cloud" })
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

-- Push-sum conserves the sum of the weights (the last element of x): N.
local function total_weight()
  local total = 0
  for _, w in ipairs(workers) do
    local size = w:norm{ x = "x" }.size
    total = total + w:read{ tensor = "x", range = { size - 1, 1 } }.values[1]
  end
  return total
end

local d = train("dpsgd")
T.learned(d, 0.5, "dpsgd")
T.eq(d.graph, "links", "dpsgd: default graph")
T.eq(d.steps, 50, "dpsgd: every worker made 50 steps")

local g = train("gossip", { graph = "complete" })
T.learned(g, 0.6, "gossip")
T.near(total_weight(), #workers, 1e-4, "gossip: total push-sum weight")

-- The bytes of one push, the same on every steps.csv row that pushed (a
-- step whose neighbours have all made their steps pushes nothing: which
-- steps push depends on the interleaving, what a push moves does not).
local function push_bytes(prefix)
  local b
  for _, row in ipairs(T.csv(prefix .. "steps")) do
    if row.bytes > 0 then
      if b and row.bytes ~= b then error(string.format("%s: pushes of %d and %d bytes", prefix, b, row.bytes), 2) end
      b = row.bytes
    end
  end
  return assert(b, prefix .. ": no step pushed")
end
-- a dense push: the model (676 floats) and the push-sum weight
T.eq(push_bytes("gossip_"), (676 + 1) * 4, "gossip: bytes of a push")

-- Compressed: each method lowers the loss to 0.6 of the start in the same
-- 50 steps (gossip with sign: 0.7; it ended between 0.26 and 0.51 in 38
-- runs under load, int8 and topk at most 0.34), with fewer bytes (CHOCO
-- sends only the compressed difference to the neighbours; gossip pushes it
-- instead of half a model).
for _, c in ipairs{ { method = "topk", ratio = 0.1 }, { method = "int8" }, { method = "sign" } } do
  local tag = c.method
  local dc_c = train("dpsgd", { compress = c, prefix = "dpsgd_" .. tag .. "_" })
  T.learned(dc_c, 0.6, "dpsgd (CHOCO) " .. tag)
  T.le(dc_c.bytes, 0.3 * d.bytes, "dpsgd " .. tag .. ": bytes against uncompressed")
  T.eq(dc_c.gamma, dc.CHOCO_GAMMA[c.method], "dpsgd " .. tag .. ": default gamma")
  local g_c = train("gossip", { graph = "complete", compress = c, prefix = "gossip_" .. tag .. "_" })
  T.learned(g_c, c.method == "sign" and 0.7 or 0.6, "gossip " .. tag)
  -- per push, not per step: how many steps push varies from run to run
  T.le(push_bytes("gossip_" .. tag .. "_"), 0.3 * push_bytes("gossip_"), "gossip " .. tag .. ": bytes a push against uncompressed")
  -- the weights move exactly, and every push was taken by the end
  T.near(total_weight(), #workers, 1e-4, "gossip " .. tag .. ": total push-sum weight")
end

-- Compressed gossip through a kill and a restart: the restarted worker's
-- pair copies start again (on both ends) and it trains on. The schedule
-- runs on the training's progress (at_start's clock), not on times a
-- loaded host stretches: w3 dies after 20 of its steps, w1 makes 10 while
-- it is dead, w3 is restarted and must make 10 more; then the schedule
-- stops the training (`seconds` is only a bound).
local fire, at = T.schedule(function(clock, at)
  T.after_steps(clock, "w3", 20, "w3's first steps")
  workers[3]:kill()
  T.after_steps(clock, "w1", 10, "w1 while w3 is dead")
  at.back_from = clock.steps_of("w3")
  workers[3]:restart()
  T.after_steps(clock, "w3", 10, "w3 after its restart")
end, true)
local gk = train("gossip", { graph = "complete", compress = { method = "int8" }, steps = 1000000,
                             seconds = 3 * T.LIVENESS_S, eval_every = 1000000, prefix = "gossip_kill_",
                             at_start = fire })
T.schedule_done(at, "compressed gossip with a kill")
T.eq(gk.stop_reason, "schedule done", "compressed gossip with a kill: stop reason")
T.learned(gk, 0.6, "compressed gossip with a worker killed and restarted")
T.eq(gk.workers_alive, 5, "compressed gossip: the restarted worker is back")
local rows = 0
for _, row in ipairs(T.csv("gossip_kill_steps")) do
  if row.worker == "w3" then rows = rows + 1 end
end
T.le(at.back_from + 10, rows, "compressed gossip: w3's rows (the restarted worker trains)")

-- EASGD: the centre is the network's one cloud node when not given, and
-- eval.csv's step counts local steps (every live worker's), as steps.csv's.
local e = train("easgd", { period = 2, alpha = 0.2 })
T.learned(e, 0.6, "easgd")
assert(e.updates_applied >= 5 * 50 // 2, "easgd: elastic exchanges " .. e.updates_applied)
-- (one evaluation runs at a time, a due one meanwhile is skipped: how many
-- run depends on the host's load)
local evals = T.csv("easgd_eval")
assert(#evals >= 1, "easgd: no evaluation")
for _, row in ipairs(evals) do
  T.le(row.step, 50, "easgd: eval.csv step")
  T.eq(row.step % 2, 0, "easgd: eval.csv step " .. row.step .. " is a multiple of eval_every")
end
local ec = train("easgd", { center = center, period = 2, alpha = 0.2, compress = { method = "int8" },
                            prefix = "easgd_int8_" })
T.learned(ec, 0.6, "easgd int8")
T.le(ec.bytes, 0.7 * e.bytes, "easgd int8: bytes (the pulls stay dense)")

-- Errors name the option.
local ok, err = pcall(train, "gossip", { compress = { method = "int8", error_feedback = false } })
assert(not ok and err:find("error_feedback = false: gossip sends differences"), tostring(err))
ok, err = pcall(train, "dpsgd", { gamma = 0.5 })
assert(not ok and err:find("'gamma' is for algo 'dpsgd' with compress"), tostring(err))
ok, err = pcall(train, "gossip", { worker_opt = { lr = 0.1, momentum = 0.9 } })
assert(not ok and err:find("'momentum' is not used here"), tostring(err))
ok, err = pcall(train, "easgd", { center = center, eval_node = workers[1] })
assert(not ok and err:find("'eval_node' is not used %(the centre is evaluated%)"), tostring(err))
-- Without a cloud node EASGD needs its centre named.
local net2 = hn.network{ name = "dc2", backend = "none" }
local lone = { net2:node("u1"), net2:node("u2") }
net2:link(lone[1], lone[2])
net2:start()
ok, err = pcall(dc.train, { algo = "easgd", workers = lone, steps = 5, model = T.model, dataset = T.dataset })
assert(not ok and err:find("easgd needs a centre: the network has no node of tier \"cloud\" besides the workers; give option 'center'"),
       tostring(err))
print("algo_decentral: ok")
