-- hiernet.algo.worker: what a worker computes in one step, and how updates
-- move, shared by the algorithms.
--
--   local W = worker.new(J, { want_norm = true, bb = false })
--   W:setup()
--   local r = W:step(i, { { node = server, as = "u.1" } })
--   -- r = { loss=, samples=, compute_ms=, push_ms=, push_bytes=, norm2=, lr= }
--   worker.accumulate(server, "u.1", "acc", 1, J.o.compress)
--
-- A step runs the worker optimizer for `local_steps` steps on the worker's
-- model "w" and pushes the update u = w_before - w_after. With one local
-- step of plain sgd that is lr * gradient, computed without touching the
-- model (so a model the server sent stays current). The whole step -- the
-- compute commands and the push -- is one batch request: one round trip.
--
-- Compression (job option `compress`): the update is compressed on the
-- worker (with error feedback: the part compression dropped is kept in a
-- residual and added to the next update) and decompressed by the receiver
-- into its target; the bytes counted are the compressed ones.
--
-- Barzilai-Borwein learning rate (adaptive-k paper, Sec. 4.3, Algorithm 2,
-- after De et al.'s big-batch SGD): each worker sets its own rate from the
-- two-point step alpha_BB = ||s||^2 / <s, y>, with s = w_t - w_{t-1} (its
-- consecutive models) and y = g_B(w_t) - g_B(w_{t-1}) (the gradients at
-- both on this step's mini-batch B), clamped to [min_lr, max_lr] (multiples
-- of worker_opt.lr) and smoothed, alpha <- (1 - beta) alpha +
-- beta alpha_BB; a rate above the last accepted one must pass the Armijo
-- test on the same mini-batch, L(w - alpha g) <= L(w) - c alpha ||g||^2,
-- else it is halved (backtrack) until it does.
local job = require("hiernet.algo.job")

local worker = {}

-- ---- overlap: gradient buckets (docs/algorithms.md "Overlap") ----
--
-- overlap = true, bucket_mb = 25: the grad makes buckets (peer/commands_ml_buckets.c,
-- kernels/buckets.h: PyTorch DDP's, from the last layer, closed at bucket_mb
-- MiB) and bucket{index = k} holds the worker until bucket k's layers are
-- done; the commands that send bucket k come right after it, so they run
-- while the device computes the next layers. The gradient is computed whole
-- and equal to the bit, so the model is the one without overlap.

-- The options ps and allreduce take for it.
worker.overlap_options = { overlap = job.check.boolean, bucket_mb = job.check.posnumber }

-- DDP's default cap (torch.nn.parallel.DistributedDataParallel, bucket_cap_mb).
worker.DEFAULT_BUCKET_MB = 25

-- ---- learning-rate decay (allreduce option lr_decay) ----
--
-- lr_decay = { at = { s1, s2, ... }, factor = 0.1 }: the worker's rate is
-- multiplied by `factor` once the job has made s1 steps, again at s2, ...
-- (PyTorch's MultiStepLR counted in steps): a step-decay schedule, which
-- settles what a constant rate leaves swinging between evaluations.

local function check_lr_decay(what, v)
  local function list(w, x)
    if type(x) ~= "table" then job.fail("%s: expected a list of steps, got %s", w, tostring(x)) end
    -- a key past the list (x = 6, or after a hole) would be skipped unread
    local n = 0
    for _ in pairs(x) do n = n + 1 end
    for k = 1, n do
      if x[k] == nil then job.fail("%s: expected a list of steps, got keys other than 1..%d", w, n) end
    end
    return x
  end
  v = job.check.fields{ at = list, factor = job.check.fraction }(what, v)
  if not v.at or not v.factor then job.fail("%s: give both 'at' (a list of steps) and 'factor'", what) end
  local prev = 0
  for k, s in ipairs(v.at) do
    job.check.posint(what .. ".at[" .. k .. "]", s)
    if s <= prev then job.fail("%s.at[%d]: %d is not after the step before it (%d)", what, k, s, prev) end
    prev = s
  end
  if #v.at == 0 then job.fail("%s.at: expected at least one step", what) end
  return v
end
worker.lr_decay_options = { lr_decay = check_lr_decay }

-- The rate of a step made after `steps` steps: lr times factor per
-- milestone passed.
function worker.decayed_lr(decay, lr, steps)
  if not decay then return lr end
  for _, s in ipairs(decay.at) do
    if steps >= s then lr = lr * decay.factor end
  end
  return lr
end

-- Is a step's update lr x gradient (one local step of plain sgd), which a
-- step can make without touching the model?
function worker.plain_sgd(J)
  local opt = J.o.worker_opt
  -- A model holding batch-norm running statistics (cnn:resnet20, see
  -- kernels/model.h) steps through optim, which folds them in: the shortcut
  -- u = lr * gradient would push lr times its batch statistics instead.
  local running_stats = tostring(J.o.model):match("^cnn:resnet") ~= nil
  return (J.o.local_steps or 1) == 1 and opt.method == "sgd" and not opt.weight_decay
    and not running_stats
end

-- What overlap cannot do: the refusal in one line naming the option at
-- fault, or nil. bb: the step uses the Barzilai-Borwein rate.
local function overlap_refusal(J, bb)
  local name = J.algorithm .. ".train"
  if J.o.bucket_mb and not J.o.overlap then
    return name .. ": option 'bucket_mb' goes with overlap = true"
  end
  if not J.o.overlap then return nil end
  if J.o.compress then
    return name .. ": overlap = true with compress: refused (a compressed update is made "
      .. "from the whole gradient, top-k and error feedback over all of it; see docs/algorithms.md)"
  end
  if bb then
    return name .. ": overlap = true with the Barzilai-Borwein rate (bb): refused (its rate "
      .. "needs the whole gradient before any of it is sent; give bb = false)"
  end
  if not worker.plain_sgd(J) then
    return name .. ": overlap = true needs the update to be lr x gradient (worker_opt sgd "
      .. "without weight_decay, local_steps = 1, no batch-norm statistics): an optimizer's "
      .. "update exists only after its step over the whole gradient"
  end
end

-- The buckets of the job's model over `size` elements ({offset=, count=,
-- ready_share=} in the order they are ready).
local function overlap_plan(J, size)
  J.o.bucket_mb = J.o.bucket_mb or worker.DEFAULT_BUCKET_MB
  local b, err = require("hiernet").grad_buckets(J.o.model, size, J.o.bucket_mb)
  if not b then job.fail("%s.train: option 'bucket_mb': %s", J.algorithm, err) end
  return b
