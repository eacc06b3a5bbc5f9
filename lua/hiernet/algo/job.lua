-- hiernet.algo.job: what every training algorithm shares, written once.
--
--   local J = job.new("ps", opts, { mode = "bsp", options = { servers = job.check.nodes } })
--   J:setup{ origin = server, eval_node = server, holders = { server } }
--   ... the algorithm's loop: J:stopped(), J:step_row{...}, J:evaluate(...) ...
--   return J:finish{ steps = ..., updates_applied = ... }
--
-- A job is: the option table checked up front (unknown options and bad
-- values are errors naming the option and the value), the data and model
-- set-up (each worker loads its shard of the training split, one initial
-- model is made on one node and sent to every other, so every worker starts
-- from the same parameters), the training clock, the stop conditions, the
-- evaluation (in the background on the eval node, so it never stretches the
-- training it measures), and the metrics: <prefix>steps.csv,
-- <prefix>eval.csv and <prefix>summary.json in the results directory.
--
-- Times are on the run's clock (hn.now(), emulated seconds when the network
-- is dilated), counted from the moment training starts (after set-up).
local hn = require("hiernet")
local where = require("hiernet.where")
local tcp_account = require("hiernet.algo.tcp_account")
local traffic = require("hiernet.traffic")

local job = {}

-- ---- errors that point at the scenario's line, not at the library's ----

-- error() at the scenario's line (hiernet.where): the user's call that led here.
job.fail = where.fail

-- The params of an `optim` command stepping `target` (a model, or with
-- key = "tensor" any tensor) along `grad` with optimizer table opt
-- (worker_opt or server_opt); lr, when given, in place of opt.lr (a
-- decayed rate).
function job.optim_params(opt, target, grad, key, lr)
  return { [key or "model"] = target, grad = grad, method = opt.method, lr = lr or opt.lr,
           momentum = opt.momentum, beta1 = opt.beta1, beta2 = opt.beta2, eps = opt.eps,
           weight_decay = opt.weight_decay }
end

-- eval_node for algorithms where every worker holds the model and nobody
-- else does: it must be a worker (another node would evaluate a stale
-- copy); `other` names the node evaluated instead, when there is one.
function job.eval_node_among_workers(what, o, other)
  local e = o.eval_node
  if not e then return end
  if other then job.fail("%s: option 'eval_node' is not used (%s is evaluated)", what, other) end
  for _, w in ipairs(o.workers) do if w == e then return end end
  job.fail("%s: eval_node '%s' must be one of the workers (only they hold the model)", what, e.name)
end

-- An optimizer table (worker_opt, server_opt) that an algorithm steps with
-- plain SGD at its own rate: any other method, or a setting of one, would
-- be accepted and silently ignored, so it is an error naming the option.
-- `allowed` lists the keys besides method = "sgd" that the algorithm uses.
function job.plain_sgd_only(what, opt, allowed)
  if opt.method and opt.method ~= "sgd" then
    job.fail("%s: method '%s' is not used here (the step is plain SGD); leave it out", what, opt.method)
  end
  for k in pairs(opt) do
    if k ~= "method" and not allowed[k] then
      job.fail("%s: '%s' is not used here (the step is plain SGD); leave it out", what, k)
    end
  end
end
local fail = job.fail

-- Option checkers (hiernet.algo.check): each returns the checked (and
-- defaulted) value, or raises at the scenario's line naming the option.
local check = require("hiernet.algo.check")
job.check = check
local describe, is_node = check.describe, check.is_node

-- Options every algorithm takes (algorithm-specific ones come in spec.options).
local COMMON = {
  workers = check.nodes, model = check.string, init = check.string, seed = check.nonnegint,
  compute = check.oneof("kernel", "profile"), learn = check.model,
  dataset = check.dataset, batch = check.posint, worker_opt = check.optimizer,
  steps = check.posint, epochs = check.posnumber, seconds = check.posnumber,
  target_accuracy = check.fraction, stop_at_target = check.boolean, eval_every = check.posint,
  eval_every_s = check.posnumber, eval_limit = check.nonnegint,
  eval_node = check.node, final_eval_limit = check.nonnegint, compress = check.compress,
  prefix = check.name, on_failure = check.oneof("fail", "drop"), progress = check.boolean,
  label = check.string, at_start = check.func,
}

-- Read by modules that add options of their own (ps.add_mode): a common
-- option cannot be one mode's.
job.common_options = COMMON

local DEFAULTS = {
  model = "mlp:784-128-10", init = "default", seed = 1, batch = 64,
  worker_opt = { method = "sgd", lr = 0.05 },
}

-- Options as given, made JSON-safe (nodes become their names), for summary.json.
local function plain(v)
  if is_node(v) then return v.name end
  if type(v) == "function" then return "<function>" end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[plain(k)] = plain(x) end -- keys too: decentral's graph = { [node] = {...} }
  return out
end

-- compute = "profile" (docs/lua-api.md "Profiled compute"): every worker
-- has a profile, and the model may be a zoo architecture without kernels
-- (the peers check its name); learn = a real model that trains alongside.
-- Otherwise the model is a real one and learn has no place.
local function check_compute(algorithm, o)
  if o.compute ~= "profile" then
    if o.learn then
      fail("%s.train: option 'learn' goes with compute = \"profile\" (a surrogate learns while the profile times the model)", algorithm)
    end
    local ok, err = hn.model_check(o.model)
    if not ok then
      fail("%s.train: option 'model': %s (a zoo architecture such as \"resnet50\" computes by profile only: give compute = \"profile\")", algorithm, err)
    end
    return
  end
  for _, w in ipairs(o.workers) do
    if not w.profile then
      fail("%s.train: compute = \"profile\": worker '%s' has no profile (net:node(name, { profile = ... }))", algorithm, w.name)
    end
  end
end

local function check_options(algorithm, opts, spec)
  if type(opts) ~= "table" then fail("%s.train: expected a table of options, got %s", algorithm, describe(opts)) end
  local o = {}
  for k, v in pairs(opts) do
    local c = COMMON[k] or (spec.options or {})[k]
    if not c then fail("%s.train: unknown option '%s'", algorithm, tostring(k)) end
    o[k] = c(algorithm .. ".train: option '" .. k .. "'", v)
  end
  if o.workers == nil then fail("%s.train: option 'workers' is required", algorithm) end
  if not (o.steps or o.epochs or o.seconds) then
    fail("%s.train: give a stop condition: steps, epochs or seconds (target_accuracy may end it sooner)", algorithm)
  end
  for k, v in pairs(DEFAULTS) do if o[k] == nil then o[k] = v end end
  check_compute(algorithm, o)
  o.worker_opt.method = o.worker_opt.method or "sgd"
  o.dataset = o.dataset or { name = "fashion-mnist" }
  return o
end

-- ---- the job ----

local Job = {}
Job.__index = Job

-- Record prefixes in use in this run (one Lua state per run).
local used_prefixes = {}

