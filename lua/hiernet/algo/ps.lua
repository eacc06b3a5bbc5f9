-- hiernet.algo.ps: data-parallel training with a parameter server.
--
--   local ps = require("hiernet.algo.ps")
--   local s = ps.train{ server = cloud, workers = terminals, mode = "bsp",
--                       model = "mlp:784-128-10", dataset = { name = "fashion-mnist" },
--                       steps = 500, batch = 64, worker_opt = { method = "sgd", lr = 0.05 },
--                       server_opt = { method = "sgd", lr = 1.0 }, eval_every = 50 }
--
-- Workers pull the model, run the worker optimizer for `local_steps` steps
-- on their shard (local_steps = 1 with sgd pushes lr * gradient) and push
-- their update u = w_pulled - w_after to the server, which applies the mean
-- of the updates it aggregates with its own optimizer: w <- opt(w, mean u)
-- (the system paper's worker and server optimizers: a server rate below 1
-- damps stale updates). Several servers (`servers = {...}`) each hold one
-- contiguous range of the parameters.
--
-- When a push is aggregated and when the aggregate is applied is the
-- synchronization model: a policy object (ps.policies) with three hooks,
--   accept(push, S)  -> "fresh" (aggregate it), "late" (merge it elsewhere)
--                       or "drop"
--   ready(S)         -> apply the aggregate now?
--   may_start(i, S)  -> may worker i pull and start its next step?
-- over the engine's state S (below). BSP, ASP, SSP, fastest-k, drop-worker
-- and adaptive-k differ only in their policy; docs/writing-algorithms.md
-- walks through writing a new one.
--
-- Staleness is exact: every push carries the version of the model it was
-- computed on (the peer's tensor version of the pulled model), and the
-- server records version_now - version_used when it takes the push.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")
local sched = require("hiernet.algo.schedules")

local ps = {}
local check, fail = job.check, job.fail

-- ---- policies ----
--
-- S, the engine state the hooks read (never write):
--   S.version        the server's model version (the peer's tensor version)
--   S.round.n        fresh pushes aggregated since the last apply
--   S.round.norm2    sum of their squared norms (workers report ||u_i||^2)
--   S.round.sum_norm2  ||sum of the aggregated updates||^2 (when wants_norm)
--   S.n_alive        workers still training
--   S.started[i], S.completed[i]   steps worker i has started / pushed
--   S.pushed_version[i]  the model version of worker i's last push (nil: none)
--   S.alive(i)       worker i is still training

local policies = {}
ps.policies = policies

-- A worker whose last push was computed on the current model must wait for
-- the next one; one that has not pushed yet, or whose push is older, may go.
local function new_model_since_push(i, S)
  local v = S.pushed_version[i]
  return v == nil or v < S.version
end

function policies.bsp()
  return {
    name = "bsp",
    direct_add = true, -- every push of a step is fresh: workers add straight into the aggregate
    -- Only a worker that was away can push on an old model: its push is
    -- dropped, and it pulls the current one.
    accept = function(_, push, S) return push.version == S.version and "fresh" or "drop" end,
    ready = function(_, S) return S.round.n >= S.n_alive end,
    may_start = function(_, i, S) return new_model_since_push(i, S) end,
  }
end

function policies.asp()
  return {
    name = "asp",
    applies_each = true, -- every push is applied alone, as it comes
    accept = function() return "fresh" end,
    ready = function(_, S) return S.round.n >= 1 end,
    may_start = function() return true end,
  }
end

-- SSP (Ho et al. 2013): a worker may start step c + 1 only while
-- c - (the fewest steps any live worker has completed) <= s, so no worker is
-- ever more than s steps ahead of the slowest.
function policies.ssp(o)
  local s = o.staleness or 3
  return {
    name = "ssp", staleness = s, applies_each = true,
    accept = function() return "fresh" end,
    ready = function(_, S) return S.round.n >= 1 end,
    may_start = function(_, i, S)
      local slowest = math.huge
      for j = 1, #S.started do
        if S.alive(j) and S.completed[j] < slowest then slowest = S.completed[j] end
      end
      return S.started[i] - slowest <= s
    end,
  }
end

