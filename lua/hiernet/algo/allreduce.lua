-- hiernet.algo.allreduce: all-reduce among peers, and synchronous
-- data-parallel training over it.
--
--   local ar = require("hiernet.algo.allreduce")
--   ar.allreduce{ peers = { n1, n2, n3 }, tensor = "g", algo = "ring" }
--   -- afterwards every peer's "g" holds the element-wise sum
--   local s = ar.train{ workers = { ... }, algo = "ring", model = ..., steps = ... }
--
-- An algorithm is a schedule (hiernet.algo.schedules: ring,
-- halving-doubling, tree, hierarchical): per peer, a list of range sends and
-- waits. hiernet.algo.collective runs it: each peer its whole list as one
-- batch request, so a collective costs the controller one round trip per
-- peer, and each step starts on a peer as soon as its data is in (the batch
-- runs a send after the wait before it). Hierarchical groups come from the topology by
-- default (peers that share their first hop towards the top tier); given
-- groups are accepted by every algo and shape only that one. Training with
-- compression all-gathers the compressed updates instead, along the same
-- patterns (ar.gather_schedule), since compressed data cannot be summed on
-- the way.
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")
local sched = require("hiernet.algo.schedules")
local coll = require("hiernet.algo.collective")

-- The collective and the schedules stay reachable as ar.allreduce,
-- ar.plan, ar.ring_schedule, ar.split, ...; ar.SEGMENT_BYTES = x sets the
-- size the schedules read.
local ar = setmetatable({}, {
  __index = function(_, k)
    if coll[k] ~= nil then return coll[k] end
    return sched[k]
  end,
  __newindex = function(t, k, v)
    if coll[k] ~= nil then
      coll[k] = v
    elseif sched[k] ~= nil then
      sched[k] = v
    else
      rawset(t, k, v)
    end
  end,
})
local check = job.check

-- ---- synchronous data-parallel training (paper data-parallel-ring-allreduce) ----
--
-- Each step every worker computes its update (worker optimizer on its shard,
-- as in hiernet.algo.ps: lr * gradient for one sgd step), the updates are
-- all-reduced, and every worker applies the mean with the server optimizer
-- (sgd lr 1 by default: w <- w - mean update), so all copies stay equal.
-- The whole step is one batch per worker. With compression the compressed
-- updates are all-gathered instead, along the algo's own pattern (each
-- worker adds every decompressed update), since compressed data cannot be
-- summed on the way.

local TRAIN_OPTIONS = {
  algo = check.oneof(table.unpack(ar.algos)), groups = coll.check_groups,
  server_opt = check.optimizer, local_steps = check.posint,
}
for k, c in pairs(worker.overlap_options) do TRAIN_OPTIONS[k] = c end
for k, c in pairs(worker.lr_decay_options) do TRAIN_OPTIONS[k] = c end

-- The commands that apply the mean update `u` to the model. The server
-- optimizer keeps its state apart from the worker optimizer's (optim's
-- tensor= state is per name, model='s per model, and a model stepped by
-- two methods would reset its state at every switch): a worker's momentum
-- carries over from one step to the next, as on a worker of its own.
local function apply_commands(J, u, n)
  local so = J.o.server_opt
  return {
    { "scale", { x = u, alpha = 1 / n } },
    { "optim", job.optim_params(so, J.model_name, u, "tensor") },
  }
end