local function pick_prefix(o, label)
  if o.prefix then
    if used_prefixes[o.prefix] then fail("prefix '%s' is already used by another training in this run", o.prefix) end
    used_prefixes[o.prefix] = true
    return o.prefix
  end
  local candidates = { "", label:gsub("[^A-Za-z0-9_.-]", "_") .. "_" }
  for _, p in ipairs(candidates) do
    if not used_prefixes[p] then used_prefixes[p] = true; return p end
  end
  for n = 2, 10000 do
    local p = candidates[2] .. n .. "_"
    if not used_prefixes[p] then used_prefixes[p] = true; return p end
  end
end

-- job.new(algorithm, opts, spec) -> job. spec: { mode=, options = {key = checker},
-- profile_learns = true when the family's compute by profile still runs the
-- real model's kernels (learning_of) }.
function job.new(algorithm, opts, spec)
  spec = spec or {}
  local o = check_options(algorithm, opts, spec)
  local mode = spec.mode
  local label = o.label or (mode and (algorithm .. "-" .. mode) or algorithm)
  local J = setmetatable({
    algorithm = algorithm, mode = mode, label = label, o = o,
    parameters = plain(opts),
    workers = o.workers,
    on_failure = o.on_failure or "fail",
    profile_learns = spec.profile_learns == true,
    -- progress of the training
    steps = 0, updates_applied = 0, bytes = 0, samples = 0, compute_ms = 0,
    worker_steps = 0, steps_of = {},
    last_loss = nil, best_accuracy = nil, last_accuracy = nil, time_to_target = nil,
    evals = 0, evals_skipped = 0, eval_busy = false, eval_task = nil,
    stop_reason = nil, dead = {}, away = {}, killed = {}, fault_hooks = {}, t0 = nil,
    -- what the faults cost (summary.json availability, updates_lost)
    away_since = {}, away_s = {}, updates_lost = 0, kills = {}, kills_heard = 0, killed_at = {},
  }, Job)
  -- The scenario's line of this train call: errors raised later, in tasks
  -- the library spawned, are reported there (Job:setup, Job:guard).
  J.where = where.user()
  if o.eval_every and o.eval_every_s then
    fail("%s.train: give eval_every (steps) or eval_every_s (seconds), not both", algorithm)
  end
  if o.eval_every == nil and o.eval_every_s == nil then
    o.eval_every = o.steps and math.max(1, o.steps // 20) or 50
  end
  return J
end

-- ---- set-up ----

-- Loads shard i of n of the training split on each worker (partition and
-- seed shared, so the shards are disjoint where the partition says so).
-- The params of a dataset command: worker i's shard of the training
-- split, or (i nil) the test split.
local function dataset_params(J, i)
  local d = J.o.dataset
  local p = { name = d.name, path = d.path, split = "test", seed = d.seed or J.o.seed, n = d.test_n,
              dim = d.dim, classes = d.classes, noise = d.noise }
  if i then
    p.split, p.shard, p.shards, p.n = "train", i, #J.workers, d.n
    p.partition, p.alpha = d.partition, d.alpha
  end
  return p
end

-- The params of the model command that makes the job's model on a node
-- (its values are then the origin's, sent to every holder).
local function model_params(J)
  return { name = J.model_name, arch = J.o.model, init = J.o.init, seed = J.o.seed,
           compute = J.o.compute, learn = J.o.learn }
end

-- What learns (summary.json "learning"): the model itself, a surrogate
-- beside a profiled model, or nothing (a timing-only run: no evaluation).
-- A family whose spec says profile_learns (split: its layer ranges run
-- the architecture's own kernels, padded to the profile's time) learns
-- the model itself by profile too.
local function learning_of(J)
  local o = J.o
  if o.compute ~= "profile" then return "real " .. o.model end
  if o.learn then return "surrogate " .. o.learn end
  if J.profile_learns then return "real " .. o.model .. ", timed by profile" end
  return "none (timing only)"
end

-- A timing-only run has nothing to evaluate.
function Job:learns()
  return self.o.compute ~= "profile" or self.o.learn ~= nil or self.profile_learns
end

-- The `tensor` command making `name` for elements [offset, offset + count)
-- of the model (offset 0 when nil): virtual like the model when the model
-- is a profiled one (its resident prefix only has memory; store.h).
function Job:model_tensor(name, count, offset, extra)
  local p = { name = name, size = count }
  for k, v in pairs(extra or {}) do p[k] = v end
  local r = self.model_resident
  if r and r < self.model_size then
    p.resident = math.max(0, math.min(count, r - (offset or 0)))
  end
  return { "tensor", p }
end

-- Elements of virtual tensors the job's nodes left out of computations,
-- summed from their peers' stats (nil where a peer cannot tell).
function Job:virtual_skipped()
  local total = 0
  for _, n in ipairs(self.nodes_used or self.workers) do
    local ok, st = pcall(n.stats, n)
    if ok and st.virtual_skipped_elements then total = total + st.virtual_skipped_elements end
  end
  return total
end

-- job.each(list, fn) -> results: fn(i, list[i]) for every entry at once,
-- each in a task of its own; returns when all are done, their results by i.
function job.each(list, fn)
  local tasks = {}
  for i, x in ipairs(list) do tasks[i] = hn.spawn(function() return fn(i, x) end) end
  return hn.wait_all(tasks)
end

-- job.all(list, fn, on_failure) -> results: as job.each, but a failure
-- waits for the others (a fault cuts a round short: each node's part of it
-- ends at its abort, and a task failing with nobody waiting for it would
-- fail the run); the first failure in list order is raised once all are
-- done. on_failure(err), when given, runs at the first failure (the
-- others' aborts: a failure that is no fault's would leave them waiting
-- out their timeouts), and that failure is the one raised.
function job.all(list, fn, on_failure)
  local first
  local packed = job.each(list, function(i, x)
    local r = table.pack(pcall(fn, i, x))
    if not r[1] and on_failure and not first then
      first = r[2]
      on_failure(first)
    end
    return r
  end)
  local out = {}
  for i, r in ipairs(packed) do
    if not r[1] then error(first or r[2], 0) end
    out[i] = r[2]
  end
  return out
end

-- J:on_every_worker(cmds_of): worker i runs the batch cmds_of(i), all at once.
function Job:on_every_worker(cmds_of)
  job.each(self.workers, function(i, w) w:batch(cmds_of(i)) end)
end

local function load_shards(J)
  local results = job.each(J.workers, function(i, w) return w:dataset(dataset_params(J, i)) end)
  J.train_samples = 0
  J.shard_samples = {}
  for i, r in ipairs(results) do
    J.shard_samples[i] = r.samples
    J.train_samples = J.train_samples + r.samples
  end
end

-- Error-feedback residuals left on the workers by an earlier training
-- would leak its compression error into this one (or, for another model,
-- not fit it): every worker starts with none.
local function drop_residuals(J, names)
  job.each(J.workers, function(_, w) w:drop{ names = names } end)
end

-- J:setup{ origin = node, holders = {nodes that hold the model besides the
-- workers}, eval_node = node, model_name = "w" }: datasets loaded, the model
-- created on origin and sent to every worker and holder, test split on the
-- eval node; residuals = {names} the compression's error feedback uses on
-- the workers (default {"ef"}), dropped first; columns = {names} appended
-- to steps.csv's (a family's own figures: split's per-stage times).
local function setup(self, s)
  s = s or {}
  -- The records (and their prefix) once every option has been checked: a
  -- train call that fails its checks leaves no files and frees no name.
  self.prefix = pick_prefix(self.o, self.label)
  local columns = { "time", "worker", "step", "loss", "compute_ms", "comm_ms", "wait_ms", "staleness",
    "lr", "k", "bytes", "samples", "version", "control_ms" }
  self.extra_columns = s.columns or {}
  for _, c in ipairs(self.extra_columns) do columns[#columns + 1] = c end
  self.steps_rec = hn.record(self.prefix .. "steps", columns)
  self.eval_rec = hn.record(self.prefix .. "eval", { "time", "step", "accuracy", "loss" })
  local name = s.model_name or "w"
  self.model_name = name
  self.eval_node = self.o.eval_node or s.eval_node or self.workers[1]
  load_shards(self)
  self.eval_node:dataset(dataset_params(self))
  local origin = s.origin or self.workers[1]
  local holders, seen = {}, { [origin.name] = true }
  for _, list in ipairs{ self.workers, s.holders or {}, { self.eval_node } } do
    for _, n in ipairs(list) do
      if not seen[n.name] then seen[n.name] = true; holders[#holders + 1] = n end
    end
  end
  -- Every holder needs a model of that name (grad and eval work on models);
  -- the data then comes from the origin's one initialisation.
  local tasks = {}
  for i, n in ipairs(holders) do
    tasks[i] = hn.spawn(function() n:model(model_params(self)) end)
  end
  local made = origin:model(model_params(self))
  hn.wait_all(tasks)
  self.model_size, self.model_resident = made.size, made.resident or made.size
  self.learning = learning_of(self)
  self.nodes_used = { origin }
  for _, n in ipairs(holders) do self.nodes_used[#self.nodes_used + 1] = n end
  if #holders > 0 then origin:send{ tensor = name, to = holders } end
  -- What the model gets as it arrives is not a step's message: forget it, so
  -- that no later wait takes it for one.
  job.each(holders, function(_, n) n:wait{ tensor = name, clear = true } end)
  if self.o.compress then drop_residuals(self, s.residuals or { "ef" }) end
  -- The starting point, measured outside the training time.
  if self:learns() then
    local r = self.eval_node:eval{ model = name, limit = self.o.eval_limit or 0 }
    self.initial_accuracy, self.initial_loss = r.accuracy, r.loss
  end
  hn.log(string.format("%s: %d workers, model %s (%d parameters), learning: %s, %d training samples, eval on %s%s",
    self.label, #self.workers, self.o.model, made.size, self.learning, self.train_samples, self.eval_node.name,
    self.prefix ~= "" and (", records " .. self.prefix .. "*") or ""))
end

-- A bad value found while setting up (a dataset a peer cannot load, say)
-- is reported at the train call's line, also when a task raised it.
function Job:setup(s)
  return where.call_at(self.where, setup, self, s)
end

-- What at_start gets: the clock's start and the training's progress, so
-- that a fault can be set off by the steps made, not by a wall-clock time
-- (which a loaded host stretches).
local function clock_of(J)
  return {
    start_s = J.t0, label = J.label,
    steps = function() return J.steps end,
    worker_steps = function() return J.worker_steps end,
    steps_of = function(name) return J.steps_of[name] or 0 end,
    stepping = function(name) return J:stepping(name) end,
    done = function() return J.closed == true or J.stop_reason ~= nil end,
    stop = function(reason) J:stop(reason or "at_start") end,
  }
end

-- Training starts now: times in the records count from here. The option
-- at_start(clock) runs as a task of its own from here (faults to schedule
-- in training time or on its progress, say).
function Job:start_clock()
  self.tcp = tcp_account.start(self.workers) -- issue 24: TCP in training
  self.background = traffic.snapshot(tcp_account.networks_of(self.workers)) -- issue 22: kept apart
  self.t0 = hn.now()
  self.next_eval_s = self.o.eval_every_s
  self.last_status = -1
  if self.o.at_start then hn.spawn(self.o.at_start, clock_of(self)) end
end

-- ---- clock, stop conditions, progress ----

-- Seconds of training so far, on the run's clock.
function Job:now()
  return hn.now() - self.t0
end

function Job:epochs()
  return self.train_samples > 0 and self.samples / self.train_samples or 0
end

-- The reason to stop (and remember it), or nil to go on.
function Job:stopped()
  if self.stop_reason then return self.stop_reason end
  local o = self.o
  if o.steps and self.steps >= o.steps then
    self.stop_reason = "steps"
  elseif o.epochs and self:epochs() >= o.epochs then
    self.stop_reason = "epochs"
  elseif o.seconds and self:now() >= o.seconds then
    self.stop_reason = "seconds"
  elseif o.target_accuracy and self.time_to_target and o.stop_at_target ~= false then
    self.stop_reason = "target_accuracy"
  elseif self:dropped_all() then
    self.stop_reason = "no workers left"
  end
  return self.stop_reason
end

-- Stops the job from outside the stop conditions (an algorithm's own reason).
function Job:stop(reason)
  self.stop_reason = self.stop_reason or reason
end

-- A fraction of the way to the nearest stop condition (for the ETA), or nil.
function Job:fraction_done()
  local o, f = self.o, nil
  local function take(x) if x and (not f or x > f) then f = x end end
  if o.steps then take(self.steps / o.steps) end
  if o.epochs then take(self:epochs() / o.epochs) end
  if o.seconds then take(self:now() / o.seconds) end
  return f
end

local function fmt(v, pattern)
  return v and string.format(pattern, v) or "-"
end

-- The live progress line (terminal) / a log line every few seconds (otherwise).
function Job:progress()
  if self.o.progress == false then return end
  local t = self:now()
  if t - self.last_status < 0.2 then return end
  self.last_status = t
  local f = self:fraction_done()
  local eta = (f and f > 0.01) and (t / f - t) or nil
  hn.status(string.format("%s step %d loss %s acc %s elapsed %.1fs ETA %s", self.label, self.steps,
    fmt(self.last_loss, "%.4f"), fmt(self.last_accuracy, "%.4f"), t, fmt(eta, "%.0fs")))
end

-- ---- workers ----

-- Worker i takes part: not dropped after a failure, not killed, not cut
-- off from what it must reach (Job:watch_faults).
function Job:alive(i)
  return not self.dead[i] and not self.away[i]
end

function Job:alive_count()
  local n = 0
  for i = 1, #self.workers do if self:alive(i) then n = n + 1 end end
  return n
end

-- Every worker dropped for good (away ones may come back).
function Job:dropped_all()
  for i = 1, #self.workers do
    if not self.dead[i] or self.killed[i] then return false end
  end
  return true
end

-- ---- faults (net:partition / heal, node:kill / restart) ----
--
-- J:watch_faults{ hub = function(i) -> the node worker i must reach (nil:
-- none), partners = function(i) -> the other nodes a step of worker i
-- involves (gossip's neighbours; default none besides its hubs),
-- on_change = function(i, back, why), rejoin = function(i) (set-up
-- a restarted worker's peer needs besides its data and model), sync = bool,
-- essential = function(node) -> its role ("server") when the training
-- cannot go on without that node (it holds the model) }
-- follows the network's fault events: a worker that is killed, or cut off
-- from its hub by a partition, is away (J:alive(i) false) until it is back
-- (healed, or restarted and set up again); the algorithm hears of each change
-- through on_change. A synchronous algorithm (sync) with on_failure = "fail"
-- stops at the first worker away, with an error naming it (J.fault_error);
-- any algorithm stops when an essential node is lost with its machine.

-- Whether the worker named `name` may still write steps.csv rows: its task
-- runs (a killed worker's pending rows are written as its task ends, after
-- the kill); on a family without worker tasks, whether it is alive.
function Job:stepping(name)
  for i, w in ipairs(self.workers) do
    if w.name == name then
      if self.loops then return self.loops.running[i] == true end
      return self:alive(i)
    end
  end
  error("clock.stepping: no worker named " .. tostring(name), 2)
end

-- The index of node among the workers, or nil.
function Job:worker_index(node)
  for i, w in ipairs(self.workers) do if w == node then return i end end
end

function Job:set_away(i, away, why)
  if (self.away[i] or false) == away then return end
  self.away[i] = away or nil
  self:count_away(i, away)
  local w = self.workers[i].name
  if away then
    if self.fault_error then
      -- the training fails already (its first fault says why): no more to say
    elseif self.fault_sync and self.on_failure ~= "drop" then
      self:fail_at_fault(string.format("worker %s %s", w, why))
    else
      hn.log(string.format("%s: worker %s %s; training goes on without it", self.label, w, why))
    end
  else
    hn.log(string.format("%s: worker %s is back (%s); it takes the current model", self.label, w, why))
  end
  -- who takes part changed: J:rounds recovers before its next round
  self.changed = true
  if self.fault_hooks.on_change then self.fault_hooks.on_change(i, not away, why) end
  if not away and self.loops then self.loops.back(i) end
end

-- The training stops at a fault it cannot go on from: the error (J.fault_error,
-- the first such fault's) names the step and what went wrong.
function Job:fail_at_fault(what)
  if self.fault_error then return end
  self.fault_error = string.format("%s: step %d: %s", self.label, self.steps, what)
  hn.log(self.fault_error)
  self:stop("fault")
end

-- Worker i's time away (killed or cut off), for its availability: the
-- share of the training's time it took part.
function Job:count_away(i, away)
  local t = self.t0 and self:now() or 0
  if away then
    self.away_since[i] = t
  elseif self.away_since[i] then
    self.away_s[i] = (self.away_s[i] or 0) + (t - self.away_since[i])
    self.away_since[i] = nil
  end
end

-- summary.json's availability (the mean over the workers) and
-- availability_workers (name -> share), at training time wall.
function Job:availability(wall)
  local shares, sum = {}, 0
  for i, w in ipairs(self.workers) do
    local away = (self.away_s[i] or 0) + (self.away_since[i] and wall - self.away_since[i] or 0)
    local share = wall > 0 and math.min(1, math.max(0, 1 - away / wall)) or 1
    shares[w.name], sum = share, sum + share
  end
  return sum / #self.workers, shares
end

-- The nodes worker i must reach (the hooks' hub: a node or a list).
local function hubs_of(J, i)
  local hub = J.fault_hooks.hub and J.fault_hooks.hub(i)
  if hub == nil then return {} end
  if type(hub) == "table" then return hub end
  return { hub }
end

-- The nodes a step of worker i involves besides itself: its hubs and the
-- hooks' partners(i) (gossip's neighbours, a collective's other workers).
local function involved_with(J, i)
  local out = {}
  for _, n in ipairs(hubs_of(J, i)) do out[#out + 1] = n end
  local partners = J.fault_hooks.partners and J.fault_hooks.partners(i) or {}
  for _, n in ipairs(partners) do out[#out + 1] = n end
  return out
end

-- Re-checks every worker against its hubs after a partition or a heal (or
-- asks the hooks' cut_off(i) -> why or nil, for algorithms without hubs).
function Job:recheck_reach(why)
  local net = self.workers[1].network
  for i, w in ipairs(self.workers) do
    if not self.killed[i] then
      local cut
      if self.fault_hooks.cut_off then
        cut = self.fault_hooks.cut_off(i)
      else
        for _, hub in ipairs(hubs_of(self, i)) do
          if not net:reachable(w, hub) then cut = "is cut off from " .. hub.name; break end
        end
      end
      self:set_away(i, cut ~= nil, cut and (cut .. " (" .. why .. ")") or why)
    end
  end
end

-- The largest group of the workers that reach each other (ties: the one
-- with the lowest index); by worker index, true for its members.
function Job:main_group()
  local net, n = self.workers[1].network, #self.workers
  local group, best, best_size = {}, nil, 0
  for i = 1, n do
    if not self.killed[i] and not group[i] then
      local members, size = { [i] = true }, 1
      for j = i + 1, n do
        if not self.killed[j] and net:reachable(self.workers[i], self.workers[j]) then
          members[j], size = true, size + 1
        end
      end
      for j in pairs(members) do group[j] = group[j] or members end
      if size > best_size then best, best_size = members, size end
    end
  end
  return best or {}
end

-- A restarted worker's peer is new: its shard, its model (the current one
-- comes with its next pull) and the algorithm's own tensors, then it is back.
function Job:resetup_worker(i)
  local w = self.workers[i]
  w:dataset(dataset_params(self, i))
  w:model(model_params(self))
  if self.eval_node == w then w:dataset(dataset_params(self)) end
  if self.fault_hooks.rejoin then self.fault_hooks.rejoin(i) end
end

-- Runs body(); whatever its end, the job's fault listeners fall silent
-- (they stay registered on the network, which outlives the training).
function Job:guard(body)
  local ok, r = pcall(body)
  self.closed = true
  -- The training's aborts are answered before it returns: one still on its
  -- way would cut the transfers of whatever runs next on those nodes.
  hn.wait_all(self.aborts or {})
  self.aborts = {}
  if not ok then error(where.relocate(r, self.where), 0) end
  return r
end

function Job:watch_faults(hooks)
  self.fault_hooks, self.fault_sync = hooks, hooks.sync
  local net = self.workers[1].network
  local function live(fn)
    return function(...) if not self.closed then return fn(...) end end
  end
  local on = function(event, fn) net:on(event, live(fn)) end
  -- why: the cause of a node lost with its machine (its agent gone), nil
  -- for node:kill()
  on("kill", function(_, node, why)
    -- a step in flight that involves the node may have failed of it (fault_follows)
    self.kills_heard = self.kills_heard + 1
    self.killed_at[node.name] = self.kills_heard
    local i = self:worker_index(node)
    if i then
      -- a worker taking part is always inside a step: its gradient is lost
      if self:alive(i) and not self:stopped() then self.updates_lost = self.updates_lost + 1 end
      self.killed[i] = true
      self.kills[i] = (self.kills[i] or 0) + 1
      self:set_away(i, true, why and ("was lost: " .. why) or "was killed")
      if why then self:abort_lost(node, involved_with(self, i)) end
    else
      -- A node lost with its machine never comes back (a killed one may be
      -- restarted): one the training cannot do without ends it, whatever
      -- its mode; its workers still go away (their waits end).
      local role = why and self.fault_hooks.essential and self.fault_hooks.essential(node)
      if role then self:fail_at_fault(string.format("%s %s was lost: %s", role, node.name, why)) end
      local lost_hub_of = {}
      for j = 1, #self.workers do
        for _, hub in ipairs(hubs_of(self, j)) do
          if hub == node then
            lost_hub_of[#lost_hub_of + 1] = self.workers[j]
            self:set_away(j, true, "lost " .. node.name .. (why and (": " .. why) or " (killed)"))
          end
        end
      end
      if why then self:abort_lost(node, lost_hub_of) end
    end
  end)
  on("restart", function(_, node)
    local i = self:worker_index(node)
    if i and self.killed[i] and not self:stopped() then
      -- churn can kill the node again while it is being set up: it stays
      -- away, and its next restart sets it up
      local kills = self.kills[i]
      local ok, err = pcall(self.resetup_worker, self, i)
      if not ok and self.kills[i] ~= kills then return end
      if not ok then error(err, 0) end
      self.killed[i], self.dead[i] = nil, nil
      self:recheck_reach("restarted")
      self:set_away(i, false, "restarted")
    elseif not i then
      self:recheck_reach(node.name .. " restarted")
    end
  end)
  on("partition", function() self:recheck_reach("partition") end)
  on("heal", function() self:recheck_reach("healed") end)
end

-- A node lost with its machine is reported killed only once the controller
-- sees its agent gone (lnet_fire_lost), while the data plane may fail a
-- transfer to it before that (connection reset or refused): a failure is
-- the loss's or not only once the loss is known. J:settle_losses(nodes)
-- pings nodes (default: every worker not killed and every hub) at once: a
-- node that lives answers, one whose machine is being lost fails when the
-- loss is known, its kill event queued behind, whose listeners run on the
-- yield (every ready task first). Then J:alive, J.changed and
-- J.fault_error say whether a fault came.
function Job:settle_losses(nodes)
  if not nodes then
    nodes = {}
    local seen = {}
    local function add(n) if not seen[n] then seen[n], nodes[#nodes + 1] = true, n end end
    for i, w in ipairs(self.workers) do
      if not self.killed[i] then add(w) end
      for _, hub in ipairs(hubs_of(self, i)) do add(hub) end
    end
  end
  local tasks = {}
  for _, n in ipairs(nodes) do tasks[#tasks + 1] = hn.spawn(function() pcall(n.ping, n) end) end
  hn.wait_all(tasks)
  hn.yield()
end

-- ---- the fault frame: aborts, partitions, rounds ----
--
-- What every family does when a fault strikes mid-step, written once: the
-- transfers that will never be acknowledged are aborted on both ends (so no
-- peer waits out its timeout), and a synchronous loop drops the round that
-- was cut and runs the next one with who is left.

-- Spawns node:abort{ nodes = nodes, any_wait = any_wait } (an abort that
-- fails, a dead node's, is of no matter: the fault is already known). The
-- task is kept in J.aborts until J:rounds has seen it answered: an abort
-- that reached its peer late would cut the next round's transfers. It
-- names the nodes' incarnations of now: a node restarted before the abort
-- reaches its peer keeps its new connections there.
local function spawn_abort(J, node, nodes, any_wait)
  local incarnations = {}
  for _, n in ipairs(nodes) do incarnations[n.name] = n.incarnation end
  local p = { nodes = nodes, any_wait = any_wait, incarnations = incarnations }
  local task = hn.spawn(function() pcall(node.abort, node, p) end)
  local kept = { task }
  for _, t in ipairs(J.aborts or {}) do
    if t:status() ~= "done" then kept[#kept + 1] = t end
  end
  J.aborts = kept
  return task
end

-- A killed worker is left out of the aborts: its abort would be answered
-- only once its end is seen (0.85 s under load), and it sends nothing more.
local function killed(J, node)
  local i = J:worker_index(node)
  return i ~= nil and J.killed[i] == true
end

-- J:abort_between(lost, partners, any_wait) -> tasks: lost stops its
-- transfers with every partner, and each partner those with lost. With
-- any_wait a partner's waits end whoever they wait for: in a collective a
-- partner may wait on a neighbour whose step lost has stopped.
function Job:abort_between(lost, partners, any_wait)
  local tasks = {}
  if not killed(self, lost) then tasks[1] = spawn_abort(self, lost, partners) end
  for _, p in ipairs(partners) do tasks[#tasks + 1] = spawn_abort(self, p, { lost }, any_wait) end
  return tasks
end

-- J:abort_lost(node, partners): a node lost with its machine never answers
-- again, and a transfer to it may hang (a connect whose SYNs the vanished
-- machine drops waits out the peer's 30 s connect timeout): every partner
-- of its (those a step of theirs involves it with) not killed stops its
-- transfers with it at once. Before it, gossip's w1 was still connecting to
-- the lost w5 20 s after the loss in 1 of 5 runs of
-- netns.cluster.lost_gossip at -j4. A killed node keeps its machine, whose
-- kernel refuses the connect: no abort is needed there.
function Job:abort_lost(node, partners)
  for _, p in ipairs(partners) do
    if p ~= node and not killed(self, p) then spawn_abort(self, p, { node }) end
  end
end

-- J:abort_among(nodes) -> tasks: every node stops its transfers with all
-- the others (a round that involves them all is cut).
function Job:abort_among(nodes)
  local tasks = {}
  for _, n in ipairs(nodes) do
    if not killed(self, n) then tasks[#tasks + 1] = spawn_abort(self, n, nodes) end
  end
  return tasks
end

-- J:group_faults() -> the hooks of J:watch_faults for workers that wait
-- for each other (a collective, D-PSGD's neighbours): the largest group of
-- workers that reach each other goes on (J:main_group), a synchronous job
-- stops at the first worker away (unless on_failure = "drop"), and a
-- worker away stops its transfers with the others and they theirs,
-- whoever their waits wait for (any_wait: in a ring a worker waits on a
-- neighbour whose step the lost one stopped).
function Job:group_faults()
  return {
    sync = true,
    partners = function(i) return self:others(i) end,
    cut_off = function(i)
      if not self:main_group()[i] then return "is cut off from the other workers" end
    end,
    on_change = function(i, back)
      if not back then self:abort_between(self.workers[i], self:others(i), true) end
    end,
  }
end

-- The other workers, as nodes.
function Job:others(i)
  local out = {}
  for j, w in ipairs(self.workers) do if j ~= i then out[#out + 1] = w end end
  return out
end

-- J:on_partition(cut, healed): cut() after every net:partition and
-- healed() after every heal, while the training runs (faults that need no
-- worker to be away: a transfer across the new cut will never arrive).
-- Either counts as a change for J:rounds (who reaches whom moved).
function Job:on_partition(cut, healed)
  local net = self.workers[1].network
  local function live(fn)
    return function()
      if self.closed then return end
      self.changed = true
      if fn then fn() end
    end
  end
  net:on("partition", live(cut))
  net:on("heal", live(healed))
end

-- J:abort_cut(): every worker stops its transfers with the workers a
-- partition put out of its reach (for J:on_partition).
function Job:abort_cut()
  local net = self.workers[1].network
  for _, a in ipairs(self.workers) do
    local cut = {}
    for _, b in ipairs(self.workers) do if b ~= a and not net:reachable(a, b) then cut[#cut + 1] = b end end
    if #cut > 0 then spawn_abort(self, a, cut) end
  end
end

-- J:clear_arrivals(list): on each { node, names } of list at once, the
-- arrivals of names nobody waited for are dropped (what a cut round sent
-- may land after its waits were aborted: a wait of the next round must not
-- take it for its own). A node that cannot answer (dead) is of no matter.
function Job:clear_arrivals(list)
  job.each(list, function(_, e) pcall(e[1].wait, e[1], { tensors = e[2], clear = true }) end)
end

-- A fault changed who takes part since the last recovery (the frame's
-- own mark, or state.changed where a family's hook sets it).
local function change_pending(J, state)
  return J.changed or state.changed
end

-- One round of J:rounds; false when nobody took part or a fault cut it.
local function run_round(J, r, state)
  local members = r.members()
  if #members == 0 then
    hn.sleep(0.05) -- nobody can take part: wait for a worker to be back
    return false
  end
  if change_pending(J, state) then
    J.changed, state.changed = false, false
    hn.wait_all(J.aborts or {}) -- every abort answered before the next transfers
    J.aborts = {}
    if r.recover then r.recover(members) end
  end
  local result = table.pack(pcall(r.step, members))
  if not result[1] then
    if not J.fault_error and not change_pending(J, state) then J:settle_losses() end
    if J.fault_error then error(J.fault_error, 0) end
    if not change_pending(J, state) then error(result[2], 0) end
    return false -- cut by a fault: run again with who is left
  end
  if r.record then r.record(members, table.unpack(result, 2, result.n)) end
  return true
end

-- J:rounds{ state =, members =, recover =, step =, record = }: the loop of
-- a synchronous algorithm, until the training stops. Each round:
-- members() lists who takes part (empty: wait for one to be back); after
-- a change (a worker away or back, a partition or a heal: the frame marks
-- it; state.changed, when a hook of the family sets it) every abort is
-- waited for and recover(members) runs first (clear what a cut round
-- left, bring the models together); step(members) runs protected, and its
-- error is the fault's when a change came meanwhile (the round is
-- dropped), the training's when a synchronous job stopped at a fault
-- (J.fault_error), else raised as it is; record(members, ...) gets what
-- step returned. When the loop ends on a change not recovered from yet,
-- finally(members) runs (the models brought together for the end).
function Job:rounds(r)
  local state = r.state or {}
  while not self:stopped() do run_round(self, r, state) end
  if self.fault_error then error(self.fault_error, 0) end
  if r.finally and change_pending(self, state) then
    hn.wait_all(self.aborts or {})
    r.finally(r.members())
  end
  return state
end

-- ---- workers on their own: the asynchronous frame ----

-- The step every worker ends with under lockstep: the highest any worker
-- has started when the stop is noticed (one already under way waits for
-- its neighbours' messages of that step).
local function next_step(J, L, i)
  local t = L.done[i] + 1
  if J.o.steps and t > J.o.steps and not L.own_steps then return nil end
  -- A fault ends a synchronous training at once: a step started now would
  -- wait for neighbours that the fault has stopped.
  if J.fault_error then return nil end
  if L.lockstep then
    if not L.last and J:stopped() then L.last = math.max(table.unpack(L.started)) end
    if L.last and t > L.last then return nil end
  elseif J:stopped() then
    return nil
  end
  return t
end

-- J.steps: the fewest steps any live worker has finished; on_steps(v) for
-- every v it passes.
local function count_steps(J, L)
  local m = math.huge
  for i = 1, #J.workers do if J:alive(i) then m = math.min(m, L.done[i]) end end
  local before = J.steps
  J.steps = m == math.huge and J.steps or m
  for v = before + 1, L.on_steps and J.steps or 0 do L.on_steps(v) end
end

-- How often a worker away looks whether it is back or the job has stopped
-- (a stop by steps or seconds is no event that could wake it).
local AWAY_POLL_S = 0.02

-- A live worker's failed step: the family's own handling (L.failed), or
-- J:worker_failed (dropped with on_failure = "drop", else the error ends
-- the task and the training).
local function step_failed(J, L, i, err)
  if L.failed then return L.failed(i, err) end
  J:worker_failed(i, err)
end

-- Whether worker i's failed step was a fault's whose event came after the
-- failure (J:settle_losses): worker i went away, the job stopped at a
-- fault, or a node the step involves (its hubs and partners) was killed
-- since the step began (kills: J.kills_heard then). A kill of any other
-- node is no cause of this step's failure: its own error coinciding with
-- an unrelated kill is the worker's, not retried.
local function fault_follows(J, i, kills)
  J:settle_losses()
  if not J:alive(i) or J.fault_error ~= nil then return true end
  for _, n in ipairs(involved_with(J, i)) do
    if (J.killed_at[n.name] or 0) > kills then return true end
  end
  return false
end

-- Worker i's task: its steps until it has made them all or the job stops;
-- away, it waits to be back or the job's end (L.away(i), else a poll; a
-- killed one's task ends: a restart spawns a new one). A failed step is
-- the fault's when the worker went away (L.cut_short(i) resets what the
-- family keeps of it) or the job stopped at a fault, else the worker's.
local function work(J, L, i)
  L.running[i] = true
  while true do
    if not J:alive(i) then
      if J.killed[i] or J.dead[i] or J:stopped() then break end
      if L.away then L.away(i) else hn.sleep(AWAY_POLL_S) end
    else
      local t = next_step(J, L, i)
      if not t then break end
      L.started[i] = t
      local kills = J.kills_heard
      local ok, err = pcall(L.step, i, t)
      if ok then
        L.done[i] = t
        if not L.own_steps then count_steps(J, L) end
      elseif not J.fault_error and J:alive(i) and not fault_follows(J, i, kills) then
        step_failed(J, L, i, err)
        break
      elseif J.fault_error then
        break -- the training ends with the fault's error
      elseif L.cut_short then
        L.cut_short(i)
      end
    end
  end
  L.running[i] = false
  if L.finished then L.finished(i) end
end

-- J:worker_loops{ step = function(i, t), lockstep =, running =, on_steps = }:
-- every worker in a task of its own runs step(i, t) for t = 1.. until the
-- job stops. lockstep: all end at the same step (neighbours that wait for
-- each other's messages, as D-PSGD's). running: a table the frame keeps
-- running[i] in (a step may read who still steps). on_steps(v): once every
-- live worker has made v steps (J.steps, the fewest any has made). A
-- worker away waits to be back (or the end), a restarted one gets a new
-- task.
-- A family with an engine of its own (ps: a server task takes the pushes)
-- adds: own_steps (it counts J.steps itself: the frame neither sets it nor
-- ends a worker at `steps`), away(i) (worker i's wait while away, woken by
-- the family), cut_short(i) (a step a fault cut while the worker was
-- away), failed(i, err) (a live worker's failed step, instead of
-- J:worker_failed), finished(i) (worker i's task ends).
-- Returns once every task has ended; raises a synchronous job's fault.
function Job:worker_loops(o)
  local L = { step = o.step, lockstep = o.lockstep, on_steps = o.on_steps, running = o.running or {},
              own_steps = o.own_steps, away = o.away, cut_short = o.cut_short, failed = o.failed,
              finished = o.finished, done = {}, started = {}, tasks = {} }
  for i = 1, #self.workers do L.done[i], L.started[i] = 0, 0 end
  local function spawn(i)
    L.running[i] = true -- before the task starts: a second wake-up spawns no twin
    L.tasks[#L.tasks + 1] = hn.spawn(function() work(self, L, i) end)
  end
  self.loops = {
    back = function(i) if not L.running[i] and not self:stopped() then spawn(i) end end,
    running = L.running,
  }
  for i = 1, #self.workers do spawn(i) end
  local k = 1
  while L.tasks[k] do -- restarts may add tasks while we wait
    L.tasks[k]:wait()
    k = k + 1
  end
  self.loops = nil
  if not L.own_steps then count_steps(self, L) end
  self:stopped() -- the reason, when every worker stopped at `steps` by itself
  if self.fault_error then error(self.fault_error, 0) end
end

-- A worker's command failed. With on_failure = "drop" the training goes on
-- without it (logged); otherwise the error ends the training.
function Job:worker_failed(i, err)
  if self.on_failure ~= "drop" then error(err, 0) end
  if not self.dead[i] then
    self.dead[i] = true
    -- the cause as the peer said it, without the library line it surfaced at
    local cause = tostring(err):gsub("^[^:]*%.lua:%d+: ", "")
    hn.log(string.format("%s: worker %s dropped: %s", self.label, self.workers[i].name, cause))
  end
end

-- ---- metrics ----

-- One row of steps.csv: {worker=i, step=, time=, loss=, compute_ms=,
-- comm_ms=, wait_ms=, staleness=, lr=, k=, bytes=, samples=, version=,
-- control_ms=}; time defaults to now; control_ms (default 0) is the
-- control channel's share of the step (job.timed_batch), which comm_ms and
-- wait_ms leave out. version: the model version the step's push was computed
-- on, where the algorithm numbers its models (ps), so that a replay knows
-- which model each update came from. node: the row's node when it is not
-- a worker (a pipeline stage); the setup's extra columns are taken from r.
function Job:step_row(r)
  self.worker_steps = self.worker_steps + 1
  self.compute_ms = self.compute_ms + (r.compute_ms or 0)
  self.bytes = self.bytes + (r.bytes or 0)
  -- samples_counted: the algorithm counted them already (ps counts a
  -- round's when it closes, for an `epochs` stop)
  if not r.samples_counted then self.samples = self.samples + (r.samples or 0) end
  if r.loss then self.last_loss = r.loss end
  tcp_account.note_step(self.tcp, r)
  local name = r.node and r.node.name or self.workers[r.worker].name
  self.steps_of[name] = (self.steps_of[name] or 0) + 1
  local row = { time = r.time or self:now(), worker = name, step = r.step,
    loss = r.loss, compute_ms = r.compute_ms, comm_ms = r.comm_ms, wait_ms = r.wait_ms,
    staleness = r.staleness, lr = r.lr, k = r.k, bytes = r.bytes, samples = r.samples,
    version = r.version, control_ms = r.control_ms or 0 }
  for _, c in ipairs(self.extra_columns or {}) do row[c] = r[c] end
  self.steps_rec:add(row)
  self:progress()
end

-- Bytes moved outside worker steps (model broadcasts, averaging rounds).
function Job:count_bytes(n)
  self.bytes = self.bytes + (n or 0)
end

-- The sum of the `ms` of a list of results (a batch's results, say).
function job.sum_ms(results, first, last)
  local s = 0
  for i = first or 1, last or #results do s = s + (results[i].ms or 0) end
  return s
end

-- node:batch(cmds) timed on both sides: returns its reply, the control
-- channel's share of it, ms: the controller's dispatch-to-reply time less
-- the peer's own time of the batch (reply.ms), and that dispatch-to-reply
-- time. Across machines the share is the relay through the agent and the
-- control round trip, which a step's comm_ms and wait_ms must not count as
-- network time.
function job.timed_batch(node, cmds)
  local t0 = hn.now()
  local reply = node:batch(cmds)
  local elapsed = (hn.now() - t0) * 1000
  return reply, math.max(0, elapsed - (reply.ms or elapsed)), elapsed
end

-- The token tensor of a receiver's rendezvous (ar.rendezvous): its sends
-- are control traffic, not the step's data, and count in no byte column.
job.READY_TENSOR = "ar.ready"

-- What a batch's results say, by the command that gave each (cmds[k] =
-- { name, params }): send_ms and bytes of its sends, wait_ms of its waits,
-- compute_ms of everything else, samples and mean loss of its grads (a
-- grad on the same batch again, as a line search does, counts once), norm2
-- from its last norm. Every algorithm's step row is made from this.
function job.batch_summary(results, cmds)
  local r = { compute_ms = 0, send_ms = 0, wait_ms = 0, bytes = 0, samples = 0 }
  local losses, grads = 0, 0
  for k, res in ipairs(results) do
    local name, params = cmds[k][1], cmds[k][2]
    if name == "send" and params.tensor == job.READY_TENSOR then
      -- control traffic: in no column
    elseif name == "send" then
      r.send_ms, r.bytes = r.send_ms + res.ms, r.bytes + res.bytes
    elseif name == "wait" then
      r.wait_ms = r.wait_ms + res.ms
    elseif name == "bucket" then
      -- the rest of an overlapped grad: counted whole at the grad (grad_ms)
    else
      -- an overlapped profiled grad ends at its first bucket; grad_ms is all of it
      r.compute_ms = r.compute_ms + (res.grad_ms or res.ms)
    end
    if name == "grad" and not params.same_batch then
      r.samples = r.samples + res.batch
      -- a timing-only profiled grad has no loss
      if res.loss then losses, grads = losses + res.loss, grads + 1 end
    end
    if name == "norm" then r.norm2 = res.value * res.value end
  end
  r.loss = grads > 0 and losses / grads or nil
  return r
end

-- The command that compresses tensor into out with the job's compression
-- (error feedback kept in o.residual, default "ef", when asked; o.range: a
-- range of tensor alone).
function job.compress_command(c, tensor, out, o)
  o = o or {}
  return { "compress", { tensor = tensor, method = c.method, ratio = c.ratio, out = out, range = o.range,
                         residual = c.error_feedback and (o.residual or "ef") or nil } }
end

-- ---- evaluation ----

local function record_eval(J, t, step, r)
  J.evals = J.evals + 1
  J.last_accuracy = r.accuracy
  if not J.best_accuracy or r.accuracy > J.best_accuracy then J.best_accuracy = r.accuracy end
  J.eval_rec:add{ time = t, step = step, accuracy = r.accuracy, loss = r.loss }
  if J.o.target_accuracy and not J.time_to_target and r.accuracy >= J.o.target_accuracy then
    J.time_to_target = t
    J.steps_to_target = step
    hn.log(string.format("%s: accuracy %.4f >= target %.4f at %.2f s (step %d)", J.label,
      r.accuracy, J.o.target_accuracy, t, step))
  end
end

-- Evaluates `model` on `node` (default: the job's eval node and model) as
-- of now, in the background: the peer snapshots the model in order with its
-- compute commands and evaluates it on a low-priority thread, so training
-- commands never wait for it. The row's time is the snapshot's. One
-- evaluation at a time: a due evaluation while one runs is skipped.
function Job:evaluate(step, node, model)
  if not self:learns() then return end -- timing only: nothing to evaluate
  if self.eval_busy then
    self.evals_skipped = self.evals_skipped + 1
    return
  end
  node, model = node or self.eval_node, model or self.model_name
  if not node.network:reachable(node, node) then -- killed: nothing to evaluate on
    self.evals_skipped = self.evals_skipped + 1
    return
  end
  local t = self:now()
  self.eval_busy = true
  local task = hn.spawn(function()
    local ok, r = pcall(node.eval, node, { model = model, limit = self.o.eval_limit or 0, background = true })
    self.eval_busy = false
    if ok then record_eval(self, t, step, r) else hn.log(self.label .. ": evaluation failed: " .. tostring(r)) end
  end)
  self.eval_task = task -- only the running one is kept: a long run makes thousands
  hn.yield() -- the eval request goes out before the caller's next command: the snapshot is of now
end

-- True when `step` is an evaluation step: every eval_every steps, or with
-- eval_every_s the first step to end at or after each multiple of it on the
-- job's clock (so families whose steps differ in length are compared at the
-- same times). Periods a long step spans are skipped, not caught up. Ask
-- once per step: with eval_every_s a true answer moves the next time on.
function Job:eval_due(step)
  local every_s = self.o.eval_every_s
  if not every_s then return step > 0 and step % self.o.eval_every == 0 end
  local t = self:now()
  if t < self.next_eval_s then return false end
  self.next_eval_s = (math.floor(t / every_s) + 1) * every_s
  return true
end

-- ---- the end ----

-- The fields of every summary (docs/algorithms.md, "Metrics", lists the
-- same): summary.json has each, null where not reached (no target given
-- or reached, no loss recorded); in the returned table those are nil.
job.SUMMARY_FIELDS = {
  "algorithm", "mode", "parameters", "initial_accuracy", "initial_loss", "final_accuracy",
  "final_loss", "final_eval_failed", "best_accuracy", "target_accuracy", "time_to_target_s",
  "steps_to_target", "steps", "updates_applied", "worker_steps", "epochs", "train_samples", "bytes",
  "wall_s", "start_s", "compute_share", "stop_reason", "evals", "evals_skipped", "last_loss", "prefix",
  "workers", "workers_alive", "learning", "virtual_skipped_elements", "availability",
  "availability_workers", "updates_lost",
}

-- Final evaluation (outside the training time), summary.json, and the
-- summary returned to the scenario. extra: algorithm-specific fields.
local function finish(self, extra)
  self.closed = true
  local wall = self:now()
  if self.eval_task then hn.wait_all{ self.eval_task } end
  local node, model = self.eval_node, self.model_name
  if extra and extra.final_node then node, model = extra.final_node, extra.final_model or model end
  local ok, r = true, {}
  if self:learns() then
    ok, r = pcall(node.eval, node, { model = model, limit = self.o.final_eval_limit or self.o.eval_limit or 0 })
  end
  if not ok then
    -- The node that holds the model died (a fault): the last evaluation stands.
    hn.log(string.format("%s: final evaluation failed (%s); the last one stands", self.label,
                         tostring(r):gsub("^[^:]*%.lua:%d+: ", "")))
    r = { accuracy = self.last_accuracy or self.initial_accuracy, loss = nil, failed = true }
  end
  local s = {
    algorithm = self.algorithm, mode = self.mode, parameters = self.parameters, prefix = self.prefix,
    workers = #self.workers, workers_alive = self:alive_count(),
    initial_accuracy = self.initial_accuracy, initial_loss = self.initial_loss,
    final_accuracy = r.accuracy, final_loss = r.loss, final_eval_failed = r.failed or false,
    best_accuracy = r.accuracy and math.max(self.best_accuracy or r.accuracy, r.accuracy),
    target_accuracy = self.o.target_accuracy, time_to_target_s = self.time_to_target,
    steps_to_target = self.steps_to_target,
    steps = self.steps, updates_applied = self.updates_applied, worker_steps = self.worker_steps,
    epochs = self:epochs(), train_samples = self.train_samples, bytes = math.floor(self.bytes + 0.5),
    wall_s = wall, start_s = self.t0,
    compute_share = wall > 0 and self.compute_ms / 1000 / (#self.workers * wall) or nil,
    stop_reason = self.stop_reason, evals = self.evals, evals_skipped = self.evals_skipped,
    last_loss = self.last_loss, learning = self.learning,
    virtual_skipped_elements = self:virtual_skipped(),
    updates_lost = self.updates_lost,
  }
  s.availability, s.availability_workers = self:availability(wall)
  for k, v in pairs(extra or {}) do
    if k ~= "final_node" and k ~= "final_model" then s[k] = v end
  end
  if hn.overload then
    local ok, ov = pcall(hn.overload)
    if ok then s.overload = ov end
  end
  s.tcp = tcp_account.finish(self.tcp, self.label, #self.workers, self.worker_steps)
  s.background = traffic.window(self.background, tcp_account.networks_of(self.workers))
  local json = {}
  for k, v in pairs(s) do json[k] = v end
  for _, k in ipairs(job.SUMMARY_FIELDS) do
    if json[k] == nil then json[k] = hn.null end
  end
  hn.write_json(self.prefix .. "summary", json)
  hn.log(string.format("%s: %s after %d steps, %.2f s: final accuracy %s (best %s)%s, %s",
    self.label, self.stop_reason or "stopped", self.steps, wall,
    s.final_accuracy and string.format("%.4f", s.final_accuracy) or "- (timing only)",
    s.best_accuracy and string.format("%.4f", s.best_accuracy) or "-",
    s.time_to_target_s and string.format(", target reached at %.2f s", s.time_to_target_s) or "",
    job.format_bytes(self.bytes)))
  return s
end

-- An error of the end (summary.json cannot be written, say) names the
-- train call's line, like the set-up's.
function Job:finish(extra)
  return where.call_at(self.where, finish, self, extra)
end

function job.format_bytes(n)
  if n >= 1e9 then return string.format("%.2f GB", n / 1e9) end
  if n >= 1e6 then return string.format("%.2f MB", n / 1e6) end
  if n >= 1e3 then return string.format("%.1f kB", n / 1e3) end
  return string.format("%d B", n)
end

return job