end

-- Refuses what overlap cannot do, before anything is made (call it after
-- job.new): the options, and a cap that makes too many buckets.
function worker.check_overlap(J, bb)
  local refused = overlap_refusal(J, bb)
  if refused then job.fail("%s", refused) end
  if not J.o.overlap then return end
  local hn = require("hiernet")
  local zoo = hn.zoo(J.o.model)
  local size = hn.model_check(J.o.model) or (zoo and zoo.params)
  if size then overlap_plan(J, size) end
end

local W = {}
W.__index = W

-- min_lr and max_lr are multiples of the worker's first rate (worker_opt.lr):
-- the rate may move within [lr / 100, 10 lr].
local BB_DEFAULTS = { min_lr = 0.01, max_lr = 10, smoothing = 0.5, armijo_c = 0.5,
                      backtrack = 0.5, max_backtracks = 5 }

-- worker.new(J, { want_norm=, bb=, bb_opts=, model = "w", claim_model = false })
-- claim_model: each step's batch also claims the model's pending arrivals
-- (wait{clear}): an algorithm that pulls without waiting would otherwise
-- leave them pending on the peer up to its cap.
function worker.new(J, o)
  local opt = J.o.worker_opt
  local steps = J.o.local_steps or 1
  local plain_sgd = worker.plain_sgd(J)
  local self = setmetatable({
    J = J, opt = opt, local_steps = steps, want_norm = o.want_norm, compress = J.o.compress,
    model = o.model or J.model_name or "w", bb = o.bb, lr = {}, bb_state = {},
    claim_model = o.claim_model,
    bb_opts = {},
    -- Does a step write the worker's model? Then it must pull before the next one.
    writes_model = not plain_sgd and not o.bb,
  }, W)
  self.buckets = J.o.overlap and overlap_plan(J, J.model_size) or nil
  for k, v in pairs(BB_DEFAULTS) do self.bb_opts[k] = (o.bb_opts or {})[k] or v end
  local lr0 = opt.lr or 0.05
  self.bb_opts.min_lr, self.bb_opts.max_lr = self.bb_opts.min_lr * lr0, self.bb_opts.max_lr * lr0
  for i = 1, #J.workers do self.lr[i] = lr0 end
  return self
end

