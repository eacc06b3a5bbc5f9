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
-- A parameter-server training is replayed from its steps.csv instead
-- (R.ps_pushes, Ref:ps_replay): the timing decided which model each push
-- was computed on and when the server took it; the replay recomputes the
-- rest.
--
-- Reference peer i holds shard i of n (exactly as hiernet.algo.job loads a
-- worker's), so its k-th grad uses the mini-batch the training's worker i
-- used at its k-th grad. Its model is made with the training's arch, init
-- and seed, which is the model the training's origin makes and sends.
local hn = require("hiernet")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "algo_test.lua")

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
-- Ref i's "u" as it leaves the worker: compressed into "c" (residual "ef"
-- with error feedback) with compress, else "u" itself. Returns the name.
function Ref:outgoing(i, compress)
  if not compress then return "u" end
  self.nodes[i]:compress{ tensor = "u", out = "c", method = compress.method, ratio = compress.ratio,
                          residual = compress.error_feedback ~= false and "ef" or nil }
  return "c"
end

-- Ref i's tensor `name`, on ref 1: its name there ("<name>.<i>" when sent).
function Ref:to_first(i, name)
  if i == 1 then return name end
  self.nodes[i]:send{ tensor = name, to = self.nodes[1], as = name .. "." .. i }
  return name .. "." .. i
end

function Ref:sum_updates(ids, scale, compress)
  local first = self.nodes[1]
  first:tensor{ name = "sum", size = first:norm{ x = self.name }.size }
  for _, i in ipairs(ids) do
    local here = self:to_first(i, self:outgoing(i, compress))
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

-- Every value of a tensor.
function R.read_all(node, tensor)
  return T.read_all(node, tensor, node:norm{ x = tensor }.size)
end

-- A fresh network of backend none named `name`: a hub (tier cloud, named
-- hub_name or "hub"), n workers w1..wn linked to it (speeds[i]), and n
-- reference peers. Started; returns net, workers, refs, hub.
function R.star(name, n, speeds, hub_name)
  local net = hn.network{ name = name, backend = "none" }
  local hub = net:node(hub_name or "hub", { tier = "cloud" })
  local workers = {}
  for i = 1, n do
    workers[i] = net:node("w" .. i, { tier = "terminal", speed = speeds and speeds[i] or nil })
    net:link(hub, workers[i])
  end
  local refs = R.nodes(net, n, hub)
  net:start()
  return net, workers, refs, hub
end

-- a and b equal bit for bit: two lists of values, or two lists of lists
-- (one per model).
function R.same_bits(a, b, what)
  if type(a[1]) ~= "table" then a, b = { a }, { b } end
  if #a ~= #b then error(string.format("%s: %d models and %d", what, #a, #b), 2) end
  for m = 1, #a do
    if #a[m] ~= #b[m] then error(string.format("%s: model %d: sizes %d and %d", what, m, #a[m], #b[m]), 2) end
    for e = 1, #a[m] do
      if a[m][e] ~= b[m][e] then
        error(string.format("%s: model %d, element %d: %.9g and %.9g", what, m, e - 1, a[m][e], b[m][e]), 2)
      end
    end
  end
end

-- A case run twice, with equal speeds and with o.speeds = slow (one peer
-- slowed, as slow_what says), whose final values must be the same bit for
-- bit: every peer adds what it receives in an order that the algorithm
-- fixes, never in the order of arrival. case(what, o) returns the values.
function R.both_speeds(case, what, o, slow, slow_what)
  local even = case(what .. ", equal speeds", o)
  o.speeds = slow
  local slowed = case(what .. ", " .. slow_what, o)
  o.speeds = nil
  R.same_bits(even, slowed, what .. ": the same models whatever the speeds")
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

