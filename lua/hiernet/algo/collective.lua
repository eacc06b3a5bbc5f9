-- hiernet.algo.collective: running an all-reduce schedule
-- (hiernet.algo.schedules) on peers: each peer's operations as peer
-- commands (adds from several senders into slots, so that the sum is the
-- same to the bit whatever the timing), the receiver's rendezvous, one batch
-- request per peer. Everything here is reachable from
-- hiernet.algo.allreduce as before: ar.allreduce, ar.plan, ar.run,
-- ar.rendezvous, ar.group_indices, ar.default_groups, ar.READY.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local sched = require("hiernet.algo.schedules")

local coll = {}
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
function coll.default_groups(peers)
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
-- Public as coll.group_indices(peers, groups) -> lists of peer indices: the
-- group checker a module of its own may use (every peer in exactly one
-- group, errors naming the node).
coll.group_indices = group_indices


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
coll.slot_name = slot_name

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
-- send to it (coll.rendezvous sends the token after them).
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

-- ---- overlap: one collective per gradient bucket ----

-- The schedule of one bucket: the algo's over its count elements, its
-- ranges moved to the bucket's offset.
local function bucket_schedule(algo, n, b, groups)
  local s = sched.schedule(algo, n, b.count, groups)
  for _, ops in ipairs(s) do
    for _, op in ipairs(ops) do
      if op.range then op.range = { op.range[1] + b.offset, op.range[2] } end
    end
  end
  return s
end