-- Per-worker tensors the step needs (the BB trial model), on worker i.
function W:setup_worker(i)
  self.bb_state[i] = nil
  -- the trial model is made like the job's own: by profile, with its
  -- surrogate, where the job computes by profile
  local o = self.J.o
  if self.bb then
    self.J.workers[i]:model{ name = "trial", arch = o.model, seed = o.seed, compute = o.compute, learn = o.learn }
  end
end

function W:setup()
  local hn = require("hiernet")
  local tasks = {}
  for i = 1, #self.J.workers do tasks[i] = hn.spawn(function() self:setup_worker(i) end) end
  hn.wait_all(tasks)
end


-- Commands computing the update of one step; returns them and the update's name.
function W:update_commands(lr)
  local batch, m = self.J.o.batch, self.model
  lr = worker.decayed_lr(self.J.o.lr_decay, lr, self.J.steps)
  if not self.writes_model then
    return { { "grad", { model = m, out = "g", batch = batch, bucket_mb = self.buckets and self.J.o.bucket_mb } },
             { "scale", { x = "g", alpha = lr } } }, "g"
  end
  local cmds = { { "copy", { src = m, dst = "w0" } } }
  for _ = 1, self.local_steps do
    cmds[#cmds + 1] = { "grad", { model = m, out = "g", batch = batch } }
    cmds[#cmds + 1] = { "optim", job.optim_params(self.opt, m, "g", nil, lr) }
  end
  cmds[#cmds + 1] = { "axpy", { y = "w0", x = m, alpha = -1 } } -- w0 <- w_before - w_after
  return cmds, "w0"
end

-- The push commands of `update`: one send per target ({node=, as=, add=,
-- range=}), and the claim of the model's arrivals (worker.new's
-- claim_model). With compression the update is compressed first (error
-- feedback in "ef"); a target with a range (a sharded server) gets its
-- range compressed alone, with a residual of its own ("ef.<target>"), so
-- each server decompresses exactly its slice.
function W:push_commands(cmds, update, targets)
  if self.buckets then return self:bucket_push_commands(cmds, update, targets) end
  local c = self.compress
  if c and not (targets[1] and targets[1].range) then
    cmds[#cmds + 1] = job.compress_command(c, update, "uc")
  end
  for n, t in ipairs(targets) do
    local send = { tensor = update, to = t.node, as = t.as, add = t.add or nil }
    if c and t.range then
      cmds[#cmds + 1] = job.compress_command(c, update, "uc." .. n, { range = t.range, residual = "ef." .. n })
      send.tensor = "uc." .. n
    elseif c then
      send.tensor = "uc"
    elseif t.range then
      send.range, send.at = t.range, 0
    end
    cmds[#cmds + 1] = { "send", send }
  end
  if self.claim_model then cmds[#cmds + 1] = { "wait", { tensor = self.model, clear = true } } end
end

-- With overlap: each bucket's sends right after the bucket is ready, nowait
-- (the next bucket's wait starts at once; the batch ends when every send is
-- acknowledged). Ranges land at their own offset of the target.
function W:bucket_push_commands(cmds, update, targets)
  for k, b in ipairs(self.buckets) do
    cmds[#cmds + 1] = { "bucket", { index = k } }
    for _, t in ipairs(targets) do
      cmds[#cmds + 1] = { "send", { tensor = update, to = t.node, as = t.as, add = t.add or nil,
                                    range = { b.offset, b.count }, nowait = true } }
    end
  end
  if self.claim_model then cmds[#cmds + 1] = { "wait", { tensor = self.model, clear = true } } end
end

-- Runs a step's batch on node: what its results say (job.batch_summary),
-- its sends as the push, control_ms its control channel's share
-- (job.timed_batch).
local function run_step_batch(node, cmds)
  local reply, control_ms = job.timed_batch(node, cmds)
  local r = job.batch_summary(reply.results, cmds)
  r.push_ms, r.push_bytes, r.control_ms = r.send_ms, r.bytes, control_ms
  return r
end

-- One step of worker i (index into J.workers): compute, then push to targets.
function W:step(i, targets)
  local node = self.J.workers[i]
  if self.bb then return self:bb_step(i, targets) end
  local cmds, update = self:update_commands(self.lr[i])
  if self.want_norm then cmds[#cmds + 1] = { "norm", { x = update } } end
  self:push_commands(cmds, update, targets)
  local r = run_step_batch(node, cmds)
  r.lr = self.lr[i]
  return r
end

-- ---- Barzilai-Borwein rate (adaptive-k) ----

-- The gradient, its norm, and (from the second step on) ||s||^2 and <s, y>.
-- y is the change of the gradient along s on ONE mini-batch: the gradient
-- at the previous model is recomputed on this step's batch (Eq. 22 of the
-- paper; gradients of two different batches differ mostly by their noise,
-- which made <s, y> near zero and the step explode).
function W:bb_measure(node, st)
  local m, batch = self.model, self.J.o.batch
  local cmds = { { "grad", { model = m, out = "g", batch = batch } }, { "norm", { x = "g" } } }
  if st.has_prev then
    local more = {
      { "copy", { src = "w_prev", dst = "trial" } },
      { "grad", { model = "trial", out = "g_prev", same_batch = true } },
      { "copy", { src = m, dst = "s" } }, { "axpy", { y = "s", x = "w_prev", alpha = -1 } },
      { "copy", { src = "g", dst = "y" } }, { "axpy", { y = "y", x = "g_prev", alpha = -1 } },
      { "dot", { x = "s", y = "s" } }, { "dot", { x = "s", y = "y" } },
    }
    for _, c in ipairs(more) do cmds[#cmds + 1] = c end
  end
  cmds[#cmds + 1] = { "copy", { src = m, dst = "w_prev" } }
  local res = node:batch(cmds).results
  local out = { loss = res[1].loss, samples = res[1].batch, gnorm2 = res[2].value ^ 2,
                ms = job.sum_ms(res) }
  if st.has_prev then out.ss, out.sy = res[9].value, res[10].value end
  st.has_prev = true
  return out
end

-- The BB proposal, clamped and smoothed (nil on the first step or when the
-- curvature <s, y> is not positive: the rate stays).
function worker.bb_rate(prev_lr, ss, sy, o)
  if not ss or not sy or sy <= 0 or ss <= 0 then return prev_lr end
  local bb = math.min(o.max_lr, math.max(o.min_lr, ss / sy))
  return (1 - o.smoothing) * prev_lr + o.smoothing * bb
end

-- Armijo backtracking on the batch of the last grad: halves lr until
-- L(w - lr g) <= L(w) - c lr ||g||^2. Returns the rate and the compute ms.
function W:armijo(node, lr, loss, gnorm2)
  local o, ms = self.bb_opts, 0
  for _ = 1, o.max_backtracks do
    local res = node:batch{
      { "copy", { src = self.model, dst = "trial" } },
      { "axpy", { y = "trial", x = "g", alpha = -lr } },
      { "grad", { model = "trial", out = "g_trial", same_batch = true } },
    }.results
    ms = ms + job.sum_ms(res)
    if res[3].loss <= loss - o.armijo_c * lr * gnorm2 then return lr, ms end
    lr = lr * o.backtrack
  end
  return math.max(lr, o.min_lr), ms
end

function W:bb_step(i, targets)
  local node = self.J.workers[i]
  local st = self.bb_state[i] or {}
  self.bb_state[i] = st
  local m = self:bb_measure(node, st)
  local lr = worker.bb_rate(self.lr[i], m.ss, m.sy, self.bb_opts)
  local armijo_ms = 0
  if lr > self.lr[i] then lr, armijo_ms = self:armijo(node, lr, m.loss, m.gnorm2) end
  self.lr[i] = lr
  local cmds = { { "scale", { x = "g", alpha = lr } } }
  self:push_commands(cmds, "g", targets)
  local r = run_step_batch(node, cmds)
  r.compute_ms = r.compute_ms + m.ms + armijo_ms
  r.loss, r.samples, r.lr = m.loss, m.samples, lr
  r.norm2 = lr * lr * m.gnorm2
  return r
end

-- ---- the receiving side ----

-- Adds weight * (the update in `slot`) into `into` on node, decompressing
-- it first when compression is on.
function worker.accumulate(node, slot, into, weight, compress)
  if not compress then
    node:axpy{ y = into, x = slot, alpha = weight }
  elseif weight == 1 then
    node:decompress{ tensor = slot, out = into, add = true }
  else
    node:batch{ { "decompress", { tensor = slot, out = "dense" } },
                { "axpy", { y = into, x = "dense", alpha = weight } } }
  end
end

-- The name of a dense update in `slot` (decompressing it into "dense" when
-- compression is on), with the commands that make it.
function worker.dense_commands(slot, compress)
  if not compress then return {}, slot end
  return { { "decompress", { tensor = slot, out = "dense" } } }, "dense"
end

return worker