-- ---- replaying a parameter-server training (hiernet.algo.ps) ----
--
-- The pushes of a ps.train, from its steps.csv rows: worker i's j-th push
-- was computed on model version `version` and taken by the server at
-- version `taken` = version + staleness. Which rounds used it the columns
-- say: k present means it took effect (in round `taken`), k absent that it
-- was dropped or came after the last round. fresh: it joined its round's
-- aggregate (staleness 0 in the synchronous modes; every applied push in
-- the asynchronous ones), late: merged (fastest-k late = "merge",
-- adaptive-k's momentum). worker_index maps a steps.csv worker name to i.
function R.ps_pushes(rows, worker_index, applies_each)
  local pushes = {}
  for _, row in ipairs(rows) do
    local i = worker_index[row.worker]
    if not i then error("steps.csv: unknown worker '" .. tostring(row.worker) .. "'", 2) end
    local p = { worker = i, step = row.step, version = row.version, k = row.k, lr = row.lr,
                taken = row.staleness and row.version and row.version + row.staleness or nil }
    if not row.k then p.kind = "none"
    elseif applies_each or row.staleness == 0 then p.kind = "fresh"
    else p.kind = "late" end
    if p.kind ~= "none" and not p.version then error("steps.csv: a push without its version", 2) end
    pushes[#pushes + 1] = p
  end
  -- The server's order: by the version that took them; a worker's own
  -- pushes in its step order (its mini-batches and residual go in that order).
  table.sort(pushes, function(a, b)
    local ta, tb = a.taken or math.huge, b.taken or math.huge
    if ta ~= tb then return ta < tb end
    if a.worker ~= b.worker then return a.worker < b.worker end
    return a.step < b.step
  end)
  return pushes
end

-- Reference peer i's model becomes version v of the replayed server model.
function Ref:ps_pull(i, v)
  local name = "v." .. v
  if i == 1 then self.nodes[1]:copy{ src = name, dst = self.name }
  else self.nodes[1]:send{ tensor = name, to = self.nodes[i], as = self.name } end
end

-- Ref i's "u" compressed range by range (each with a residual of its own,
-- "ef.<s>", as a worker compresses its slice for sharded server s), and,
-- unless only the residuals must move (dense = false), decompressed into
-- "dense" on ref 1 at each range's offset. Ref 1's slices go there through
-- ref 2: a peer does not send to itself.
function Ref:ps_ranged(i, ranges, compress, dense)
  local node, first = self.nodes[i], self.nodes[1]
  if dense then first:tensor{ name = "dense", size = self.size } end
  for s, range in ipairs(ranges) do
    local c = "c." .. s
    node:compress{ tensor = "u", out = c, method = compress.method, ratio = compress.ratio, range = range,
                   residual = compress.error_feedback ~= false and "ef." .. s or nil }
    if dense then
      local from, slice = node, "d." .. s
      node:decompress{ tensor = c, out = slice }
      if i == 1 then
        node:send{ tensor = slice, to = self.nodes[2], as = "relay" }
        from, slice = self.nodes[2], "relay"
      end
      from:send{ tensor = slice, to = first, as = "dense", range = { 0, range[2] }, at = range[1] }
    end
  end
end

-- Adds weight * (ref i's "u", compressed first with `compress`, residual
-- "ef") into `into` on ref 1. Compresses even when weight is nil (a
-- dropped push: the worker's residual moved all the same) and adds nothing.
-- ranges: the sharded servers' ranges, each compressed alone (Ref:ps_ranged).
function Ref:ps_fold(i, into, weight, compress, ranges)
  local first = self.nodes[1]
  if compress and ranges then
    self:ps_ranged(i, ranges, compress, weight ~= nil)
    if weight then first:axpy{ y = into, x = "dense", alpha = weight } end
    return
  end
  local name = self:outgoing(i, compress)
  if not weight then return end
  local here = self:to_first(i, name)
  if compress then
    first:decompress{ tensor = here, out = "dense" }
    here = "dense"
  end
  first:axpy{ y = into, x = here, alpha = weight }
end

-- The server optimizer's step on the replayed server model "srv" (state
-- per tensor, apart from every worker optimizer's).
function Ref:ps_server_step(grad, so)
  self.nodes[1]:optim{ tensor = "srv", grad = grad, method = so.method or "sgd", lr = so.lr or 1,
                       momentum = so.momentum, beta1 = so.beta1, beta2 = so.beta2, eps = so.eps,
                       weight_decay = so.weight_decay }
end

-- Closes round r of the replay: the mean of the fresh updates (k of them)
-- applied with the server optimizer, or with adaptive-k's momentum server
-- (m <- gamma m + mean; w <- w - lr (1 - gamma) m). Keeps version r + 1.
function Ref:ps_close(r, k, o)
  local first = self.nodes[1]
  if not o.applies_each then
    if k == 0 then error(string.format("replay: round %d has no fresh update", r), 2) end
    if o.momentum_server then
      local gamma = o.gamma
      first:scale{ x = "mom", alpha = gamma }
      first:axpy{ y = "mom", x = "acc", alpha = 1 / k }
      first:axpy{ y = "srv", x = "mom", alpha = -(o.server_opt.lr or 1) * (1 - gamma) }
    else
      first:scale{ x = "acc", alpha = 1 / k }
      self:ps_server_step("acc", o.server_opt)
    end
    first:tensor{ name = "acc", size = self.size }
  end
  first:copy{ src = "srv", dst = "v." .. (r + 1) }
end

-- ---- adaptive-k's Barzilai-Borwein rate (docs/algorithms.md) ----

local BB = { min_lr = 0.01, max_lr = 10, smoothing = 0.5, armijo_c = 0.5, backtrack = 0.5, max_backtracks = 5 }

-- Armijo backtracking on ref i (its "g" and the batch of its last grad):
-- halves lr until L(w - lr g) <= L(w) - c lr ||g||^2, at most
-- max_backtracks times. Returns the rate and how close the closest test
-- came to its bound (relative): a near tie may fall either way in float.
function Ref:bb_armijo(i, lr, loss, gnorm2, b)
  local node, closest = self.nodes[i], math.huge
  for _ = 1, b.max_backtracks do
    node:copy{ src = self.name, dst = "trial" }
    node:axpy{ y = "trial", x = "g", alpha = -lr }
    local trial = node:grad{ model = "trial", out = "g_trial", same_batch = true }.loss
    local bound = loss - b.armijo_c * lr * gnorm2
    closest = math.min(closest, math.abs(trial - bound) / math.max(1, math.abs(bound)))
    if trial <= bound then return lr, closest end
    lr = lr * b.backtrack
  end
  return math.max(lr, b.min_lr), closest
end

-- One BB step of ref i on its model: the gradient "g" on its next batch,
-- and the rate alpha <- (1 - beta) alpha + beta clamp(||s||^2 / <s, y>)
-- (s, y: the change of model and of gradient since its last step, both
-- gradients on this batch), an increase only through Armijo. lr0: the
-- first rate (worker_opt.lr). Returns the rate and Armijo's closest call.
function Ref:bb_step(i, lr0)
  local node, m = self.nodes[i], self.name
  self.bb = self.bb or {}
  local st = self.bb[i]
  if not st then
    st = { lr = lr0 }
    self.bb[i] = st
    node:model{ name = "trial", arch = self.o.model, init = self.o.init, seed = self.o.seed or 1 }
  end
  local b = { min_lr = BB.min_lr * lr0, max_lr = BB.max_lr * lr0, smoothing = BB.smoothing,
              armijo_c = BB.armijo_c, backtrack = BB.backtrack, max_backtracks = BB.max_backtracks }
  local loss = node:grad{ model = m, out = "g", batch = self.batch }.loss
  local gnorm2 = node:norm{ x = "g" }.value ^ 2
  local lr, closest = st.lr, math.huge
  if st.has_prev then
    node:copy{ src = "w_prev", dst = "trial" }
    node:grad{ model = "trial", out = "g_prev", same_batch = true }
    node:copy{ src = m, dst = "s" }
    node:axpy{ y = "s", x = "w_prev", alpha = -1 }
    node:copy{ src = "g", dst = "y" }
    node:axpy{ y = "y", x = "g_prev", alpha = -1 }
    local ss, sy = node:dot{ x = "s", y = "s" }.value, node:dot{ x = "s", y = "y" }.value
    if ss > 0 and sy > 0 then
      lr = (1 - b.smoothing) * st.lr + b.smoothing * math.min(b.max_lr, math.max(b.min_lr, ss / sy))
    end
  end
  node:copy{ src = m, dst = "w_prev" }
  st.has_prev = true
  if lr > st.lr then lr, closest = self:bb_armijo(i, lr, loss, gnorm2, b) end
  st.lr = lr
  return lr, closest
end

-- The update of push p with the BB rate: the replay's own rate must be the
-- one the worker used (its row's lr; a near tie of Armijo's test excepted:
-- o.bb_skipped counts those), and the update is made with the row's, so
-- that one float's difference does not carry on. Mismatches go to
-- o.bb_mismatch.
function Ref:ps_bb_update(p, o)
  local lr, closest = self:bb_step(p.worker, o.worker_opt.lr or 0.05)
  if closest < 1e-5 then
    o.bb_skipped = (o.bb_skipped or 0) + 1
  elseif math.abs(lr - p.lr) > 1e-4 * p.lr then
    o.bb_mismatch = o.bb_mismatch or {}
    table.insert(o.bb_mismatch, string.format("worker %d step %d: rate %.9g, the replay's %.9g", p.worker, p.step, p.lr, lr))
  end
  local node = self.nodes[p.worker]
  node:copy{ src = "g", dst = "u" }
  node:scale{ x = "u", alpha = p.lr }
end

-- Push p, computed on ref p.worker from the version it was computed on and
-- taken as the server took it: fresh into the round's aggregate (applied
-- at once when each push is), late into the merge target with its weight,
-- dropped nowhere (its compression still moves the worker's residual).
-- Returns whether it counts in its round's k.
function Ref:ps_take(p, o, ranges)
  self:ps_pull(p.worker, p.version)
  if o.bb then self:ps_bb_update(p, o) else self:local_update(p.worker, o.worker_opt, o.local_steps) end
  if p.kind == "fresh" then
    self:ps_fold(p.worker, "acc", 1, o.compress, ranges)
    if o.applies_each then
      self:ps_server_step("acc", o.server_opt)
      self.nodes[1]:tensor{ name = "acc", size = self.size }
    end
    return true
  elseif p.kind == "late" then
    local into = o.momentum_server and "mom" or "acc"
    self:ps_fold(p.worker, into, o.late_weight(p.taken - p.version), o.compress, ranges)
  else
    self:ps_fold(p.worker, "acc", nil, o.compress, ranges)
  end
  return false
end

-- Replays a ps.train from its pushes (R.ps_pushes): each push's update is
-- computed on ref `worker` from the version it was computed on, in the
-- server's order, and folded in as the server did; `rounds` rounds are
-- applied (the training's summary steps). o: worker_opt=, local_steps=,
-- server_opt=, compress=, applies_each= (asp, ssp: each push applied
-- alone), momentum_server= with gamma=, late_weight(tau) (merged pushes),
-- bb= (adaptive-k's Barzilai-Borwein rate: Ref:ps_bb_update),
-- ranges(size) (the sharded servers' ranges: with compress, each range of
-- an update is compressed alone).
-- The final model is "srv" on ref 1; "v.<r>" holds version r. Returns the
-- k of every round, to check against the training's.
function Ref:ps_replay(pushes, rounds, o)
  local first = self.nodes[1]
  self.size = first:norm{ x = self.name }.size
  local ranges = o.ranges and o.ranges(self.size)
  for s = 1, ranges and #ranges or 0 do -- no residual of an earlier replay on these peers
    each(self.nodes, function(_, node) node:drop{ name = "ef." .. s } end)
  end
  first:copy{ src = "w.init", dst = "srv" }
  first:copy{ src = "w.init", dst = "v.0" }
  first:tensor{ name = "acc", size = self.size }
  if o.momentum_server then first:tensor{ name = "mom", size = self.size } end
  local r, k, ks = 0, 0, {}
  local function close()
    self:ps_close(r, k, o)
    ks[r + 1] = k
    r, k = r + 1, 0
  end
  for _, p in ipairs(pushes) do
    while p.taken and p.taken > r and r < rounds do close() end
    if p.kind ~= "none" and p.taken and p.taken >= rounds then
      error(string.format("replay: a push of worker %d taken at version %d, after the last round", p.worker, p.taken))
    end
    if p.taken then -- a push the server never took (training over) changed nothing
      if self:ps_take(p, o, ranges) then k = k + 1 end
    end
  end
  while r < rounds do close() end
  return ks
end

return R