-- The peer commands of an all-gather schedule (ar.gather_schedule): item x
-- travels as tensor "c.<x>".
local function gather_commands(ops, nodes)
  local cmds = {}
  for _, op in ipairs(ops) do
    if op[1] == "send" then
      local to = {}
      for _, q in ipairs(op.to) do to[#to + 1] = nodes[q] end
      -- nowait: the next command starts when the snapshot is queued
      cmds[#cmds + 1] = { "send", { tensor = "c." .. op.item, to = #to == 1 and to[1] or to, nowait = true } }
    else
      local names = {}
      for k, x in ipairs(op.items) do names[k] = "c." .. x end
      cmds[#cmds + 1] = { "wait", { tensors = names, k = #names, from = { nodes[op.from] } } }
    end
  end
  return cmds
end

-- With compression: the r-th worker compresses its update into "c.<r>"
-- (error feedback in "ef"), the compressed updates are all-gathered along
-- the algo's pattern, and every worker adds all N decompressed, in the same
-- order 1..N, into "sum": every worker gets the same sum to the bit.
local function compressed_gather(J, nodes, update, groups)
  local c, n = J.o.compress, #nodes
  local schedule = ar.gather_schedule(J.o.algo or "ring", n, groups)
  local lists = {}
  for r = 1, n do
    local cmds = {
      job.compress_command(c, update, "c." .. r),
      { "tensor", { name = "sum", size = J.model_size } },
    }
    for _, cmd in ipairs(gather_commands(schedule[r], nodes)) do cmds[#cmds + 1] = cmd end
    for x = 1, n do cmds[#cmds + 1] = { "decompress", { tensor = "c." .. x, out = "sum", add = true } } end
    lists[r] = cmds
  end
  return lists, "sum"
end

-- The explicit groups restricted to the active nodes (empty groups go).
local function active_groups(groups, nodes)
  if not groups then return nil end
  local is_active, out = {}, {}
  for _, n in ipairs(nodes) do is_active[n.name] = true end
  for _, g in ipairs(groups) do
    local kept = {}
    for _, n in ipairs(g) do if is_active[n.name] then kept[#kept + 1] = n end end
    if #kept > 0 then out[#out + 1] = kept end
  end
  return out
end

-- One training step of the active workers (ids: their indices): each
-- worker's commands (compute, the collective, apply) as one batch.
local function step_plan(J, W, ids)
  local n, nodes = #ids, {}
  local before, after = {}, {}
  local update
  for r, i in ipairs(ids) do
    nodes[r] = J.workers[i]
    before[r], update = W:update_commands(W.lr[i])
    -- Local steps moved this worker's model: back to where every worker
    -- started the step, so that all apply the same mean update to it.
    if W.writes_model then
      table.insert(before[r], { "axpy", { y = J.model_name, x = update, alpha = 1 } })
    end
  end
  if J.o.compress then
    local groups = ar.index_groups(nodes, J.o.algo or "ring", active_groups(J.o.groups, nodes))
    local lists, sum = compressed_gather(J, nodes, update, groups)
    for r = 1, n do
      local cmds = table.move(before[r], 1, #before[r], 1, {})
      local first = #cmds + 1
      for _, c in ipairs(lists[r]) do cmds[#cmds + 1] = c end
      local last = #cmds
      for _, c in ipairs(apply_commands(J, sum, n)) do cmds[#cmds + 1] = c end
      lists[r] = { cmds = cmds, first = first, last = last }
    end
    ar.rendezvous(nodes, lists)
    return { peers = nodes, lists = lists }
  end
  for r = 1, n do after[r] = apply_commands(J, update, n) end
  return ar.plan{ peers = nodes, tensor = update, algo = J.o.algo or "ring",
                  groups = active_groups(J.o.groups, nodes), size = J.model_size,
                  before = before, after = after, buckets = W.buckets }
end

local function record_step(J, run, ids, t_step)
  -- the rate this step was made with (J.steps already counts it)
  local lr = worker.decayed_lr(J.o.lr_decay, J.o.worker_opt.lr or 0.05, J.steps - 1)
  for r, i in ipairs(ids) do
    local p = run.peers[r]
    local s, control, elapsed = p.summary, p.control_ms or 0, p.elapsed_ms or run.ms
    -- the peer's own time of its batches less compute; the rest of the
    -- collective's time on the controller is its control channel
    -- (control_ms) and the wait for the other peers' replies (wait_ms)
    local comm = math.max(0, elapsed - control - s.compute_ms)
    J:step_row{ worker = i, step = J.steps, time = t_step, loss = s.loss, compute_ms = s.compute_ms,
                comm_ms = comm, wait_ms = math.max(0, run.ms - elapsed), lr = lr, k = #ids,
                bytes = s.bytes, samples = s.samples, control_ms = control }
  end
end
-- Public as ar.record_step(J, run, ids, t_step): one steps.csv row per
-- worker taking part (ids: their indices, in the order of run.peers; run:
-- what ar.run returned; k = #ids): comm_ms the worker's own time of the
-- collective less its compute, control_ms its control channel's share and
-- wait_ms the wait for the other workers' replies; the four add up to the
-- collective's time on the controller.
ar.record_step = record_step

local function active_ids(J)
  local ids = {}
  for i = 1, #J.workers do if J:alive(i) then ids[#ids + 1] = i end end
  return ids
end

-- After a step a fault cut short, some workers may have applied it and some
-- not: every active worker takes the first one's model (and a worker that
-- is back gets it too), so that all go on from one model.
local function resync(J, ids)
  if #ids < 2 then return end
  local to = {}
  for r = 2, #ids do to[#to + 1] = J.workers[ids[r]] end
  J.workers[ids[1]]:send{ tensor = J.model_name, to = to }
  -- What the cut step sent may have landed after its waits were aborted: a
  -- wait of the next step must not take it for its own.
  local names = { "g", "w0", ar.READY }
  for r = 1, #J.workers do
    names[#names + 1] = "c." .. r
    names[#names + 1] = coll.slot_name("g", r)
    names[#names + 1] = coll.slot_name("w0", r)
  end
  local list = {}
  for r, i in ipairs(ids) do list[r] = { J.workers[i], names } end
  J:clear_arrivals(list)
end
-- Public as ar.resync(J, ids): worker ids[1]'s model to the others, and
-- the arrivals a cut step left ("g", "w0", the rendezvous tokens, "c.<r>")
-- cleared on every one of them.
ar.resync = resync

-- Faults (J:group_faults): the collective goes on among the largest group
-- of workers that still reach each other; with on_failure = "fail" the
-- training stops with an error naming the worker away. The waits and
-- transfers of the step in flight are aborted so that no peer waits out a
-- timeout.
local function watch(J, state)
  local hooks = J:group_faults()
  local abort = hooks.on_change
  hooks.on_change = function(i, back)
    state.changed = true
    abort(i, back)
  end
  J:watch_faults(hooks)
end
-- Public as ar.watch(J, state): a collective's fault handling (as above);
-- sets state.changed on every change (for a loop of one's own: J:rounds
-- sees the change by itself), after which the caller runs ar.resync before
-- its next step.
ar.watch = watch

-- The rounds of ar.train (J:rounds): the active workers, resynced after a
-- fault (and at the end, after one the last step did not see: the
-- workers end on one model, as they go on), each step one batch per
-- worker, recorded when it went through.
local function step_rounds(J, W, state)
  return {
    state = state,
    members = function() return active_ids(J) end,
    recover = function(ids) resync(J, ids) end,
    finally = function(ids) resync(J, ids) end,
    step = function(ids) return ar.run(step_plan(J, W, ids)) end,
    record = function(ids, run)
      J.steps = J.steps + 1
      J.updates_applied = J.updates_applied + #ids
      record_step(J, run, ids, J:now())
      if J:eval_due(J.steps) then J:evaluate(J.steps) end
    end,
  }
end

function ar.train(opts)
  local algo = type(opts) == "table" and opts.algo or "ring"
  local J = job.new("allreduce", opts, { mode = algo, options = TRAIN_OPTIONS })
  job.eval_node_among_workers("allreduce.train", J.o)
  worker.check_overlap(J)
  J.o.server_opt = J.o.server_opt or { method = "sgd", lr = 1.0 }
  J.o.server_opt.method = J.o.server_opt.method or "sgd"
  J:setup{ origin = J.workers[1], eval_node = J.workers[1], model_name = "w" }
  local W = worker.new(J, {})
  local state = {}
  if #J.workers > 1 then watch(J, state) end
  J:start_clock()
  J:guard(function() J:rounds(step_rounds(J, W, state)) end)
  return J:finish{ algo = algo }
end

return ar
