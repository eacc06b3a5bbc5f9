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
-- waits. Each peer runs its whole list as one batch request, so a
-- collective costs the controller one round trip per peer, and each step
-- starts on a peer as soon as its data is in (the batch runs a send after
-- the wait before it). Hierarchical groups come from the topology by
-- default (peers that share their first hop towards the top tier); given
-- groups are accepted by every algo and shape only that one. Training with
-- compression all-gathers the compressed updates instead, along the same
-- patterns (ar.gather_schedule), since compressed data cannot be summed on
-- the way.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")
local sched = require("hiernet.algo.schedules")

-- The schedules stay reachable as ar.ring_schedule, ar.split, ...; and
-- ar.SEGMENT_BYTES = x sets the size the schedules read.
local ar = setmetatable({}, {
  __index = sched,
  __newindex = function(t, k, v)
    if sched[k] ~= nil then sched[k] = v else rawset(t, k, v) end
  end,
})
local check, fail = job.check, job.fail
local BATCH_MAX = sched.BATCH_MAX

-- ---- groups from the topology ----

-- The node of the top tier (cloud, then edge) to group peers under, or nil.
local function top_node(net)
  for _, tier in ipairs{ "cloud", "edge" } do
    for _, n in ipairs(net:nodes()) do if n.tier == tier then return n end end
  end
end

