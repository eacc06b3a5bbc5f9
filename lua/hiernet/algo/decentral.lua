-- hiernet.algo.decentral: decentralized training, no parameter server.
--
--   local dc = require("hiernet.algo.decentral")
--   local s = dc.train{ algo = "dpsgd", workers = nodes, graph = "ring", steps = 300, ... }
--
-- Algorithms (every worker trains its own model on its shard; `steps` is the
-- number of local steps each worker makes):
--   dpsgd   D-PSGD (Lian et al. 2017): each step worker i sends its model to
--           its neighbours, computes its gradient g_i, and sets
--           x_i <- sum_j W_ij x_j - lr g_i with Metropolis-Hastings weights
--           W_ij = 1 / (1 + max(d_i, d_j)) for neighbours, W_ii = 1 - sum.
--   gossip  push-sum SGD (Kempe et al. 2003; Assran et al. 2019): each worker
--           keeps a numerator x_i and a weight a_i (carried as x_i's last
--           element, so both travel in one send); a step is x_i <- x_i -
--           lr a_i grad(z_i) at z_i = x_i / a_i (a step of lr on z_i: with
--           the weight left out, a node whose weight has halved a few times
--           would take steps several times too long), then it keeps half of (x_i, a_i)
--           and adds the other half into one random neighbour's (one
--           that still steps). Sums are conserved whatever arrives meanwhile.
--   easgd   elastic averaging (Zhang et al. 2015), asynchronous: every
--           `period` local steps worker i pulls the centre c from the centre
--           node (`center`, default the network's one tier-"cloud" host),
--           d = alpha (x_i - c), x_i <- x_i - d, and c <- c + d (the
--           centre adds d as it arrives).
-- With `compress`, dpsgd runs CHOCO-SGD and gossip pushes compressed
-- differences from per-pair copies (both below); easgd compresses d.
-- Neighbours (`graph`): "ring" (a logical ring over `workers` in order),
-- "complete", "links" (workers directly linked in the topology), or a
-- table {[node name] = {nodes}} (made symmetric). Default: "links" when
-- the workers' own links connect them all, else "ring".
--
-- Each algorithm is a module of its own (hiernet.algo.decentral.dpsgd,
-- .gossip, .easgd) that makes a plan: a worker's step, and what its faults
-- and its end need. This module checks the options, sets the job up and
-- runs the plan on the job's frame (J:worker_loops, J:watch_faults).
local job = require("hiernet.algo.job")
local graphs = require("hiernet.algo.graphs")

local dc = {}
local check, fail = job.check, job.fail

dc.algos = { "dpsgd", "gossip", "easgd" }

local plans = {
  dpsgd = require("hiernet.algo.decentral.dpsgd"),
  gossip = require("hiernet.algo.decentral.gossip"),
  easgd = require("hiernet.algo.decentral.easgd"),
}

-- CHOCO's default consensus step per compression method (dpsgd's).
dc.CHOCO_GAMMA = plans.dpsgd.CHOCO_GAMMA

-- ---- neighbour graphs (hiernet.algo.graphs) ----

dc.graph, dc.connected, dc.metropolis = graphs.graph, graphs.connected, graphs.metropolis

-- ---- dc.train ----

local OPTIONS = {
  algo = check.oneof(table.unpack(dc.algos)),
  graph = function(what, v)
    if type(v) == "table" or v == "ring" or v == "complete" or v == "links" then return v end
    fail("%s: expected \"ring\", \"complete\", \"links\" or a table, got %s", what, tostring(v))
  end,
  center = check.node, alpha = check.fraction, period = check.posint, gamma = check.fraction,
}

-- Compression: dpsgd (CHOCO) and gossip (copies) send differences from a
-- copy the receiver holds, which carries what compression dropped to the
-- next message: error_feedback = false would change nothing, and is an
-- error rather than an option silently ignored. gamma is CHOCO's.
local function check_compression(J, algo, opts)
  local c = J.o.compress
  if J.o.gamma ~= nil and not (algo == "dpsgd" and c) then
    fail("decentral.train: option 'gamma' is for algo 'dpsgd' with compress (CHOCO's consensus step)")
  end
  if c and algo ~= "easgd" and type(opts.compress) == "table" and opts.compress.error_feedback == false then
    fail("decentral.train: compress.error_feedback = false: %s sends differences from a copy the " ..
         "receiver holds, which always carries what compression dropped; leave it out", algo)
  end
