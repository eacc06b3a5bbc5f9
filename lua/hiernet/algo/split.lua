-- hiernet.algo.split: split learning and pipeline model parallelism
-- (docs/algorithms.md "Split learning and pipelines").
--
--   split.train{ parts = { { node = t1, layers = "1-2" }, { node = e1, layers = "3-5" },
--                          { node = c, layers = "6-" } },
--                microbatches = 4, schedule = "gpipe" | "1f1b", batch = 64, steps = 100, ... }
--   split.train{ mode = "splitfed", clients = { t1, t2, t3 },
--                parts = { { layers = "1-4" }, { node = c, layers = "5-" } }, ... }
--
-- A pipeline step: the first part reads a mini-batch of `batch` samples
-- from its node's shard in `microbatches` micro-batches; each part runs
-- forward{} on each micro-batch and sends its activations to the next
-- part, the labels go from the first part to the last with them ("ship"),
-- the last part computes the loss, and gradients flow back with
-- backward{}; each part sums its micro-batches' gradients, scales by
-- 1/microbatches and steps its own layers. Every part's node holds the
-- whole model tensor "w" (one initialisation) and changes only its own
-- layers' slices; the evaluation node gathers every part's slices before
-- it evaluates. The activations and gradients are real tensors sent over
-- the emulated links (send{}). Each stage runs its step as one batch{}:
-- its waits, passes and sends in the schedule's order, so a stage computes
-- while its sends are in flight.
--
-- splitfed (Thapa et al.): every client holds the client part and trains
-- it on its own shard; the server part's node takes each client's
-- activations in turn, sums the server-side gradients and steps once per
-- round (the average of the clients' server-side steps, which is SplitFed
-- v1's averaging of the server copies for plain SGD); the clients step
-- their part and the server averages the client parts (FedAvg) and sends
-- the average back, every round.
--
-- Same frame as every family (hiernet.algo.job): options, records,
-- evaluation, summary. steps.csv has one row per stage (or client) and
-- step, with the columns stage, forward_ms, backward_ms, transfer_ms,
-- bubble_share and bubble_share_compute; summary.json adds schedule,
-- microbatches, stages, cuts, bubble_share (measured, mean over the steps
-- after the first and the stages), bubble_share_ideal = (p - 1) / (M + p
-- - 1), and what the measured share is made of: bubble_share_even and
-- bubble_share_compute (the step replayed with the stages' compute alone,
-- hiernet.algo.pipeline_replay) and control_share (docs/algorithms.md
-- "What the bubble is made of").
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local replay = require("hiernet.algo.pipeline_replay")

local split = {}
local check, fail = job.check, job.fail

local MODEL = "w"
local BATCH_MAX_COMMANDS = 256 -- peer/commands_sync.c's limit of a batch
local WAIT_TIMEOUT_S = 120

-- ---- layers and parts ----

-- "3-5", "6-" (to the last layer), "4", or { 3, 5 } -> 3, 5.
function split.parse_layers(what, v, count)
  local a, b
  if type(v) == "table" then
    a, b = v[1], v[2]
  elseif type(v) == "string" then
    local x, dash, y = v:match("^%s*(%d+)%s*(%-?)%s*(%d*)%s*$")
    if x then a, b = tonumber(x), (y ~= "" and tonumber(y)) or (dash == "-" and count) or tonumber(x) end
  elseif math.type(v) == "integer" then
    a, b = v, v
  end
  if math.type(a) ~= "integer" or math.type(b) ~= "integer" or a < 1 or b < a or b > count then
    fail("%s: layers %s: expected \"a-b\", \"a-\" or {a, b} within layers 1 to %d", what,
         check.describe(v), count)
  end
  return a, b
end

-- The slices of the flat tensor that layers a..b own: their parameters
-- (contiguous) and their batch norms' running statistics (contiguous),
-- as { {offset, count}, ... }.
function split.param_ranges(layers, a, b)
  local ranges = {}
  local function span(first, stop)
    if first then ranges[#ranges + 1] = { first, stop - first } end
  end
  local p0, p1, s0, s1
  for i = a, b do
    local l = layers[i]
    if l.params > 0 then p0 = p0 or l.offset; p1 = l.offset + l.params end
    if l.stats then s0 = s0 or l.stat_offset; s1 = l.stat_offset + l.stats end
  end
  span(p0, p1)
  span(s0, s1)
  return ranges
end

local function check_parts(what, v)
  if type(v) ~= "table" or #v < 2 then fail("%s: expected a list of at least 2 parts, got %s", what, check.describe(v)) end
  for i, p in ipairs(v) do
    if type(p) ~= "table" then fail("%s[%d]: expected { node =, layers = }, got %s", what, i, check.describe(p)) end
    for k in pairs(p) do
      if k ~= "node" and k ~= "layers" then fail("%s[%d]: unknown field '%s'", what, i, tostring(k)) end
    end
    if p.node ~= nil then check.node(string.format("%s[%d].node", what, i), p.node) end
  end
  return v
end

local OPTIONS = {
  parts = check_parts, microbatches = check.posint, schedule = check.oneof("gpipe", "1f1b"),
  mode = check.oneof("pipeline", "splitfed"), clients = check.nodes, labels = check.oneof("ship"),
}

-- The parts resolved against the model: contiguous from layer 1 to the
-- last, every cut at a place a part may start (not inside a residual block).
local function resolve_parts(o, layers, splitfed)
  local parts, next_layer, holder = {}, 1, {}
  for i, p in ipairs(o.parts) do
    local what = string.format("split.train: option 'parts'[%d]", i)
    local a, b = split.parse_layers(what, p.layers, #layers)
    if a ~= next_layer then fail("%s: starts at layer %d, the part before ends at layer %d", what, a, next_layer - 1) end
    if not layers[a].cut_before then
      fail("%s: a part cannot start at layer %d (inside a residual block: docs/lua-api.md \"forward and backward\")", what, a)
    end
    local node = p.node
    if splitfed and i == 1 then
      if node then fail("%s: node: the client part runs on every client (option 'clients')", what) end
    elseif not node then
      fail("%s: node is missing", what)
    end
    -- A stage's step is one batch, which holds its peer's queue: two parts
    -- on one node would wait for each other.
    if node and holder[node] then
      fail("%s: node '%s' already runs part %d (a node runs one part)", what, node.name, holder[node])
    end
    if node then holder[node] = i end
    parts[i] = { node = node, first = a, last = b, ranges = split.param_ranges(layers, a, b) }
    next_layer = b + 1
  end
  if next_layer <= #layers then
    fail("split.train: option 'parts': layers %d to %d belong to no part", next_layer, #layers)
  end
  if splitfed and #parts ~= 2 then fail("split.train: mode = \"splitfed\" takes 2 parts (client, server), got %d", #parts) end
  if splitfed then
    for _, c in ipairs(o.clients) do
      if holder[c] then fail("split.train: client '%s' also runs the server part", c.name) end
    end
    if o.eval_node and o.eval_node ~= parts[2].node then
      fail("split.train: option 'eval_node': in splitfed the server part's node '%s' evaluates (it holds the averaged model)", parts[2].node.name)
    end
  end
  return parts
end

-- compute = "profile": the parts run the model's own kernels, each pass
-- padded to its node profile's time for its layers and micro-batch
-- (docs/lua-api.md "forward and backward"), so the model must be a real
-- one, with no surrogate, and every node that runs a part needs a profile
-- (job.lua checks the workers: the first part's node or the clients).
local function check_profiled(o, splitfed)
  if o.learn then
    fail("split.train: option 'learn': a split by profile runs the model's own layers (a surrogate's are others)")
  end
  local ok, err = hn.model_check(o.model)
  if not ok then
    fail("split.train: compute = \"profile\": model '%s' has no layer table to split (%s)", o.model, err)
  end
  for i, p in ipairs(o.parts) do
    if p.node and not p.node.profile and not (splitfed and i == 1) then
      fail("split.train: compute = \"profile\": part %d's node '%s' has no profile (net:node(name, { profile = ... }))",
           i, p.node.name)
    end
  end
end

-- ---- set-up ----

local function new_job(opts)
  if type(opts) ~= "table" then fail("split.train: expected a table of options, got %s", check.describe(opts)) end
  local splitfed = opts.mode == "splitfed"
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.workers ~= nil then fail("split.train: option 'workers': the parts name the nodes (clients = in splitfed)") end
  if splitfed then
    if not opts.clients then fail("split.train: mode = \"splitfed\" needs option 'clients'") end
    -- a client sends its whole batch at once: these would be ignored
    for _, k in ipairs{ "microbatches", "schedule" } do
      if opts[k] ~= nil then fail("split.train: option '%s' goes with a pipeline, not mode = \"splitfed\"", k) end
    end
    o.workers = opts.clients
  else
    if opts.clients then fail("split.train: option 'clients' goes with mode = \"splitfed\"") end
    check_parts("split.train: option 'parts'", opts.parts)
    o.workers = { opts.parts[1].node }
  end
  local J = job.new("split", o, { mode = splitfed and "splitfed" or (opts.schedule or "gpipe"), options = OPTIONS,
                                  profile_learns = true })
  if J.o.compute == "profile" then check_profiled(J.o, splitfed) end
  if J.o.compress then fail("split.train: option 'compress' is not supported (activations are sent dense)") end
  J.layers = hn.model_layers(J.o.model)
  J.parts = resolve_parts(J.o, J.layers, splitfed)
  J.M = splitfed and 1 or (J.o.microbatches or 4)
  if J.o.batch % J.M ~= 0 then
    fail("split.train: batch %d is not a whole number of %d micro-batches", J.o.batch, J.M)
  end
  J.mb = J.o.batch // J.M
  return J
end

local function setup(J)
  local holders, seen = {}, {}
  for _, w in ipairs(J.workers) do seen[w] = true end
  for _, p in ipairs(J.parts) do
    if p.node and not seen[p.node] then seen[p.node] = true; holders[#holders + 1] = p.node end
  end
  local last = J.parts[#J.parts].node
  J:setup{ origin = J.workers[1], eval_node = last, holders = holders, model_name = MODEL,
           columns = { "stage", "forward_ms", "backward_ms", "transfer_ms", "bubble_share",
                       "bubble_share_compute" } }
  -- What a training on these nodes that a fault cut short sent after its
  -- waits were aborted must not be taken for this one's (an activation of
  -- another cut, say): every node starts with no arrival of split's names.
  local names = { "dy", "cavg" }
  for m = 1, math.max(J.M, #J.workers) do
    for _, t in ipairs{ "x.", "lbl.", "dy." } do names[#names + 1] = t .. m end
  end
  local list = {}
  for _, n in ipairs(J.workers) do list[#list + 1] = { n, names } end
  for _, n in ipairs(holders) do list[#list + 1] = { n, names } end
  J:clear_arrivals(list)
  if J.mode == "splitfed" then return end
  -- The gradient each stage's backwards add into (stage_commands).
  for _, part in ipairs(J.parts) do part.node:tensor{ name = "g", size = J.model_size } end
end

-- Every part's slices of the model into the evaluation node's copy (the
-- only node that then holds the whole trained model); their arrivals are
-- no step's message, so they are cleared.
local function gather(J)
  local e, tasks = J.eval_node, {}
  for _, p in ipairs(J.parts) do
    if p.node and p.node ~= e then
      tasks[#tasks + 1] = hn.spawn(function()
        for _, r in ipairs(p.ranges) do p.node:send{ tensor = MODEL, to = e, as = MODEL, range = r } end
      end)
    end
  end
  hn.wait_all(tasks)
  e:wait{ tensor = MODEL, clear = true }
end

-- ---- one pipeline step: each stage's batch ----

local function add(list, name, params) list[#list + 1] = { name, params } end

-- The commands of stage k's step in the schedule's order.
local function stage_commands(J, k)
  local p, parts, M = #J.parts, J.parts, J.M
  local part = parts[k]
  local cmds = {}
  local layers = { part.first, part.last }
  -- Every backward adds into "g", whose part slices start the step at 0:
  -- a backward without add would make a new tensor of the whole model's
  -- size each step, and its first touch of the pages (several ms) would
  -- make each stage's first backward longer than the rest, on the drain's
  -- critical path (the rest of "g" stays 0: setup made it).
  for _, r in ipairs(part.ranges) do add(cmds, "scale", { x = "g", alpha = 0, range = r }) end
  local function forward(m)
    if k > 1 then
      local names = k == p and { "x." .. m, "lbl." .. m } or { "x." .. m }
      add(cmds, "wait", { tensors = names, k = #names, timeout = WAIT_TIMEOUT_S })
    end
    add(cmds, "forward", { model = MODEL, layers = layers, microbatch = m, out = "a." .. m,
                           input = k > 1 and ("x." .. m) or nil, batch = k == 1 and J.mb or nil,
                           labels = k == p and k > 1 and ("lbl." .. m) or nil,
                           labels_out = k == 1 and ("lbl." .. m) or nil })
    if k < p then add(cmds, "send", { tensor = "a." .. m, to = parts[k + 1].node, as = "x." .. m, nowait = true }) end
    if k == 1 then add(cmds, "send", { tensor = "lbl." .. m, to = parts[p].node, as = "lbl." .. m, nowait = true }) end
  end
  local function backward(m)
    if k < p then add(cmds, "wait", { tensor = "dy." .. m, timeout = WAIT_TIMEOUT_S }) end
    add(cmds, "backward", { model = MODEL, layers = layers, microbatch = m, out = "g", add = true,
                            grad_in = k < p and ("dy." .. m) or nil, grad_out = k > 1 and ("dx." .. m) or nil })
    if k > 1 then add(cmds, "send", { tensor = "dx." .. m, to = parts[k - 1].node, as = "dy." .. m, nowait = true }) end
  end
  if J.mode == "gpipe" then
    for m = 1, M do forward(m) end
    for m = M, 1, -1 do backward(m) end
  else -- 1f1b: p - k warm-up forwards, then one forward and one backward in turn
    local nf, nb = math.min(p - k, M), 0
    for m = 1, nf do forward(m) end
    while nb < M do
      if nf < M then nf = nf + 1; forward(nf) end
      nb = nb + 1
      backward(nb)
    end
  end
  -- The mean over micro-batches, on the part's own slices only (the rest
  -- of "g" is zero).
  for _, r in ipairs(M > 1 and part.ranges or {}) do add(cmds, "scale", { x = "g", alpha = 1 / M, range = r }) end
  add(cmds, "optim", job.optim_params(J.o.worker_opt, MODEL, "g"))
  return cmds
end

-- A stage's figures from its batch's results: job.batch_summary's
-- (compute_ms: forward, backward, optim; send_ms: its sends' own times,
-- in flight beside compute; wait_ms; bytes), split into forward and
-- backward, with the samples it read and the last part's mean loss.
local function stage_figures(results, cmds)
  local f = job.batch_summary(results, cmds)
  f.forward_ms, f.backward_ms, f.transfer_ms, f.busy_ms = 0, 0, f.send_ms, f.compute_ms
  local losses, n = 0, 0
  for i, r in ipairs(results) do
    local name, params = cmds[i][1], cmds[i][2]
    if name == "forward" then
      f.forward_ms = f.forward_ms + r.ms
      if r.loss then losses, n = losses + r.loss, n + 1 end
      if params.batch then f.samples = f.samples + r.batch end
    elseif name == "backward" then
      f.backward_ms = f.backward_ms + r.ms
    end
  end
  f.loss = n > 0 and losses / n or nil
  return f
end

-- A stage's bubble share against a span: the time it did not compute.
local function stage_bubble(busy_ms, span_ms)
  return span_ms and span_ms > 0 and math.max(0, 1 - busy_ms / span_ms) or nil
end

local function mean_bubble(busy, span_ms)
  if not stage_bubble(0, span_ms) then return nil end
  local sum = 0
  for _, b in ipairs(busy) do sum = sum + stage_bubble(b, span_ms) end
  return sum / #busy
end

-- The bubble shares of one step, each a mean over its stages: `bubble`
-- against the measured span; `compute` and `even` against the spans its
-- schedule takes when replayed with the measured compute alone, each
-- command's own time or its stage's mean for the command
-- (hiernet.algo.pipeline_replay: no transfer, no control); and `control`,
-- the controller's share of the measured span (the batches' dispatch and
-- results: the span less the longest batch).
local function bubble_shares(plans, batches, busy, span_ms)
  local results, longest = {}, 0
  for i, b in ipairs(batches) do results[i], longest = b.results, math.max(longest, b.ms) end
  local compute_ms = replay.span(plans, results)
  return { bubble = mean_bubble(busy, span_ms) or 0, compute = mean_bubble(busy, compute_ms),
           even = mean_bubble(busy, replay.span(plans, results, { even = true })),
           control = span_ms > 0 and math.max(0, span_ms - longest) / span_ms or 0, compute_ms = compute_ms }
end

local SHARES = { "bubble", "compute", "even", "control" }

-- Adds a step's shares to the job's sums; the first step is left out of
-- them when there are more (it also makes the stashes).
local function sum_step(J, shares)
  if J.steps <= 2 then J.bubble_sums = { n = {} } end
  local S = J.bubble_sums
  for _, key in ipairs(SHARES) do
    if shares[key] then S[key], S.n[key] = (S[key] or 0) + shares[key], (S.n[key] or 0) + 1 end
  end
end

-- Runs every stage's batch at once and records one row per stage: its
-- bubble share (the time it did not compute, against the span) and that of
-- its compute alone (bubble_shares).
local function run_stages(J, plans, stage_of)
  local t0 = hn.now()
  local nodes = {}
  for i, plan in ipairs(plans) do nodes[i] = plan.node end
  -- a stage that fails leaves the others waiting on it: they stop at once
  local results = job.all(plans, function(_, plan) return plan.node:batch(plan.cmds) end,
                          function() J:abort_among(nodes) end)
  local span_ms = (hn.now() - t0) * 1000
  J.steps = J.steps + 1
  local figures, busy = {}, {}
  for i, plan in ipairs(plans) do
    figures[i] = stage_figures(results[i].results, plan.cmds)
    busy[i] = figures[i].busy_ms
  end
  local shares = bubble_shares(plans, results, busy, span_ms)
  local t, loss = J:now(), nil
  for i, plan in ipairs(plans) do
    local f = figures[i]
    loss = f.loss or loss
    J:step_row{ node = plan.node, worker = 1, step = J.steps, time = t, loss = f.loss,
                compute_ms = f.busy_ms, comm_ms = f.transfer_ms, wait_ms = f.wait_ms,
                lr = J.o.worker_opt.lr or 0.05, k = #plans, bytes = f.bytes, samples = f.samples,
                stage = stage_of(i), forward_ms = f.forward_ms, backward_ms = f.backward_ms,
                transfer_ms = f.transfer_ms, bubble_share = stage_bubble(f.busy_ms, span_ms) or 0,
                bubble_share_compute = stage_bubble(f.busy_ms, shares.compute_ms) }
  end
  J.updates_applied = J.updates_applied + 1
  sum_step(J, shares)
  J.spans = J.spans or {}
  J.spans[#J.spans + 1] = span_ms / 1000
  return loss
end

local function pipeline_step(J)
  local plans = {}
  for k, part in ipairs(J.parts) do plans[k] = { node = part.node, cmds = stage_commands(J, k) } end
  for k, plan in ipairs(plans) do
    if #plan.cmds > BATCH_MAX_COMMANDS then
      fail("split.train: microbatches = %d makes stage %d's step %d commands (a batch holds at most %d)",
           J.M, k, #plan.cmds, BATCH_MAX_COMMANDS)
    end
  end
  run_stages(J, plans, function(i) return i end)
end

-- ---- one splitfed round ----

local function client_commands(J, i)
  local client, server = J.parts[1], J.parts[2].node
  local cmds = {}
  local layers = { client.first, client.last }
  add(cmds, "forward", { model = MODEL, layers = layers, batch = J.o.batch, out = "a", labels_out = "lbl" })
  add(cmds, "send", { tensor = "a", to = server, as = "x." .. i, nowait = true })
  add(cmds, "send", { tensor = "lbl", to = server, as = "lbl." .. i, nowait = true })
  add(cmds, "wait", { tensor = "dy", timeout = WAIT_TIMEOUT_S })
  add(cmds, "backward", { model = MODEL, layers = layers, grad_in = "dy", out = "g" })
  add(cmds, "optim", job.optim_params(J.o.worker_opt, MODEL, "g"))
  for _, r in ipairs(client.ranges) do
    add(cmds, "send", { tensor = MODEL, to = server, as = "cavg", range = r, add = true, nowait = true })
  end
  return cmds
end

-- The server part takes the clients in order, steps once with the mean of
-- their server-side gradients, then averages the client parts that arrive
-- into "cavg" and writes the average into its own copy of the model.
local function server_commands(J, n)
  local server, client = J.parts[2], J.parts[1]
  local layers = { server.first, server.last }
  local cmds = {}
  add(cmds, "tensor", { name = "cavg", size = J.model_size })
  for i = 1, n do
    add(cmds, "wait", { tensors = { "x." .. i, "lbl." .. i }, k = 2, timeout = WAIT_TIMEOUT_S })
    add(cmds, "forward", { model = MODEL, layers = layers, microbatch = i, input = "x." .. i,
                           labels = "lbl." .. i, out = "o" })
    add(cmds, "backward", { model = MODEL, layers = layers, microbatch = i, out = "g", add = i > 1,
                            grad_out = "dx." .. i })
    add(cmds, "send", { tensor = "dx." .. i, to = J.workers[i], as = "dy", nowait = true })
  end
  if n > 1 then add(cmds, "scale", { x = "g", alpha = 1 / n }) end
  add(cmds, "optim", job.optim_params(J.o.worker_opt, MODEL, "g"))
  add(cmds, "wait", { tensor = "cavg", k = n * #client.ranges, timeout = WAIT_TIMEOUT_S })
  for _, r in ipairs(client.ranges) do
    add(cmds, "scale", { x = MODEL, alpha = 0, range = r })
    add(cmds, "axpy", { y = MODEL, x = "cavg", alpha = 1 / n, range = r })
  end
  return cmds
end

local function splitfed_round(J)
  local n = #J.workers
  if n > BATCH_MAX_COMMANDS // 4 then fail("split.train: at most %d clients", BATCH_MAX_COMMANDS // 4) end
  local plans = {}
  for i, w in ipairs(J.workers) do plans[i] = { node = w, cmds = client_commands(J, i) } end
  plans[n + 1] = { node = J.parts[2].node, cmds = server_commands(J, n) }
  run_stages(J, plans, function(i) return i <= n and 1 or 2 end)
  -- The average back to every client (outside the round's span: the next
  -- round's forward needs it first).
  for _, r in ipairs(J.parts[1].ranges) do
    local res = J.parts[2].node:send{ tensor = MODEL, to = J.workers, as = MODEL, range = r }
    J:count_bytes(res.bytes)
  end
  job.each(J.workers, function(_, w) w:wait{ tensor = MODEL, clear = true } end)
end

-- ---- training ----

local function median(list)
  if not list or #list == 0 then return nil end
  local t = table.move(list, 1, #list, 1, {})
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

-- A share's mean over the steps summed (sum_step), or nil.
local function mean_share(S, key)
  return S and S[key] and S[key] / S.n[key] or nil
end

local function ideal_bubble(p, M)
  return (p - 1) / (M + p - 1)
end

-- Faults (the job's frame): a pipeline cannot go on without one of its
-- stages, nor splitfed without a client or its server part. The training
-- stops at the first node away (killed, or cut off from the stages it
-- sends to), with an error naming it, and every stage's transfers with the
-- others are aborted at once: the other stages' waits of the step in
-- flight would otherwise hold them until their timeout.
local function watch(J)
  local nodes, seen = {}, {}
  local function add(n) if n and not seen[n] then seen[n], nodes[#nodes + 1] = true, n end end
  for _, w in ipairs(J.workers) do add(w) end
  for _, p in ipairs(J.parts) do add(p.node) end
  J:watch_faults{
    sync = true,
    hub = function(i)
      local others = {}
      for _, n in ipairs(nodes) do if n ~= J.workers[i] then others[#others + 1] = n end end
      return others
    end,
    on_change = function(_, back) if not back then J:abort_among(nodes) end end,
  }
end

function split.train(opts)
  local J = new_job(opts)
  setup(J)
  local splitfed = J.mode == "splitfed"
  watch(J)
  J:start_clock()
  J:guard(function()
    J:rounds{
      members = function() return J.workers end,
      step = function() if splitfed then splitfed_round(J) else pipeline_step(J) end end,
      record = function()
        if J:eval_due(J.steps) then
          if not splitfed then gather(J) end
          J:evaluate(J.steps)
        end
      end,
    }
    if not splitfed then gather(J) end
  end)
  local p, S = #J.parts, J.bubble_sums
  local cuts = {}
  for k, part in ipairs(J.parts) do cuts[k] = string.format("%d-%d", part.first, part.last) end
  return J:finish{
    schedule = not splitfed and J.mode or nil, microbatches = J.M, stages = p, cuts = cuts,
    clients = splitfed and #J.workers or nil,
    bubble_share = mean_share(S, "bubble"), bubble_share_compute = mean_share(S, "compute"),
    bubble_share_even = mean_share(S, "even"), control_share = mean_share(S, "control"),
    bubble_share_ideal = not splitfed and ideal_bubble(p, J.M) or nil,
    step_s = median(J.spans), -- the median step (the first one also sets up the stashes)
  }
end

split.ideal_bubble = ideal_bubble

-- ---- cut search (Neurosurgeon's method) ----

-- The units a cut may separate: maximal runs of layers with no place to
-- cut inside (a residual block is one), as { {first, last}, ... }.
function split.segments(layers)
  local segs, start = {}, 1
  for i = 2, #layers do
    if layers[i].cut_before then segs[#segs + 1] = { start, i - 1 }; start = i end
  end
  segs[#segs + 1] = { start, #layers }
  return segs
end

local PLAN_TENSORS = { "plan.w", "plan.x", "plan.dy", "plan.y", "plan.dx", "plan.g" }

-- Seconds of forward + backward of each segment on node: the commands'
-- CPU time over the node's speed, which is the time the emulation gives
-- them (docs/lua-api.md "Peer commands"; their ms would add whatever the
-- loaded host stretched), the median of reps after one warm-up, on random
-- activations of `batch` samples.
local function measure(node, model, segs, layers, batch, reps)
  node:model{ name = "plan.w", arch = model, seed = 1 }
  local times = {}
  for s, seg in ipairs(segs) do
    local a, b = seg[1], seg[2]
    node:tensor{ name = "plan.x", size = batch * layers[a].in_size, fill = "uniform" }
    node:tensor{ name = "plan.dy", size = batch * layers[b].out_size, fill = "uniform", low = -0.01, high = 0.01 }
    local samples = {}
    for r = 1, reps + 1 do
      local f = node:forward{ model = "plan.w", layers = { a, b }, input = "plan.x", out = "plan.y", microbatch = 0 }
      local g = node:backward{ model = "plan.w", layers = { a, b }, grad_in = "plan.dy", out = "plan.g",
                               grad_out = a > 1 and "plan.dx" or nil, microbatch = 0 }
      if r > 1 then samples[#samples + 1] = (f.cpu_ms + g.cpu_ms) / 1000 / (node.speed or 1) end
    end
    table.sort(samples)
    times[s] = samples[(#samples + 1) // 2]
  end
  node:drop{ names = PLAN_TENSORS }
  return times
end

-- TCP's goodput over Ethernet frames of MTU 1500: 1448 payload bytes per
-- 1514 on the wire (as tools/bench/algorithms' model).
local GOODPUT = 1448 / 1514

-- Seconds to move `bytes` over a link of params l (bw 0: unlimited).
local function transfer_s(l, bytes)
  local t = l.delay or 0
  if l.bw and l.bw > 0 then t = t + bytes * 8 / (l.bw * GOODPUT) end
  return t
end

-- Every way to cut `nsegs` segments into `parts` non-empty runs, as the
-- last segment of each part but the last: calls f(ends).
local function each_cut(nsegs, parts, f, ends, from)
  ends, from = ends or {}, from or 1
  if #ends == parts - 1 then return f(ends) end
  local left = parts - 1 - #ends -- cuts still to place, each needs a segment after it
  for e = from, nsegs - left do
    ends[#ends + 1] = e
    each_cut(nsegs, parts, f, ends, e + 1)
    ends[#ends] = nil
  end
end

-- split.plan{ model=, nodes = {n1, ..., np}, links = {l1, ..., l(p-1)},
-- batch = 64, reps = 3 }: the predicted time of one step of split learning
-- (one micro-batch: each part's forward and backward in turn, the
-- activations and their gradients across each hop, the labels with them)
-- for every cut of the model into p non-empty parts, node k running part
-- k, and link k (a link object or its params: bw bit/s, delay s) joining
-- node k to node k+1. Per-segment compute times are measured on each node
-- (measure: its speed included), activation sizes come from the layer
-- table. Returns { best =, cuts = {ranked, fastest first}, compute_s =
-- {per node, per segment}, segments = }; a cut is { parts = {"1-2", ...},
-- predicted_s, compute_s, transfer_s, activation_bytes = {per hop} }.
function split.plan(o)
  if type(o) ~= "table" then fail("split.plan: expected a table of options, got %s", check.describe(o)) end
  for k in pairs(o) do
    if k ~= "model" and k ~= "nodes" and k ~= "links" and k ~= "batch" and k ~= "reps" then
      fail("split.plan: unknown option '%s'", tostring(k))
    end
  end
  local layers, err = hn.model_layers(o.model or "")
  if not layers then fail("split.plan: option 'model': %s", err) end
  check.nodes("split.plan: option 'nodes'", o.nodes)
  local p = #o.nodes
  if p < 2 then fail("split.plan: option 'nodes': at least 2 nodes") end
  if type(o.links) ~= "table" or #o.links ~= p - 1 then
    fail("split.plan: option 'links': expected %d links (node k to node k+1), got %s", p - 1, check.describe(o.links))
  end
  local links = {}
  for k, l in ipairs(o.links) do links[k] = type(l.params) == "function" and l:params() or l end
  local batch = o.batch and check.posint("split.plan: option 'batch'", o.batch) or 64
  local reps = o.reps and check.posint("split.plan: option 'reps'", o.reps) or 3
  local segs = split.segments(layers)
  if #segs < p then fail("split.plan: %s has %d places to cut, fewer than %d parts", o.model, #segs, p) end
  -- One node after the other: measured at once, the nodes' compute would
  -- share the host's cores and stretch each other's times.
  local times = {}
  for k, n in ipairs(o.nodes) do times[k] = measure(n, o.model, segs, layers, batch, reps) end
  local cuts = {}
  each_cut(#segs, p, function(ends)
    local c = { parts = {}, compute_s = 0, transfer_s = 0, activation_bytes = {} }
    local first = 1
    for k = 1, p do
      local last = ends[k] or #segs
      for s = first, last do c.compute_s = c.compute_s + times[k][s] end
      c.parts[k] = string.format("%d-%d", segs[first][1], segs[last][2])
      if k < p then
        local bytes = batch * layers[segs[last][2]].out_size * 4
        c.activation_bytes[k] = bytes
        -- activations and labels forward, their gradient back
        c.transfer_s = c.transfer_s + transfer_s(links[k], bytes + 4 * batch) + transfer_s(links[k], bytes)
      end
      first = last + 1
    end
    c.predicted_s = c.compute_s + c.transfer_s
    cuts[#cuts + 1] = c
  end)
  table.sort(cuts, function(x, y) return x.predicted_s < y.predicted_s end)
  return { best = cuts[1], cuts = cuts, compute_s = times, segments = segs }
end

return split