-- Peers that share their first hop towards the top tier form a group; its
-- leader is the first of them in `peers` order.
function ar.default_groups(peers)
  local net = peers[1].network
  local top = top_node(net)
  local order, by_key = {}, {}
  for i, p in ipairs(peers) do
    local key = "all"
    if top and top ~= p then key = net:route(p, top)[2] end
    if not by_key[key] then by_key[key] = {}; order[#order + 1] = key end
    table.insert(by_key[key], i)
  end
  local groups = {}
  for _, key in ipairs(order) do groups[#groups + 1] = by_key[key] end
  return groups
end

-- Peer indices of `groups` given as lists of nodes.
local function group_indices(peers, groups)
  local index = {}
  for i, p in ipairs(peers) do index[p.name] = i end
  local out, seen = {}, {}
  for g, list in ipairs(groups) do
    out[g] = {}
    for _, node in ipairs(list) do
      local i = index[node.name]
      if not i then fail("allreduce: groups[%d]: node '%s' is not one of the peers", g, node.name) end
      if seen[i] then fail("allreduce: node '%s' is in two groups", node.name) end
      seen[i] = true
      out[g][#out[g] + 1] = i
    end
  end
  for i, p in ipairs(peers) do
    if not seen[i] then fail("allreduce: peer '%s' is in no group", p.name) end
  end
  return out
end
-- Public as ar.group_indices(peers, groups) -> lists of peer indices: the
-- group checker a module of its own may use (every peer in exactly one
-- group, errors naming the node).
ar.group_indices = group_indices


-- ---- running a schedule ----

-- Adds from several senders into one peer: float sums depend on their
-- order, and adds applied as they arrive would make the result depend on
-- the peers' speeds in its last bits. A peer that two or more peers add
-- into receives their adds into a slot per sender ("<t>.in.<q>", a plain
-- range receive) and adds each itself, right after the wait that claims
-- it, in the order of that wait's senders: the same sum to the bit
-- whatever the timing. A peer with one adding sender (every peer of a
-- ring) takes its adds straight into t, in that sender's order.
local function slot_name(t, q) return t .. ".in." .. q end

-- Per receiver r: the peers that add into it, and per sender q the queue
-- of q's sends to r in q's order (a connection delivers them in order).
local function incoming_of(schedule)
  local n = #schedule
  local incoming, adders, seen = {}, {}, {}
  for r = 1, n do incoming[r], adders[r], seen[r] = {}, {}, {} end
  for q = 1, n do
    for _, op in ipairs(schedule[q]) do
      if op[1] == "send" then
        local queue = incoming[op.to][q] or {}
        incoming[op.to][q] = queue
        queue[#queue + 1] = op
        if op.add and not seen[op.to][q] then
          seen[op.to][q] = true
          adders[op.to][#adders[op.to] + 1] = q
        end
      end
    end
  end
  return incoming, adders
end

-- Peer r's operations as peer commands on tensor t (size elements).
-- Consecutive sends of the same range become one send to a list (one
-- snapshot, sent in parallel).
local function commands_of(schedule, r, peers, t, incoming, uses_slots)
  local cmds = {}
  local function as_of(op) return uses_slots[op.to] and op.add and slot_name(t, r) or nil end
  local ops = schedule[r]
  for i, op in ipairs(ops) do
    local prev = ops[i - 1]
    if op[1] == "send" and prev and prev[1] == "send" and prev.range[1] == op.range[1]
        and prev.range[2] == op.range[2] and prev.add == op.add and as_of(prev) == as_of(op) then
      local to = cmds[#cmds][2].to
      if type(to) ~= "table" then cmds[#cmds][2].to = { to } end
      table.insert(cmds[#cmds][2].to, peers[op.to])
    elseif op[1] == "send" then
      -- nowait: the next step starts when its data is in, not when this
      -- send's ack is back (one latency less per step)
      local slot = as_of(op)
      cmds[#cmds + 1] = { "send", { tensor = t, to = peers[op.to], range = op.range, as = slot,
                                    add = (op.add and not slot) or nil, nowait = true } }
    else
      local from, names = {}, { t }
      for _, q in ipairs(op.from) do
        from[#from + 1] = peers[q]
        if uses_slots[r] then names[#names + 1] = slot_name(t, q) end
      end
      cmds[#cmds + 1] = { "wait", { tensors = names, k = op.k, from = from } }
      if uses_slots[r] then
        -- each sender's next send to r is what this wait claims (one each)
        if op.k ~= #op.from then fail("allreduce: a wait for %d of %d senders cannot add from slots", op.k, #op.from) end
        for _, q in ipairs(op.from) do
          local sent = table.remove(incoming[r][q], 1)
          if sent.add then
            cmds[#cmds + 1] = { "axpy", { y = t, x = slot_name(t, q), range = sent.range } }
          end
        end
      end
    end
  end
  return cmds
end

-- The commands of every peer: lists[r] = { prep = {...}, cmds = {...} }
-- for peer r; prep makes its slots, which must exist before any peer may
-- send to it (ar.rendezvous sends the token after them).
local function schedule_commands(schedule, peers, t, size)
  local incoming, adders = incoming_of(schedule)
  local uses_slots = {}
  for r = 1, #peers do
    if #adders[r] > 1 then uses_slots[r] = adders[r] end
  end
  local lists = {}
  for r = 1, #peers do
    local prep = {}
    for _, q in ipairs(uses_slots[r] or {}) do prep[#prep + 1] = { "tensor", { name = slot_name(t, q), size = size } } end
    lists[r] = { prep = prep, cmds = commands_of(schedule, r, peers, t, incoming, uses_slots) }
  end
  return lists
end

-- ---- the receiver's rendezvous ----
--
-- A peer's collective commands follow its own step (`before`: the compute
-- that writes the tensor) in one batch, and the peers run their batches
-- without a barrier between them. A neighbour that is done first would
-- otherwise send into this peer's tensor while its step still writes it (an
-- add lost under the step's output, or made to the tensor of the step
-- before), or into a tensor the peer has not created yet. So every peer,
-- once its step is done, sends a one-element token ("ar.ready") to every
-- peer that will send to it, and a peer sends to another only after that
-- one's token is in. What happens after that is ordered by the schedule's
-- own waits; the next collective's sends wait for the next tokens, which a
-- peer sends only after its whole batch. Cost: at most one latency per
-- collective, when the last peer to finish its step is a receiver.
ar.READY = job.READY_TENSOR

-- The collective part of lists[r].cmds (first..last) with the rendezvous
-- added: the token sent to this peer's senders right before it, a wait for
-- a receiver's token right before the first send to it. lists[r] =
-- { cmds=, first=, last= } as ar.plan makes them; changed in place.
function ar.rendezvous(peers, lists)
  local index = {}
  for r, p in ipairs(peers) do index[p.name] = r end
  local senders, seen = {}, {}
  for r = 1, #peers do senders[r], seen[r] = {}, {} end
  local function targets(params)
    return type(params.to) == "table" and params.to or { params.to }
  end
  for q, l in ipairs(lists) do
    for k = l.first, l.last do
      local c = l.cmds[k]
      if c[1] == "send" then
        for _, node in ipairs(targets(c[2])) do
          local r = index[node.name]
          if r and r ~= q and not seen[r][q] then
            seen[r][q] = true
            senders[r][#senders[r] + 1] = peers[q]
          end
        end
      end
    end
  end
  for r, l in ipairs(lists) do
    local out = table.move(l.cmds, 1, l.first - 1, 1, {})
    if #senders[r] > 0 then
      out[#out + 1] = { "tensor", { name = ar.READY, size = 1 } }
      out[#out + 1] = { "send", { tensor = ar.READY, to = senders[r], nowait = true } }
    end
    local ready = {}
    for k = l.first, l.last do
      local c = l.cmds[k]
      if c[1] == "send" then
        local from = {}
        for _, node in ipairs(targets(c[2])) do
          if not ready[node.name] then ready[node.name] = true; from[#from + 1] = node end
        end
        if #from > 0 then out[#out + 1] = { "wait", { tensor = ar.READY, from = from, k = #from } } end
      end
      out[#out + 1] = c
    end
    local last = #out
    table.move(l.cmds, l.last + 1, #l.cmds, #out + 1, out)
    l.cmds, l.last = out, last
  end
end

-- Runs cmds on node in batches of at most BATCH_MAX; results concatenated.
local function run_batches(node, cmds)
  local results = {}
  for first = 1, #cmds, BATCH_MAX do
    local part = table.move(cmds, first, math.min(#cmds, first + BATCH_MAX - 1), 1, {})
    for _, r in ipairs(node:batch(part).results) do results[#results + 1] = r end
  end
  return results
end

-- Runs per-peer command lists at once; returns each peer's results.
-- Every peer's batches at once; when some fail (a fault aborts the waits
-- of all), all are waited for and the first failure is raised.
local function run_all(peers, lists)
  local tasks = {}
  for r, p in ipairs(peers) do
    tasks[r] = hn.spawn(function() return { pcall(run_batches, p, lists[r]) } end)
  end
  local out, failure = {}, nil
  for r, res in ipairs(hn.wait_all(tasks)) do
    if res[1] then out[r] = res[2] else failure = failure or res[2] end
  end
  if failure then error(failure, 0) end
  return out
end

-- The groups of `algo` as lists of peer indices: the given ones (lists of
-- nodes), else the default ones; nil for a flat algo. Given groups are
-- checked whatever the algo, and shape only "hierarchical": a script may
-- pass the same groups to every algo.
function ar.index_groups(peers, algo, groups)
  local given = groups and group_indices(peers, groups)
  if algo ~= "hierarchical" then return nil end
  return given or ar.default_groups(peers)
end

local ALLREDUCE_OPTIONS = {
  peers = check.nodes, tensor = check.string, algo = check.oneof(table.unpack(ar.algos)),
  groups = function(what, v)
    if type(v) ~= "table" or #v == 0 then fail("%s: expected a list of lists of nodes", what) end
    for g, list in ipairs(v) do check.nodes(what .. "[" .. g .. "]", list) end
    return v
  end,
  size = check.nonnegint,
}

local function tensor_size(peer, t)
  return peer:norm{ x = t }.size
end

-- The plan of one all-reduce: options checked, schedule made, each peer's
-- commands (with `before`/`after` commands of the caller around them).
function ar.plan(o)
  if type(o) ~= "table" then fail("allreduce: expected a table of options") end
  for k, v in pairs(o) do
    local c = ALLREDUCE_OPTIONS[k]
    if not c and k ~= "before" and k ~= "after" then fail("allreduce: unknown option '%s'", tostring(k)) end
    if c then c("allreduce: option '" .. k .. "'", v) end
  end
  local peers, t = o.peers, o.tensor
  if not peers then fail("allreduce: option 'peers' is required") end
  if not t then fail("allreduce: option 'tensor' is required") end
  local algo = o.algo or "ring"
  local size = o.size or tensor_size(peers[1], t)
  local groups = ar.index_groups(peers, algo, o.groups)
  local schedule = ar.schedule(algo, #peers, size, groups)
  local collective = schedule_commands(schedule, peers, t, size)
  local lists = {}
  for r = 1, #peers do
    local cmds = {}
    for _, c in ipairs((o.before or {})[r] or {}) do cmds[#cmds + 1] = c end
    for _, c in ipairs(collective[r].prep) do cmds[#cmds + 1] = c end
    local first = #cmds + 1
    for _, c in ipairs(collective[r].cmds) do cmds[#cmds + 1] = c end
    local last = #cmds
    for _, c in ipairs((o.after or {})[r] or {}) do cmds[#cmds + 1] = c end
    lists[r] = { cmds = cmds, first = first, last = last }
  end
  ar.rendezvous(peers, lists)
  return { peers = peers, algo = algo, size = size, lists = lists, groups = groups }
end

-- Runs a plan; returns { ms=, bytes=, peers = per peer { results=, bytes=,
-- send_ms=, summary = job.batch_summary of its results } }.
function ar.run(plan)
  local cmds = {}
  for r, l in ipairs(plan.lists) do cmds[r] = l.cmds end
  local t0 = hn.now()
  local all = run_all(plan.peers, cmds)
  local out = { ms = (hn.now() - t0) * 1000, bytes = 0, peers = {} }
  for r, results in ipairs(all) do
    local s = job.batch_summary(results, cmds[r])
    out.peers[r] = { results = results, bytes = s.bytes, send_ms = s.send_ms, summary = s }
    out.bytes = out.bytes + s.bytes
  end
  return out
end

-- ar.allreduce{ peers=, tensor=, algo="ring", groups=, size= } -> {ms=, bytes=}:
-- in place, every peer's tensor holds the element-wise sum.
function ar.allreduce(o)
  local r = ar.run(ar.plan(o))
  return { ms = r.ms, bytes = r.bytes, algo = o.algo or "ring" }
end

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
  algo = check.oneof(table.unpack(ar.algos)), groups = ALLREDUCE_OPTIONS.groups,
  server_opt = check.optimizer, local_steps = check.posint,
}

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
                  before = before, after = after }
end

local function record_step(J, run, ids, t_step)
  for r, i in ipairs(ids) do
    local s = run.peers[r].summary
    local comm = math.max(0, run.ms - s.compute_ms)
    J:step_row{ worker = i, step = J.steps, time = t_step, loss = s.loss, compute_ms = s.compute_ms,
                comm_ms = comm, wait_ms = 0, lr = (J.o.worker_opt.lr or 0.05), k = #ids,
                bytes = s.bytes, samples = s.samples }
  end
end
-- Public as ar.record_step(J, run, ids, t_step): one steps.csv row per
-- worker taking part (ids: their indices, in the order of run.peers; run:
-- what ar.run returned; k = #ids), comm_ms the collective's time less the
-- worker's compute.
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
    names[#names + 1] = slot_name("g", r)
    names[#names + 1] = slot_name("w0", r)
  end
  local tasks = {}
  for r, i in ipairs(ids) do
    tasks[r] = hn.spawn(function() J.workers[i]:wait{ tensors = names, clear = true } end)
  end
  hn.wait_all(tasks)
end
-- Public as ar.resync(J, ids): worker ids[1]'s model to the others, and
-- the arrivals a cut step left ("g", "w0", the rendezvous tokens, "c.<r>")
-- cleared on every one of them.
ar.resync = resync

-- Faults: a worker cut off from the first worker (or killed) is away; with
-- on_failure = "drop" the collective goes on among the others, otherwise the
-- training stops with an error naming it. The waits and transfers of the
-- step in flight are aborted so that no peer waits out a timeout.
local function watch(J, state)
  J:watch_faults{
    -- the collective goes on among the largest group of workers that still
    -- reach each other
    cut_off = function(i)
      if not J:main_group()[i] then return "is cut off from the other workers" end
    end,
    sync = true,
    on_change = function(i, back)
      state.changed = true
      -- on every side: the others stop waiting (for it, and for a neighbour
      -- whose step it has stopped: any_wait), it stops sending to them
      if not back then J:abort_between(J.workers[i], J:others(i), true) end
    end,
  }
end
-- Public as ar.watch(J, state): a collective's fault handling (the main
-- group of workers that reach each other goes on; a cut worker's transfers
-- aborted on both sides); sets state.changed on every change, after which
-- the caller runs ar.resync before its next step.
ar.watch = watch

-- The rounds of ar.train (J:rounds): the active workers, resynced after a
-- fault, each step one batch per worker, recorded when it went through.
local function step_rounds(J, W, state)
  return {
    state = state,
    members = function() return active_ids(J) end,
    recover = function(ids) resync(J, ids) end,
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
  J.o.server_opt = J.o.server_opt or { method = "sgd", lr = 1.0 }
  J.o.server_opt.method = J.o.server_opt.method or "sgd"
  J:setup{ origin = J.workers[1], eval_node = J.workers[1], model_name = "w" }
  local W = worker.new(J, {})
  local state = {}
  if #J.workers > 1 then watch(J, state) end
  J:start_clock()
  J:guard(function()
    J:rounds(step_rounds(J, W, state))
    -- A fault after the last step (a step cut short, a worker back) leaves
    -- the workers' models apart: they end on one model, as they go on.
    if state.changed then resync(J, active_ids(J)) end
  end)
  return J:finish{ algo = algo }
end

return ar