-- Every bucket's collective in turn, each after bucket{index = k}, which
-- holds the peer until that bucket's gradient is done (peer/commands_ml_buckets.c):
-- the bucket's all-reduce runs while the next layers compute, as PyTorch
-- DDP's. Per peer { prep=, cmds= } as schedule_commands makes them (slots
-- made once: their names do not depend on the bucket).
local function bucketed_commands(algo, peers, t, size, buckets, groups)
  local out, made = {}, {}
  for r = 1, #peers do out[r], made[r] = { prep = {}, cmds = {} }, {} end
  for k, b in ipairs(buckets) do
    local part = schedule_commands(bucket_schedule(algo, #peers, b, groups), peers, t, size)
    for r = 1, #peers do
      for _, c in ipairs(part[r].prep) do
        if not made[r][c[2].name] then
          made[r][c[2].name] = true
          out[r].prep[#out[r].prep + 1] = c
        end
      end
      out[r].cmds[#out[r].cmds + 1] = { "bucket", { index = k } }
      table.move(part[r].cmds, 1, #part[r].cmds, #out[r].cmds + 1, out[r].cmds)
    end
  end
  return out
end

-- ---- the receiver's rendezvous ----
--
-- A peer's collective commands follow its own step (`before`: the compute
-- that writes the tensor) in one batch, and the peers run their batches
-- without a barrier between them. A neighbour that is done first would
-- otherwise send into this peer's tensor while its step still writes it (an
-- add lost under the step's output, or made to the tensor of the step
-- before), or into a tensor the peer has not created yet. So every peer,
-- once its step is done, sends a one-element token (coll.READY, "ar.ready") to every
-- peer that will send to it, and a peer sends to another only after that
-- one's token is in. What happens after that is ordered by the schedule's
-- own waits; the next collective's sends wait for the next tokens, which a
-- peer sends only after its whole batch. Cost: at most one latency per
-- collective, when the last peer to finish its step is a receiver.
coll.READY = job.READY_TENSOR

-- The collective part of lists[r].cmds (first..last) with the rendezvous
-- added: the token sent to this peer's senders right before it, a wait for
-- a receiver's token right before the first send to it. lists[r] =
-- { cmds=, first=, last= } as coll.plan makes them; changed in place.
function coll.rendezvous(peers, lists)
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
      out[#out + 1] = { "tensor", { name = coll.READY, size = 1 } }
      out[#out + 1] = { "send", { tensor = coll.READY, to = senders[r], nowait = true } }
    end
    local ready = {}
    for k = l.first, l.last do
      local c = l.cmds[k]
      if c[1] == "send" then
        local from = {}
        for _, node in ipairs(targets(c[2])) do
          if not ready[node.name] then ready[node.name] = true; from[#from + 1] = node end
        end
        if #from > 0 then out[#out + 1] = { "wait", { tensor = coll.READY, from = from, k = #from } } end
      end
      out[#out + 1] = c
    end
    local last = #out
    table.move(l.cmds, l.last + 1, #l.cmds, #out + 1, out)
    l.cmds, l.last = out, last
  end
end

-- Runs cmds on node in batches of at most BATCH_MAX; results concatenated,
-- with control_ms and elapsed_ms (job.timed_batch) of all its batches.
local function run_batches(node, cmds)
  local results = { control_ms = 0, elapsed_ms = 0 }
  for first = 1, #cmds, BATCH_MAX do
    local part = table.move(cmds, first, math.min(#cmds, first + BATCH_MAX - 1), 1, {})
    local reply, control_ms, elapsed_ms = job.timed_batch(node, part)
    results.control_ms = results.control_ms + control_ms
    results.elapsed_ms = results.elapsed_ms + elapsed_ms
    for _, r in ipairs(reply.results) do results[#results + 1] = r end
  end
  return results
end

-- Runs per-peer command lists at once; returns each peer's results.
-- Every peer's batches at once; when some fail (a fault aborts the waits
-- of all), all are waited for and the first failure is raised.
local function run_all(peers, lists)
  return job.all(peers, function(r, p) return run_batches(p, lists[r]) end)
end

-- The groups of `algo` as lists of peer indices: the given ones (lists of
-- nodes), else the default ones; nil for a flat algo. Given groups are
-- checked whatever the algo, and shape only "hierarchical": a script may
-- pass the same groups to every algo.
function coll.index_groups(peers, algo, groups)
  local given = groups and group_indices(peers, groups)
  if algo ~= "hierarchical" then return nil end
  return given or coll.default_groups(peers)
end

local ALLREDUCE_OPTIONS = {
  peers = check.nodes, tensor = check.string, algo = check.oneof(table.unpack(sched.algos)),
  groups = function(what, v)
    if type(v) ~= "table" or #v == 0 then fail("%s: expected a list of lists of nodes", what) end
    for g, list in ipairs(v) do check.nodes(what .. "[" .. g .. "]", list) end
    return v
  end,
  size = check.nonnegint,
  -- per peer (by its index in peers) the commands before its collective
  -- (its step) and after it (the apply), in the same batch
  before = function(what, v)
    if type(v) ~= "table" then fail("%s: expected a list of command lists, one per peer", what) end
    for r, list in pairs(v) do
      if math.type(r) ~= "integer" or r < 1 or type(list) ~= "table" then
        fail("%s: expected a list of command lists, one per peer (entry %s)", what, tostring(r))
      end
    end
    return v
  end,
}
ALLREDUCE_OPTIONS.after = ALLREDUCE_OPTIONS.before
-- gradient buckets ({offset=, count=} in the order they are ready, as
-- hn.grad_buckets gives them): one collective each, after its bucket{}
ALLREDUCE_OPTIONS.buckets = function(what, v)
  if type(v) ~= "table" or #v == 0 then fail("%s: expected a list of {offset=, count=}", what) end
  for k, b in ipairs(v) do
    if type(b) ~= "table" or math.type(b.offset) ~= "integer" or math.type(b.count) ~= "integer" then
      fail("%s: entry %d is not {offset = integer, count = integer}", what, k)
    end
  end
  return v
end
-- The checker of a `groups` option (lists of lists of nodes).
coll.check_groups = ALLREDUCE_OPTIONS.groups

local function tensor_size(peer, t)
  return peer:norm{ x = t }.size
end

-- The plan of one all-reduce: options checked, schedule made, each peer's
-- commands (with `before`/`after` commands of the caller around them).
function coll.plan(o)
  if type(o) ~= "table" then fail("allreduce: expected a table of options") end
  for k, v in pairs(o) do
    local c = ALLREDUCE_OPTIONS[k]
    if not c then fail("allreduce: unknown option '%s'", tostring(k)) end
    c("allreduce: option '" .. k .. "'", v)
  end
  local peers, t = o.peers, o.tensor
  if not peers then fail("allreduce: option 'peers' is required") end
  if not t then fail("allreduce: option 'tensor' is required") end
  for _, k in ipairs{ "before", "after" } do
    for r in pairs(o[k] or {}) do
      if r > #peers then fail("allreduce: option '%s': entry %d, but there are %d peers", k, r, #peers) end
    end
  end
  local algo = o.algo or "ring"
  local size = o.size or tensor_size(peers[1], t)
  local groups = coll.index_groups(peers, algo, o.groups)
  local collective
  if o.buckets then
    collective = bucketed_commands(algo, peers, t, size, o.buckets, groups)
  else
    collective = schedule_commands(sched.schedule(algo, #peers, size, groups), peers, t, size)
  end
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
  coll.rendezvous(peers, lists)
  return { peers = peers, algo = algo, size = size, lists = lists, groups = groups }
end

-- Runs a plan; returns { ms=, bytes=, peers = per peer { results=, bytes=,
-- send_ms=, control_ms=, elapsed_ms= (the controller's dispatch-to-reply
-- time of its batches), summary = job.batch_summary of its results } }.
function coll.run(plan)
  local cmds = {}
  for r, l in ipairs(plan.lists) do cmds[r] = l.cmds end
  local t0 = hn.now()
  local all = run_all(plan.peers, cmds)
  local out = { ms = (hn.now() - t0) * 1000, bytes = 0, peers = {} }
  for r, results in ipairs(all) do
    local s = job.batch_summary(results, cmds[r])
    out.peers[r] = { results = results, bytes = s.bytes, send_ms = s.send_ms, control_ms = results.control_ms,
                     elapsed_ms = results.elapsed_ms, summary = s }
    out.bytes = out.bytes + s.bytes
  end
  return out
end

-- coll.allreduce{ peers=, tensor=, algo="ring", groups=, size= } -> {ms=, bytes=}:
-- in place, every peer's tensor holds the element-wise sum.
function coll.allreduce(o)
  local r = coll.run(coll.plan(o))
  return { ms = r.ms, bytes = r.bytes, algo = o.algo or "ring" }
end

return coll
