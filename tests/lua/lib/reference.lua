-- A sequential reference for the training families: the same shards, the
-- same initial model and the same mini-batches as a training, computed one
-- command at a time in a fixed order on reference peers of its own, with
-- the algorithm's formula written out here (docs/algorithms.md), not taken
-- from the library under test. A training's final parameters must equal
-- the reference's to float tolerance (only the order of float sums differs).
--
--   local R = dofile(<this dir> .. "/reference.lua")
--   local refs = R.nodes(net, 3, hub)          -- before net:start()
--   net:start()
--   local ref = R.new(refs, { model = ..., dataset = ..., seed = ... })
--   for step = 1, 5 do ref:sync_step{ lr = 0.1 } end
--   R.check_equal(worker, "w", ref.nodes[1], "w", 1e-5, "ring, 5 steps")
--
-- Reference peer i holds shard i of n (exactly as hiernet.algo.job loads a
-- worker's), so its k-th grad uses the mini-batch the training's worker i
-- used at its k-th grad. Its model is made with the training's arch, init
-- and seed, which is the model the training's origin makes and sends.
local hn = require("hiernet")

local R = {}
local Ref = {}
Ref.__index = Ref

-- Reference peers ref1..refn, each linked to `hub` (a network must be
-- connected); they compute, and send to each other. Add them before
-- net:start().
function R.nodes(net, n, hub, prefix)
  local nodes = {}
  for i = 1, n do
    nodes[i] = net:node((prefix or "ref") .. i, { tier = "terminal" })
    net:link(hub, nodes[i])
  end
  return nodes
end

local function each(nodes, f)
  local tasks = {}
  for i, node in ipairs(nodes) do tasks[i] = hn.spawn(function() return f(i, node) end) end
  return hn.wait_all(tasks)
end

-- o: model=, init=, seed=1, dataset= (a job dataset table), batch=64,
-- shards= (default #nodes), model_name = "w".
function R.new(nodes, o)
  local self = setmetatable({ nodes = nodes, o = o, n = #nodes, batch = o.batch or 64,
                              name = o.model_name or "w", steps = 0 }, Ref)
  local d, seed = o.dataset, o.seed or 1
  local shards = o.shards or #nodes
  each(nodes, function(i, node)
    node:drop{ names = { self.name, "g", "u", "w0", "sum", "c", "ef" } }
    node:dataset{ name = d.name, path = d.path, split = "train", shard = i, shards = shards,
                  partition = d.partition, alpha = d.alpha, seed = d.seed or seed,
                  n = d.n, dim = d.dim, classes = d.classes, noise = d.noise }
    node:model{ name = self.name, arch = o.model, init = o.init, seed = seed }
  end)
  nodes[1]:copy{ src = self.name, dst = "w.init" }
  return self
end

-- Worker i's update "u" from its model: `steps` steps of optimizer opt
-- (default plain sgd at opt.lr) on its shard, u = w_before - w_after, and
-- its model back to w_before. One grad per step, as the training's worker.
function Ref:local_update(i, opt, steps)
  local node, m = self.nodes[i], self.name
  steps = steps or 1
  if steps == 1 and (opt.method or "sgd") == "sgd" and not opt.weight_decay then
    node:grad{ model = m, out = "g", batch = self.batch }
    node:copy{ src = "g", dst = "u" }
    node:scale{ x = "u", alpha = opt.lr }
    return
  end
  node:copy{ src = m, dst = "w0" }
  for _ = 1, steps do
    node:grad{ model = m, out = "g", batch = self.batch }
    node:optim{ model = m, grad = "g", method = opt.method or "sgd", lr = opt.lr, momentum = opt.momentum,
                beta1 = opt.beta1, beta2 = opt.beta2, eps = opt.eps, weight_decay = opt.weight_decay }
  end
  node:copy{ src = "w0", dst = "u" }
  node:axpy{ y = "u", x = m, alpha = -1 }
  node:copy{ src = "w0", dst = m }
end

-- On node 1: "sum" = sum over `ids` (indices, in that order) of their "u",
-- times `scale`. With compress ({method=, ratio=, error_feedback=}) each
-- "u" is compressed on its own node first (residual "ef" with error
-- feedback) and decompressed into the sum.
function Ref:sum_updates(ids, scale, compress)
  local first = self.nodes[1]
  first:tensor{ name = "sum", size = first:norm{ x = self.name }.size }
  for _, i in ipairs(ids) do
    local node, name = self.nodes[i], "u"
    if compress then
      name = "c"
      node:compress{ tensor = "u", out = "c", method = compress.method, ratio = compress.ratio,
                     residual = compress.error_feedback ~= false and "ef" or nil }
    end
    local here = name
    if i ~= 1 then
      here = name .. "." .. i
      node:send{ tensor = name, to = first, as = here }
    end
    if compress then
      first:decompress{ tensor = here, out = "sum", add = true }
    else
      first:axpy{ y = "sum", x = here }
    end
  end
  first:scale{ x = "sum", alpha = scale }
end

-- Node 1's model goes to every other reference peer.
function Ref:broadcast()
  local rest = table.move(self.nodes, 2, self.n, 1, {})
  if #rest > 0 then self.nodes[1]:send{ tensor = self.name, to = rest } end
end

-- One synchronous data-parallel step (allreduce.train, ps BSP): every
-- worker's update on the same model, their mean applied with the server
-- optimizer (default sgd lr 1: w <- w - mean). o: lr= or worker_opt=,
-- local_steps=, server_opt=, ids= (the workers taking part, default all),
-- compress= (the job's option).
function Ref:sync_step(o)
  local ids = o.ids
  if not ids then ids = {}; for i = 1, self.n do ids[i] = i end end
  local wopt = o.worker_opt or { lr = o.lr }
  for _, i in ipairs(ids) do self:local_update(i, wopt, o.local_steps) end
  self:sum_updates(ids, 1 / #ids, o.compress)
  local so = o.server_opt or { method = "sgd", lr = 1 }
  -- state apart from the worker optimizer's (the model's): tensor=
  self.nodes[1]:optim{ tensor = self.name, grad = "sum", method = so.method or "sgd", lr = so.lr or 1,
                       momentum = so.momentum, beta1 = so.beta1, beta2 = so.beta2, eps = so.eps,
                       weight_decay = so.weight_decay }
  self:broadcast()
  self.steps = self.steps + 1
end

-- Every value of a tensor, read in pieces of 65536.
function R.read_all(node, tensor)
  local size = node:norm{ x = tensor }.size
  local out = {}
  for off = 0, size - 1, 65536 do
    local vals = node:read{ tensor = tensor, range = { off, math.min(65536, size - off) } }.values
    for _, v in ipairs(vals) do out[#out + 1] = v end
  end
  return out
end

-- The largest difference between two tensors (on any nodes), relative to
-- the larger of 1 and the reference's largest magnitude.
function R.max_diff(node_a, a, node_b, b)
  local x, y = R.read_all(node_a, a), R.read_all(node_b, b)
  if #x ~= #y then error(string.format("sizes differ: %d and %d", #x, #y), 2) end
  local worst, scale = 0, 1
  for e = 1, #x do
    worst = math.max(worst, math.abs(x[e] - y[e]))
    scale = math.max(scale, math.abs(y[e]))
  end
  return worst / scale
end

-- node_a's tensor a equals node_b's b to `tol` (relative, R.max_diff).
function R.check_equal(node_a, a, node_b, b, tol, what)
  local d = R.max_diff(node_a, a, node_b, b)
  if not (d <= tol) then
    error(string.format("%s: %s's '%s' differs from the reference by %.3g (tolerance %g)", what,
                        node_a.name, a, d, tol), 2)
  end
  return d
end

-- How far the reference's model moved from the initial one (a norm).
function Ref:moved()
  return (R.distance(self.nodes[1], self.name, self.nodes[1], "w.init"))
end

-- The norm of the difference of two tensors, and of the second (how far a
-- training moved), for the notes: { diff=, step= }.
function R.distance(node_a, a, node_b, b)
  local x, y = R.read_all(node_a, a), R.read_all(node_b, b)
  local d2, n2 = 0, 0
  for e = 1, #x do d2 = d2 + (x[e] - y[e]) ^ 2; n2 = n2 + y[e] ^ 2 end
  return math.sqrt(d2), math.sqrt(n2)
end

return R