end

local function pick_graph(J)
  local g = J.o.graph
  if g == nil then
    local links = dc.graph(J.workers, "links")
    if #J.workers > 1 and dc.connected(links) then return links, "links" end
    return dc.graph(J.workers, "ring"), "ring"
  end
  local adj = dc.graph(J.workers, g)
  local connected, cut = dc.connected(adj)
  if not connected then
    fail("decentral.train: the %s graph does not connect every worker: %s cannot reach %s",
         type(g) == "table" and "given" or ("'" .. g .. "'"), J.workers[cut].name, J.workers[1].name)
  end
  return adj, type(g) == "table" and "custom" or g
end

-- compute = "profile" (docs/lua-api.md "Profiled compute"): the model's
-- tensors are virtual, their elements past the resident prefix read as
-- zero and are never written. dpsgd and easgd only copy, send, scale and
-- add whole models, which a virtual tensor does; push-sum keeps its weight
-- in an element past the model's, which it does not hold, and compress
-- refuses a virtual tensor (it would put the surrogate's bytes on the
-- wire): refused here, before any record is made.
local function check_profiled(J, algo)
  if J.o.compute ~= "profile" then return end
  if algo == "gossip" then
    fail("decentral.train: compute = \"profile\" is not for algo 'gossip': push-sum keeps its weight in an " ..
         "element past the model's, which a profiled model's virtual tensors do not hold; use dpsgd or easgd")
  end
  if J.o.compress then
    fail("decentral.train: compress with compute = \"profile\": compress refuses a virtual tensor (it would " ..
         "put the surrogate's bytes on the wire)")
  end
end

-- The options of dc.train that depend on the algo.
local function check_algo_options(J, algo, opts)
  if #J.workers < 2 then fail("decentral.train: give at least 2 workers") end
  check_compression(J, algo, opts)
  for _, k in ipairs{ "center", "alpha", "period" } do
    if J.o[k] ~= nil and algo ~= "easgd" then fail("decentral.train: option '%s' is for algo 'easgd'", k) end
  end
  if J.o.graph ~= nil and algo == "easgd" then fail("decentral.train: option 'graph' is not for algo 'easgd'") end
  if algo == "dpsgd" and J.o.on_failure == "drop" then
    fail("decentral.train: dpsgd cannot drop a worker (on_failure = \"drop\"): its neighbours wait for its model every step")
  end
  if algo ~= "easgd" then -- their step is x <- x - lr g at worker_opt.lr
    job.plain_sgd_only("decentral.train: worker_opt (" .. algo .. ")", J.o.worker_opt, { lr = true })
  end
  job.eval_node_among_workers("decentral.train", J.o, algo == "easgd" and "the centre" or nil)
end

-- dc.train: the algo's plan (its module's plan(J, extra, graph or centre)
-- gives step(i, t), lockstep, running, on_steps, the fault hooks, the
-- aborts at a partition, counts_updates, finish) run on the job's frame.
function dc.train(opts)
  local algo = type(opts) == "table" and opts.algo
  if not algo then fail("decentral.train: option 'algo' is required (%s)", table.concat(dc.algos, ", ")) end
  local J = job.new("decentral", opts, { mode = algo, options = OPTIONS })
  check_profiled(J, algo)
  check_algo_options(J, algo, opts)
  local center = J.o.center
  if algo == "easgd" and not center then center = plans.easgd.default_center(J) end
  local extra = { algo = algo }
  -- The graph before the set-up: a graph that is refused leaves no records.
  local adj
  if algo ~= "easgd" then adj, extra.graph = pick_graph(J) end
  J:setup{ origin = J.workers[1], holders = center and { center } or {}, model_name = "w",
           eval_node = algo == "easgd" and center or J.workers[1] }
  local P = plans[algo].plan(J, extra, adj or center)
  J:watch_faults(P.faults)
  if P.on_partition then J:on_partition(P.on_partition) end
  J:start_clock()
  J:guard(function() J:worker_loops(P) end)
  if not P.counts_updates then J.updates_applied = J.steps * #J.workers end
  if P.finish then P.finish() end
  return J:finish(extra)
end

return dc