-- Fastest-k: each step aggregates the first k pushes computed on the current
-- model; later ones are dropped, or merged into the next step's aggregate
-- (late = "merge").
policies["fastest-k"] = function(o, n)
  local k = o.k or math.max(1, n // 2)
  if k > n then fail("ps.train: option 'k': %d is more than the %d workers", k, n) end
  local late = o.late or "drop"
  return {
    name = "fastest-k", k = k,
    accept = function(_, push, S)
      if push.version == S.version then return "fresh" end
      return late == "merge" and "late" or "drop"
    end,
    late_weight = function() return 1 end,
    merge_into = "acc",
    ready = function(_, S) return S.round.n >= math.min(k, S.n_alive) end,
    may_start = function(_, i, S) return new_model_since_push(i, S) end,
  }
end

-- Drop-worker: each step drops the slowest fraction of the live workers,
-- i.e. aggregates the first n - floor(fraction * n) pushes.
policies["drop-worker"] = function(o)
  local fraction = o.drop_fraction or 0.5
  local function k_of(S) return math.max(1, S.n_alive - math.floor(fraction * S.n_alive)) end
  return {
    name = "drop-worker", drop_fraction = fraction,
    accept = function(_, push, S) return push.version == S.version and "fresh" or "drop" end,
    ready = function(_, S) return S.round.n >= k_of(S) end,
    may_start = function(_, i, S) return new_model_since_push(i, S) end,
  }
end

-- The norm test of adaptive-k (adaptive-k-momentum-sync paper, Sec. 4.2,
-- after Byrd et al.'s sample-size test): with k updates u_i aggregated,
-- mean g = sum u_i / k and tr(Sigma) = (sum ||u_i||^2 - k ||g||^2) / (k - 1),
-- the mean is a good enough descent direction when
--   ||g||^2 >= theta^2 * tr(Sigma) / k.
-- Returns the verdict and both sides.
function ps.norm_test(sum_norm2, norm2_sum, k, theta)
  if k < 2 then return false, 0, 0 end
  local mean_norm2 = sum_norm2 / (k * k)
  local trace = math.max(0, (norm2_sum - k * mean_norm2) / (k - 1))
  local rhs = theta * theta * trace / k
  return mean_norm2 >= rhs, mean_norm2, rhs
end

-- Adaptive-k (adaptive-k-momentum-sync paper, Algorithm 1): the server
-- aggregates fresh updates until the norm test holds (or every live worker
-- has pushed), so k adapts step by step; a late update (staleness tau) is
-- merged into the server's momentum with weight gamma^tau -- the weight it
-- would carry now had it arrived tau steps ago -- instead of being dropped.
policies["adaptive-k"] = function(o)
  local theta = o.theta or 1.5
  return {
    name = "adaptive-k", theta = theta, wants_norm = true, momentum_server = true,
    accept = function(_, push, S) return push.version == S.version and "fresh" or "late" end,
    merge_into = "mom",
    late_weight = function(self, tau) return self.gamma ^ tau end,
    ready = function(_, S)
      if S.round.n >= S.n_alive then return S.round.n >= 1 end
      return (ps.norm_test(S.round.sum_norm2 or 0, S.round.norm2, S.round.n, theta))
    end,
    may_start = function(_, i, S) return new_model_since_push(i, S) end,
  }
end

ps.modes = { "bsp", "asp", "ssp", "fastest-k", "drop-worker", "adaptive-k" }

-- ---- the engine ----
--
-- One task per worker runs its steps (wait for the policy, pull if its copy
-- is old, compute and push in one batch), one server task takes the pushes
-- in the order they complete (classify, fold in, apply). After an apply the
-- server sends the new model, in the same batch request, to every worker
-- that is waiting for it, so a synchronous step costs two round trips.

-- ---- the bookkeeping of a synchronization model ----
--
-- ps.sync(policy, n) keeps the state S the policy hooks read and does all
-- the counting (versions, rounds, staleness, k), with no peer I/O: the
-- engine below asks it what to do, and the tests drive it with scripted
-- arrival orders, so every count is checked exactly, without timing.

local Sync = {}
Sync.__index = Sync

-- alive(i): is worker i still training (default: all are).
function ps.sync(policy, n, alive)
  local S = { version = 0, round = { n = 0, norm2 = 0, members = {}, late = {} }, n_alive = n,
              started = {}, completed = {}, pushed_version = {}, alive = alive or function() return true end }
  for i = 1, n do S.started[i], S.completed[i] = 0, 0 end
  return setmetatable({ policy = policy, S = S, n = n }, Sync)
end

function Sync:may_start(i)
  return self.S.alive(i) and self.policy:may_start(i, self.S)
end

-- Worker i starts a step; returns its number. Keeps max_ahead: how far the
-- step started is ahead of the step the slowest live worker is on.
function Sync:start(i)
  local S = self.S
  S.started[i] = S.started[i] + 1
  local slowest = math.huge
  for j = 1, self.n do
    if S.alive(j) and S.completed[j] < slowest then slowest = S.completed[j] end
  end
  local ahead = S.started[i] - (slowest + 1)
  if ahead > (self.max_ahead or 0) then self.max_ahead = ahead end
  return S.started[i]
end

-- Takes push p = {worker=, version=, norm2=}: sets p.staleness (the server's
-- version now minus the version p was computed on) and p.kind (the policy's
-- verdict), and counts it. Returns p.kind.
function Sync:take(p)
  local S = self.S
  p.staleness = S.version - p.version
  p.kind = self.policy:accept(p, S)
  if p.kind == "fresh" then
    S.round.n = S.round.n + 1
    S.round.norm2 = S.round.norm2 + (p.norm2 or 0)
    S.round.members[#S.round.members + 1] = p
  elseif p.kind == "late" then
    S.round.late[#S.round.late + 1] = p
  end
  S.completed[p.worker] = S.completed[p.worker] + 1
  S.pushed_version[p.worker] = p.version
  return p.kind
end

-- Does the policy need ||sum of the round's updates||^2 before it decides?
function Sync:wants_norm()
  return self.policy.wants_norm and self.S.round.n >= 2 and self.S.round.n < self.S.n_alive
end

function Sync:set_norm2(v)
  self.S.round.sum_norm2 = v
end

function Sync:ready()
  return self.S.round.n > 0 and self.policy:ready(self.S)
end

-- Closes the round: the model version moves on; every member learns its k,
-- and so does every late push merged meanwhile (it takes effect with this
-- round: adaptive-k's momentum, fastest-k's late = "merge").
-- Returns k and the members.
function Sync:close_round()
  local S = self.S
  local k, members = S.round.n, S.round.members
  for _, p in ipairs(members) do p.k = k end
  for _, p in ipairs(S.round.late) do p.k = k end
  S.version = S.version + 1
  S.round = { n = 0, norm2 = 0, members = {}, late = {} }
  return k, members
end

function Sync:set_alive_count(n)
  self.S.n_alive = n
end

local Engine = {}
Engine.__index = Engine

-- Parameter ranges of the servers: contiguous, sizes differing by at most
-- one (the schedules' split, which cuts a ring's chunks alike).
function ps.shard_ranges(size, n)
  return sched.split(0, size, n)
end

-- A wake-up per worker over hn.queue: signal() never blocks; a waiter always
-- re-checks its condition, so a spare token is harmless.
local function new_signal()
  local q = hn.queue()
  return {
    wait = function() q:pop() end,
    signal = function() if q:len() == 0 then q:push(true) end end,
  }
end

local function slot_name(i) return "u." .. i end

-- The most commands a peer runs in one batch.
local BATCH_MAX = sched.BATCH_MAX

function Engine.new(J, policy, servers)
  local n = #J.workers
  local E = setmetatable({
    J = J, o = J.o, policy = policy, servers = servers, n = n, events = hn.queue(),
    -- Adding straight into the aggregate counts what lands; when faults may
    -- drop a worker mid-push (on_failure = "drop") only pushes the server
    -- took may count, so they go through slots.
    direct_add = policy.direct_add and not J.o.compress and J.on_failure ~= "drop",
    signals = {}, consumed = {}, parked = {}, fresh = {}, worker_version = {}, rows = {},
    pull_ms = {}, pull_bytes = {}, apply_ms = 0,
  }, Engine)
  E.sync = ps.sync(policy, n, function(i) return J:alive(i) end)
  for i = 1, n do
    E.signals[i] = new_signal()
    E.consumed[i], E.rows[i] = true, {}
  end
  if policy.momentum_server then
    -- The momentum sums a geometric series: a steady update u would move w
    -- by lr u / (1 - gamma) per step. The step is scaled by 1 - gamma so
    -- that server_opt.lr means what it means in every other mode: lr = 1
    -- (the default, and the usual server_opt of adaptive-k) moves w by the mean update.
    policy.gamma = J.o.server_opt.momentum or 0.9
    policy.server_lr = (J.o.server_opt.lr or 1) * (1 - policy.gamma)
  end
  return E
end

-- Each server's tensors: its shard of the model when there are several
-- (a plain tensor: optim{tensor=} keeps its state), the aggregate, the
-- momentum, the workers' slots that range pushes land in; then the version
-- every copy of the model has now.
function Engine:setup_servers()
  local J, sharded = self.J, #self.servers > 1
  self.ranges = ps.shard_ranges(J.model_size, #self.servers)
  job.each(self.servers, function(s, server)
    local offset, count, cmds = self.ranges[s][1], self.ranges[s][2], {}
    if sharded then cmds[#cmds + 1] = J:model_tensor("w", count, offset) end
    if not self.policy.applies_each then cmds[#cmds + 1] = J:model_tensor("acc", count, offset) end
    if self.policy.momentum_server then cmds[#cmds + 1] = J:model_tensor("mom", count, offset) end
    if (sharded or self.o.overlap) and not self.direct_add and not self.o.compress then
      -- A worker sends its range of the update into its slot at offset 0,
      -- and a range lands only in a tensor that exists: on fresh servers
      -- the first push was refused, and a slot left by an earlier training
      -- of another model had the wrong size. With overlap every push is
      -- ranges (one per bucket) into the worker's slot.
      for i = 1, self.n do cmds[#cmds + 1] = J:model_tensor(slot_name(i), count, offset) end
    end
    for first = 1, #cmds, BATCH_MAX do -- one slot per worker: may be more than a batch holds
      server:batch(table.move(cmds, first, math.min(#cmds, first + BATCH_MAX - 1), 1, {}))
    end
    if sharded then -- the shard of the one initial model, made on the first worker
      J.workers[1]:send{ tensor = J.model_name, to = server, as = "w", range = self.ranges[s], at = 0 }
    end
  end)
  self.base = {}
  for s, server in ipairs(self.servers) do self.base[s] = server:norm{ x = "w" }.version end
  for i = 1, self.n do self.worker_version[i], self.fresh[i] = 0, true end
end

-- The engine's model version from server s's tensor version: every apply
-- writes "w" exactly once on every server.
function Engine:version_of(s, peer_version)
  return peer_version - self.base[s]
end

-- ---- the server side ----

-- Folds worker i's update into the aggregate (fresh) or into the policy's
-- merge target (late, weighted); a dropped one is left where it is.
function Engine:take_push(p, kind, weight)
  if kind == "drop" or (kind == "fresh" and (self.direct_add or self.policy.applies_each)) then return end
  local into = kind == "fresh" and "acc" or self.policy.merge_into
  job.each(self.servers, function(_, server)
    worker.accumulate(server, slot_name(p.worker), into, weight, self.o.compress)
  end)
end

-- ||sum of the aggregated updates||^2 over every server's range.
function Engine:aggregate_norm2()
  local total = 0
  for _, server in ipairs(self.servers) do total = total + server:norm{ x = "acc" }.value ^ 2 end
  return total
end

-- target: "model" (one server) or "tensor" (a shard of several servers).
local function server_optim(so, target, grad)
  return job.optim_params(so, "w", grad, target)
end

-- The batch server s runs to apply a round of k updates, and the index of
-- its command that writes "w". waiting: the workers to send the new model.
function Engine:apply_commands(s, k, members, waiting)
  local so, count = self.o.server_opt, self.ranges[s][2]
  local target = #self.servers > 1 and "tensor" or "model"
  local cmds
  if self.policy.applies_each then
    local grad
    cmds, grad = worker.dense_commands(slot_name(members[1].worker), self.o.compress)
    cmds[#cmds + 1] = { "optim", server_optim(so, target, grad) }
  elseif self.policy.momentum_server then
    -- mom <- gamma mom + (mean of the fresh updates); w <- w - lr (1 - gamma) mom.
    -- Late updates were merged into mom as they came (Engine:on_push).
    cmds = { { "scale", { x = "mom", alpha = self.policy.gamma } },
             { "axpy", { y = "mom", x = "acc", alpha = 1 / k } },
             { "axpy", { y = "w", x = "mom", alpha = -self.policy.server_lr } } }
  else
    cmds = { { "scale", { x = "acc", alpha = 1 / k } }, { "optim", server_optim(so, target, "acc") } }
  end
  local writes_w = #cmds
  if not self.policy.applies_each then cmds[#cmds + 1] = self.J:model_tensor("acc", count, self.ranges[s][1]) end
  -- The pushes' arrivals: the engine counts pushes itself and never waits
  -- on them; claimed here so that they do not pile up on the server (before
  -- the send, which stays last: Engine:apply reads its result there).
  local pushed = { "acc" }
  for _, p in ipairs(members) do pushed[#pushed + 1] = slot_name(p.worker) end
  cmds[#cmds + 1] = { "wait", { tensors = pushed, clear = true } }
  if #waiting > 0 then
    cmds[#cmds + 1] = { "send", { tensor = "w", to = waiting, as = self.J.model_name,
                                  at = #self.servers > 1 and self.ranges[s][1] or nil } }
  end
  return cmds, writes_w
end

-- The parked workers the policy lets start once the new model exists.
function Engine:workers_to_send()
  local nodes, ids = {}, {}
  for i = 1, self.n do
    if self.parked[i] and self.consumed[i] and self.sync:may_start(i) then
      nodes[#nodes + 1], ids[#ids + 1] = self.J.workers[i], i
    end
  end
  return nodes, ids
end

-- Applies the round on every server (in parallel), sends the new model to
-- the waiting workers, and opens the next round.
function Engine:apply()
  local J = self.J
  local k, members = self.sync:close_round()
  -- The server step counts from the round's close, before the apply yields:
  -- a worker the close wakes must already see the job's step limit, or it
  -- starts a step whose push no round will take (a row past the last step).
  J.steps = J.steps + 1
  -- So are the round's samples (an `epochs` stop): its members' rows are
  -- written only when their workers next run, after this close wakes them.
  for _, p in ipairs(members) do
    J.samples, p.samples_counted = J.samples + (p.samples or 0), true
  end
  local version = self.sync.S.version
  local nodes, ids = self:workers_to_send()
  local sent = {}
  job.each(self.servers, function(s, server)
    local cmds, writes_w = self:apply_commands(s, k, members, nodes)
    local ok, r = pcall(server.batch, server, cmds)
    if not ok then
      -- The model's sending failed when a fault took a receiver away (the
      -- update itself, before it, was applied): who did not get it pulls.
      -- A receiver's machine may be being lost: known once settled.
      if J:alive_count() == #J.workers then J:settle_losses() end
      if #nodes == 0 or not tostring(r):find("command " .. #cmds .. " (send)", 1, true)
          or J:alive_count() == #J.workers then
        error(r, 0)
      end
      for _, i in ipairs(ids) do self.fresh[i] = false end
      ids, sent[s] = {}, false
      return
    end
    local res = r.results
    local v = self:version_of(s, res[writes_w].version)
    if v ~= version then
      error(string.format("ps: server %s holds model version %d, expected %d (something else wrote 'w')",
                          server.name, v, version), 0)
    end
    sent[s] = res[#res]
    for c = 1, (#nodes > 0) and #res - 1 or #res do self.apply_ms = self.apply_ms + res[c].ms end
  end)
  local bytes = 0
  for s = 1, #self.servers do bytes = bytes + ((#ids > 0 and sent[s]) and sent[s].bytes or 0) end
  for _, i in ipairs(ids) do
    if sent[1] then
      self.worker_version[i], self.fresh[i] = version, true
      self.pull_ms[i], self.pull_bytes[i] = sent[1].ms, bytes / #ids
    end
  end
  J.updates_applied = J.updates_applied + k
  if J:eval_due(J.steps) then self:evaluate() end
end

-- Sends every server's range of "w" into the eval node's full model.
function Engine:gather(into)
  local tasks = {}
  for s, server in ipairs(self.servers) do
    tasks[s] = hn.spawn(function()
      server:send{ tensor = "w", to = self.J.eval_node, as = into, at = self.ranges[s][1] }
    end)
  end
  return tasks
end

-- Evaluates the model as of now: on the server that holds it, or, with
-- several servers, on the eval node once the shards are gathered there.
function Engine:evaluate()
  local J = self.J
  if #self.servers == 1 then return J:evaluate(J.steps, self.servers[1], "w") end
  local step, gathers = J.steps, self:gather("w_full")
  hn.spawn(function()
    hn.wait_all(gathers)
    J:evaluate(step, J.eval_node, "w_full")
  end)
end

-- One push, in completion order: classify, fold in, apply when ready.
function Engine:on_push(p)
  local sync = self.sync
  local kind = sync:take(p)
  if kind == "fresh" then
    self:take_push(p, "fresh", 1)
    if sync:wants_norm() then sync:set_norm2(self:aggregate_norm2()) end
  elseif kind == "late" then
    self:take_push(p, "late", self.policy.late_weight and self.policy:late_weight(p.staleness) or 1)
  end
  self.consumed[p.worker] = true
  if sync:ready() then self:apply() end
end

function Engine:wake_all()
  for i = 1, self.n do self.signals[i].signal() end
end

-- The server task: pushes in completion order until every worker's task
-- has ended (run_engine's "end", after the workers' last events).
function Engine:serve()
  local J, sync = self.J, self.sync
  while true do
    local ev = self.events:pop()
    if ev.kind == "end" then return end
    if ev.kind == "push" and not J:stopped() then
      self:on_push(ev)
    elseif ev.kind == "push" then
      self.consumed[ev.worker] = true -- training is over: taken, not applied
    elseif ev.kind == "dead" then
      sync:set_alive_count(J:alive_count())
      if not J:stopped() and sync:ready() then self:apply() end
    end
    J:stopped()
    self:wake_all()
  end
end

-- ---- the worker side ----

-- Parks worker i until the policy lets it start; the ms it waited.
function Engine:wait_for_start(i)
  local t0 = hn.now()
  self.parked[i] = true
  while not self.J:stopped() and self.J:alive(i) and not self.sync:may_start(i) do
    self.signals[i].wait()
  end
  self.parked[i] = false
  return (hn.now() - t0) * 1000
end

-- Brings worker i's model to the current version, unless the server has
-- just sent it: every server sends its range. Returns the version, ms, bytes.
function Engine:pull(i)
  local current = self.sync.S.version
  if self.fresh[i] and self.worker_version[i] == current then
    local ms, bytes = self.pull_ms[i] or 0, self.pull_bytes[i] or 0
    self.pull_ms[i], self.pull_bytes[i] = 0, 0
    return current, ms, bytes
  end
  local w, J = self.J.workers[i], self.J
  local version, ms, bytes = math.huge, 0, 0
  job.each(self.servers, function(s, server)
    local r = server:send{ tensor = "w", to = w, as = J.model_name,
                           at = #self.servers > 1 and self.ranges[s][1] or nil }
    version = math.min(version, self:version_of(s, r.version))
    ms, bytes = math.max(ms, r.ms), bytes + r.bytes
  end)
  self.worker_version[i], self.fresh[i] = version, true
  return version, ms, bytes
end

-- Where worker i's update goes: one target per server.
function Engine:push_targets(i)
  local targets = {}
  for s, server in ipairs(self.servers) do
    targets[s] = { node = server, as = self.direct_add and "acc" or slot_name(i), add = self.direct_add,
                   range = #self.servers > 1 and self.ranges[s] or nil }
  end
  return targets
end

-- One step of worker i: pull, compute and push, hand the push to the server
-- and wait until it is taken. Returns the steps.csv row (k is filled in once
-- the round the push joined has been applied).
function Engine:step(i, wait_ms)
  local step = self.sync:start(i)
  local version, pull_ms, pull_bytes = self:pull(i)
  local r = self.compute:step(i, self:push_targets(i))
  if self.compute.writes_model then self.fresh[i] = false end
  local push = { kind = "push", worker = i, version = version, norm2 = r.norm2, samples = r.samples }
  self.consumed[i] = false
  self.events:push(push)
  while not self.consumed[i] and not self.J:stopped() do self.signals[i].wait() end
  return { worker = i, step = step, time = self.J:now(), loss = r.loss,
           compute_ms = r.compute_ms, comm_ms = pull_ms + r.push_ms, wait_ms = wait_ms,
           control_ms = r.control_ms, lr = r.lr, bytes = pull_bytes + r.push_bytes, samples = r.samples, push = push }
end

local function write_row(J, row)
  row.staleness = row.push.staleness
  row.k = row.push.k
  row.version = row.push.version
  -- counted in J.samples when its round closed; its row still shows them
  row.samples_counted = row.push.samples_counted
  row.push = nil
  J:step_row(row)
end

-- Writes worker i's rows in order while the first one's push is settled:
-- its k known, or dropped (a late push learns its k when the round it
-- joined closes, after the worker may have moved on). all: every row (the
-- worker's task ends; a push no round took has no k).
function Engine:write_rows(i, all)
  local rows = self.rows[i]
  while rows[1] and (all or rows[1].push.k or rows[1].push.kind == "drop") do
    write_row(self.J, table.remove(rows, 1))
  end
end

-- Parks worker i while it is away (cut off, or killed: then its task ends
-- and a restart starts a new one).
function Engine:wait_back(i)
  local J = self.J
  while not J:stopped() and not J:alive(i) and not J.killed[i] and not J.dead[i] do
    self.signals[i].wait()
  end
end

-- Worker i's step on the job's frame (J:worker_loops): wait for the
-- policy, write the rows settled meanwhile, then pull, compute and push.
function Engine:work_step(i)
  local J = self.J
  local wait_ms = self:wait_for_start(i)
  self:write_rows(i)
  if J:stopped() or not J:alive(i) then return end
  table.insert(self.rows[i], self:step(i, wait_ms))
end

-- A live worker's failed command is its failure (on_failure = "drop" goes
-- on without it; otherwise the training stops and the error is raised once
-- the server has taken every push): the server's round counts who is left.
function Engine:worker_failed(i, err)
  local J = self.J
  local handled, raised = pcall(J.worker_failed, J, i, err)
  if not handled then
    self.failure = self.failure or raised
    J:stop("error")
  end
  self.sync:set_alive_count(J:alive_count())
  self.events:push{ kind = "dead", worker = i }
end

-- A fault took worker i away, or it is back (Job:watch_faults). Away: the
-- transfers between it and the servers will never be acknowledged, so they
-- are aborted on both ends and the tasks waiting for them move on; the
-- server's round counts the live workers only. Back: it pulls the current
-- model (a restarted one gets a new task from the frame, J:worker_loops).
function Engine:on_fault(i, back)
  local w = self.J.workers[i]
  self.sync:set_alive_count(self.J:alive_count())
  if back then
    self.fresh[i] = false
    self.consumed[i] = true
  else
    self.J:abort_between(w, self.servers)
  end
  self.events:push{ kind = "dead", worker = i }
  self:wake_all()
end

-- ---- ps.train ----

-- A mode is a name in ps.modes with a policy in ps.policies; the checker
-- of option `mode` reads ps.modes when a training starts, so a mode added
-- later (ps.add_mode) is accepted.
local function check_mode(what, v)
  return check.oneof(table.unpack(ps.modes))(what, v)
end

local OPTIONS = {
  server = check.node, servers = check.nodes, mode = check_mode,
  server_opt = check.optimizer, local_steps = check.posint, staleness = check.nonnegint,
  k = check.posint, late = check.oneof("drop", "merge"), drop_fraction = check.fraction,
  theta = check.posnumber, bb = check.boolean,
  bb_opts = check.fields{ min_lr = check.posnumber, max_lr = check.posnumber,
    smoothing = check.fraction, armijo_c = check.posnumber, backtrack = check.fraction,
    max_backtracks = check.posint },
}
for k, c in pairs(worker.overlap_options) do OPTIONS[k] = c end
ps.options = OPTIONS

-- Options that belong to some modes only are errors elsewhere: a staleness
-- given to BSP would otherwise silently do nothing. option -> its modes.
local MODE_OPTIONS = { staleness = { "ssp" }, k = { "fastest-k" }, late = { "fastest-k" },
                       drop_fraction = { "drop-worker" }, theta = { "adaptive-k" },
                       bb = { "adaptive-k" }, bb_opts = { "adaptive-k" } }
ps.mode_options = MODE_OPTIONS

local function check_mode_options(J, mode)
  for key, modes in pairs(MODE_OPTIONS) do
    local used = false
    for _, m in ipairs(modes) do used = used or m == mode end
    if J.o[key] ~= nil and not used then
      fail("ps.train: option '%s' is for mode%s '%s', not '%s'", key, #modes > 1 and "s" or "",
           table.concat(modes, "', '"), mode)
    end
  end
end

-- ps.add_mode(name, policy, options): a synchronization model of one's own,
-- from a module outside the library (docs/writing-algorithms.md).
-- policy(o, n) -> the policy object, from the training's checked options o
-- and the number of workers n; options = { key = checker } (checkers from
-- job.check): the options of this mode, new ones or existing ones such as
-- `k`, which from now on belong to this mode too. Returns ps.
function ps.add_mode(name, policy, options)
  if type(name) ~= "string" or name == "" then
    fail("ps.add_mode: expected a mode name, got %s", tostring(name))
  end
  if policies[name] then fail("ps.add_mode: mode '%s' exists already", name) end
  if type(policy) ~= "function" then
    fail("ps.add_mode: mode '%s': expected a policy function, got %s", name, type(policy))
  end
  for key, checker in pairs(options or {}) do
    local what = string.format("ps.add_mode: mode '%s': option '%s'", name, tostring(key))
    if type(checker) ~= "function" then fail("%s: expected a checker (job.check)", what) end
    -- an option every mode takes cannot become one mode's
    if job.common_options[key] or (OPTIONS[key] and not MODE_OPTIONS[key]) then
      fail("%s: every mode takes it already", what)
    end
  end
  for key, checker in pairs(options or {}) do
    OPTIONS[key] = OPTIONS[key] or checker
    MODE_OPTIONS[key] = MODE_OPTIONS[key] or {}
    table.insert(MODE_OPTIONS[key], name)
  end
  policies[name] = policy
  ps.modes[#ps.modes + 1] = name
  return ps
end

local function servers_of(J)
  local o = J.o
  if o.server and o.servers then fail("ps.train: give 'server' or 'servers', not both") end
  local servers = o.servers or (o.server and { o.server })
  if not servers then fail("ps.train: option 'server' is required") end
  for _, s in ipairs(servers) do
    for _, w in ipairs(J.workers) do
      if s == w then fail("ps.train: node '%s' is both a server and a worker", s.name) end
    end
  end
  return servers
end

-- Options the chosen mode would accept and not use are errors.
local function check_used_options(J, mode, policy, sharded)
  if J.o.eval_node and not sharded then
    fail("ps.train: option 'eval_node' is for several servers (one server evaluates the model it holds)")
  end
  if J.o.bb == false and J.o.bb_opts ~= nil then
    fail("ps.train: option 'bb_opts' is not used with bb = false (it tunes the BB rate)")
  end
  if mode == "adaptive-k" and J.o.bb ~= false then
    -- The Barzilai-Borwein step sets the rate of one SGD step per push.
    if (J.o.local_steps or 1) ~= 1 then
      fail("ps.train: option 'local_steps' is not used with adaptive-k's BB rate (bb = false uses it)")
    end
    job.plain_sgd_only("ps.train: worker_opt (adaptive-k's BB rate)", J.o.worker_opt, { lr = true })
  end
  if policy.momentum_server then
    job.plain_sgd_only("ps.train: server_opt (adaptive-k's server momentum)", J.o.server_opt,
                       { lr = true, momentum = true })
    local gamma = J.o.server_opt.momentum
    if gamma and gamma >= 1 then
      fail("ps.train: server_opt.momentum: adaptive-k's momentum must be below 1, got %s", gamma)
    end
  end
end

-- The summary fields ps.train sets itself: a policy's `summary` table (a
-- mode of one's own, ps.add_mode) may not name them; an error before the
-- training, not a field silently replaced after it.
local PS_SUMMARY = { "policy", "servers", "local_steps", "max_ahead", "server_apply_ms", "k", "staleness",
                     "drop_fraction", "theta", "final_node", "final_model" }

local function check_summary(policy)
  for key in pairs(policy.summary or {}) do
    for _, f in ipairs(PS_SUMMARY) do
      if f == key then fail("ps.train: policy '%s': summary field '%s' is one ps.train writes", policy.name, key) end
    end
  end
end

-- Runs the workers on the job's frame and the server until a stop
-- condition holds; the server task ends once every worker task has (a
-- restarted worker gets a new one). An error of the server stops the job
-- (a waiting worker sees the stop) and is raised first.
local function run_engine(E)
  local J = E.J
  local server_task = hn.spawn(function()
    local ok, err = pcall(E.serve, E)
    if not ok then
      E.server_error = err
      J:stop("error")
      E:wake_all()
    end
  end)
  local ok, err = pcall(J.worker_loops, J, {
    own_steps = true,
    step = function(i) E:work_step(i) end,
    away = function(i) E:wait_back(i) end,
    -- a step a fault cut short (the worker is away): it pulls before the next
    cut_short = function(i) E.consumed[i], E.fresh[i] = true, false end,
    failed = function(i, e) E:worker_failed(i, e) end,
    finished = function(i) -- its last rows, and the server hears of the end
      E:write_rows(i, true)
      E.events:push{ kind = "done", worker = i }
    end,
  })
  E.events:push{ kind = "end" }
  server_task:wait()
  -- A synchronous job's fault comes first: a server error after it is its
  -- consequence (a server lost with its machine, whose calls' errors say
  -- less; a send the fault's abort cut, failing once a heal has made the
  -- workers whole again, where it would pass for the server's own).
  if J.fault_error then error(J.fault_error, 0) end
  if E.server_error then error(E.server_error, 0) end
  if not ok then error(err, 0) end
  if E.failure then error(E.failure, 0) end
end

function ps.train(opts)
  local mode = type(opts) == "table" and opts.mode or "bsp"
  local J = job.new("ps", opts, { mode = mode, options = OPTIONS })
  check_mode_options(J, mode)
  J.on_failure = J.o.on_failure or ((mode == "bsp") and "fail" or "drop")
  local servers = servers_of(J)
  J.o.server_opt = J.o.server_opt or { method = "sgd", lr = mode ~= "adaptive-k" and 1.0 or nil }
  J.o.server_opt.method = J.o.server_opt.method or "sgd"
  local policy = policies[mode](J.o, #J.workers)
  local sharded = #servers > 1
  if sharded and J.o.overlap then
    fail("ps.train: overlap = true with %d servers: refused (a bucket would be cut at every shard's edge); give one server", #servers)
  end
  check_used_options(J, mode, policy, sharded)
  worker.check_overlap(J, mode == "adaptive-k" and J.o.bb ~= false)
  check_summary(policy)
  local residuals = { "ef" } -- one per server's slice when sharded (worker.push_commands)
  for s = 1, sharded and #servers or 0 do residuals[#residuals + 1] = "ef." .. s end
  J:setup{ origin = sharded and J.workers[1] or servers[1], holders = sharded and {} or servers,
           eval_node = sharded and J.workers[1] or servers[1], model_name = "w", residuals = residuals }
  if sharded then J.eval_node:model{ name = "w_full", arch = J.o.model, seed = J.o.seed } end
  local E = Engine.new(J, policy, servers)
  E:setup_servers()
  E.compute = worker.new(J, { want_norm = policy.wants_norm,
                              bb = mode == "adaptive-k" and J.o.bb ~= false, bb_opts = J.o.bb_opts,
                              claim_model = true })
  E.compute:setup()
  local is_server = {}
  for _, node in ipairs(servers) do is_server[node] = true end
  J:watch_faults{ hub = function() return servers end, sync = mode == "bsp",
                  essential = function(node) return is_server[node] and "server" end,
                  on_change = function(i, back) E:on_fault(i, back) end,
                  rejoin = function(i) E.compute:setup_worker(i) end }
  J:start_clock()
  J:guard(function() run_engine(E) end)
  local extra = { policy = policy.name, servers = #servers, local_steps = J.o.local_steps or 1,
                  max_ahead = E.sync.max_ahead or 0, server_apply_ms = E.apply_ms,
                  k = policy.k, staleness = policy.staleness, drop_fraction = policy.drop_fraction,
                  theta = policy.theta }
  for key, v in pairs(policy.summary or {}) do extra[key] = v end -- a policy's own (check_summary)
  if sharded then
    hn.wait_all(E:gather("w_full"))
    extra.final_node, extra.final_model = J.eval_node, "w_full"
  end
  return J:finish(extra)
end

return ps
