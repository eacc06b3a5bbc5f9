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
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")
local graphs = require("hiernet.algo.graphs")

local dc = {}
local check, fail = job.check, job.fail
local watch

dc.algos = { "dpsgd", "gossip", "easgd" }

-- CHOCO's consensus step gamma by default (compressed dpsgd), per method.
-- The theory wants gamma of the order of the compression's quality, so the
-- sparse top-k gets a small one: on 5 workers in a ring (the synthetic
-- problem of tests/lua, 200 steps) top-1% reached 0.20 of the initial loss
-- with gamma 0.05 to 0.2 and diverged with 0.5; int8 and sign trained as
-- well as uncompressed D-PSGD with 0.5 (0.19-0.20) and kept the models
-- closer than with 0.1 or 0.2.
dc.CHOCO_GAMMA = { topk = 0.1, int8 = 0.5, sign = 0.5 }

-- ---- neighbour graphs (hiernet.algo.graphs) ----

dc.graph, dc.connected, dc.metropolis = graphs.graph, graphs.connected, graphs.metropolis

-- ---- the shared loop ----

-- Runs step(i, t) for t = 1.. on every worker in its own task until the job
-- stops; all workers then finish the same number of steps (D-PSGD's
-- neighbours wait for each other's messages). J.steps is the fewest steps
-- any live worker has finished. A worker away (Job:watch_faults) waits to
-- be back; a killed one's task ends, and run:spawn(i) starts a new one when
-- it is restarted.
-- running: the table R.running is (a step function may read it), or nil.
local function new_runner(J, step, lockstep, running)
  local n = #J.workers
  local R = { done = {}, started = {}, tasks = {}, running = running or {}, signals = {} }
  for i = 1, n do R.done[i], R.started[i], R.signals[i] = 0, 0, hn.queue() end
  -- With lockstep, the step every worker ends with: the highest step any
  -- worker has started when the stop is noticed (one already under way
  -- waits for its neighbours' messages of that step).
  local function update_steps()
    local m = math.huge
    for i = 1, n do if J:alive(i) then m = math.min(m, R.done[i]) end end
    local before = J.steps
    J.steps = m == math.huge and J.steps or m
    for v = before + 1, R.on_steps and J.steps or 0 do R.on_steps(v) end
  end
  local function next_step(i)
    local t = R.done[i] + 1
    if J.o.steps and t > J.o.steps then return nil end
    -- A fault ends a synchronous training at once: a step started now would
    -- wait for neighbours that the fault has stopped.
    if J.fault_error then return nil end
    if lockstep then
      if not R.last and J:stopped() then R.last = math.max(table.unpack(R.started)) end
      if R.last and t > R.last then return nil end
    elseif J:stopped() then
      return nil
    end
    return t
  end
  local function work(i)
    R.running[i] = true
    while true do
      if not J:alive(i) then
        if J.killed[i] or J.dead[i] or J:stopped() then break end
        R.signals[i]:pop() -- away: until a change
      else
        local t = next_step(i)
        if not t then break end
        R.started[i] = t
        local ok, err = pcall(step, i, t)
        if ok then
          R.done[i] = t
          update_steps()
        elseif J.fault_error then
          break -- the training ends with the fault's error
        elseif J:alive(i) then
          J:worker_failed(i, err)
          break
        end
      end
    end
    R.running[i] = false
  end
  function R.spawn(i)
    R.tasks[#R.tasks + 1] = hn.spawn(function() work(i) end)
  end
  function R.wake(i)
    R.signals[i]:push(true)
  end
  function R.run()
    for i = 1, n do R.spawn(i) end
    local k = 1
    while R.tasks[k] do -- restarts may add tasks while we wait
      R.tasks[k]:wait()
      k = k + 1
    end
    update_steps()
  end
  return R
end

-- The local update: x <- x - lr g (or the worker optimizer) as commands.
local function local_step_commands(J, model)
  local o = J.o.worker_opt
  return {
    { "grad", { model = model, out = "g", batch = J.o.batch } },
    { "optim", job.optim_params(o, model, "g") },
  }
end

local function step_summary(results, cmds)
  local r = job.batch_summary(results, cmds)
  r.comm_ms = r.send_ms
  return r
end

local function record(J, i, t, r)
  J:step_row{ worker = i, step = t, loss = r.loss, compute_ms = r.compute_ms, comm_ms = r.comm_ms,
              wait_ms = r.wait_ms or 0, lr = J.o.worker_opt.lr, bytes = r.bytes, samples = r.samples }
end

-- Runs on every worker at once the batch cmds_of(i) gives, and waits for all.
local function batch_on_every_worker(J, cmds_of)
  local tasks = {}
  for i, w in ipairs(J.workers) do
    local cmds = cmds_of(i)
    tasks[i] = hn.spawn(function() w:batch(cmds) end)
  end
  hn.wait_all(tasks)
end

-- Worker i's neighbours in a lockstep step t: their indices, their nodes,
-- the names their messages land in and the name i's own goes as,
-- "<prefix>.<sender>.<step parity>": a neighbour can be one step ahead (it
-- waits for our message of its previous step), never two.
local function step_exchange(J, adj, i, t, prefix)
  local nbrs, parity, to, incoming = graphs.neighbours(adj, i), t % 2, {}, {}
  for _, j in ipairs(nbrs) do
    to[#to + 1] = J.workers[j]
    incoming[#incoming + 1] = prefix .. "." .. j .. "." .. parity
  end
  return nbrs, to, incoming, prefix .. "." .. i .. "." .. parity
end

-- A lockstep algorithm's step(i, t): worker i runs the batch
-- cmds_of(i, nbrs, to, incoming, mine) builds from its step exchange
-- (step_exchange), the row is recorded, and worker 1 evaluates when due.
local function exchange_step(J, adj, prefix, cmds_of)
  return function(i, t)
    local cmds = cmds_of(i, step_exchange(J, adj, i, t, prefix))
    record(J, i, t, step_summary(J.workers[i]:batch(cmds).results, cmds))
    if i == 1 and J:eval_due(t) then J:evaluate(t) end
  end
end

-- ---- D-PSGD ----

local function dpsgd_step(J, adj, W)
  local m, o = J.model_name, J.o.worker_opt
  return exchange_step(J, adj, "x", function(i, nbrs, to, incoming, mine)
    local cmds = {
      { "send", { tensor = m, to = to, as = mine } },
      { "grad", { model = m, out = "g", batch = J.o.batch } },
      { "wait", { tensors = incoming, k = #incoming } },
      { "scale", { x = m, alpha = W[i][i] } },
    }
    for n, j in ipairs(nbrs) do
      cmds[#cmds + 1] = { "axpy", { y = m, x = incoming[n], alpha = W[i][j] } }
    end
    cmds[#cmds + 1] = { "axpy", { y = m, x = "g", alpha = -(o.lr or 0.05) } }
    return cmds
  end)
end

-- ---- D-PSGD with compression: CHOCO-SGD ----
--
-- CHOCO-SGD (Koloskova, Stich and Jaggi 2019, Algorithm 2): worker i keeps
-- public copies xh_j of its own and its neighbours' models, equal on every
-- worker that holds them (all start as the common initial model and all
-- add the same decompressed messages). A step:
--   x_i <- x_i - lr g_i                       (the local half-step)
--   q_i = Q(x_i - xh_i), sent to the neighbours
--   xh_j <- xh_j + q_j  for j in N(i) and i
--   x_i <- x_i + gamma sum_j W_ij (xh_j - xh_i)
-- Only q travels. What Q dropped stays in x_i - xh_i and goes with the next
-- message: the copy is the error feedback (a residual besides it would
-- count the dropped part twice). With gamma = 1 and no compression this is
-- x_i <- sum_j W_ij (x_j - lr g_j): D-PSGD with the step before the averaging.
local function choco_setup(J, adj)
  batch_on_every_worker(J, function(i)
    local cmds = { { "copy", { src = J.model_name, dst = "xh." .. i } } }
    for _, j in ipairs(graphs.neighbours(adj, i)) do
      cmds[#cmds + 1] = { "copy", { src = J.model_name, dst = "xh." .. j } }
    end
    return cmds
  end)
end

local function choco_step(J, adj, W, gamma)
  local m, lr, c = J.model_name, J.o.worker_opt.lr or 0.05, J.o.compress
  return exchange_step(J, adj, "q", function(i, nbrs, to, incoming, mine)
    local cmds = {
      { "grad", { model = m, out = "g", batch = J.o.batch } },
      { "axpy", { y = m, x = "g", alpha = -lr } },
      { "copy", { src = m, dst = "d" } },
      { "axpy", { y = "d", x = "xh." .. i, alpha = -1 } },
      { "compress", { tensor = "d", method = c.method, ratio = c.ratio, out = mine } },
      { "send", { tensor = mine, to = to } },
      { "decompress", { tensor = mine, out = "xh." .. i, add = true } },
      { "wait", { tensors = incoming, k = #incoming } },
    }
    local others = 0
    for n, j in ipairs(nbrs) do
      cmds[#cmds + 1] = { "decompress", { tensor = incoming[n], out = "xh." .. j, add = true } }
      cmds[#cmds + 1] = { "axpy", { y = m, x = "xh." .. j, alpha = gamma * W[i][j] } }
      others = others + W[i][j]
    end
    cmds[#cmds + 1] = { "axpy", { y = m, x = "xh." .. i, alpha = -gamma * others } }
    return cmds
  end)
end

-- ---- gossip with compression: push-sum from copies ----
--
-- Push-sum sends half of x_i, which is a whole model: compression needs a
-- difference to send. Each pair (i, j) of neighbours keeps a copy zh_ij of
-- i's model as j last reconstructed it ("difference from the last sent
-- copy"): i holds it as "zo.<j>", j as "zh.<i>", both start as the common
-- initial model. When i pushes to j, with z_i = x_i / a_i after its step
-- and w = a_i / 2:
--   q = Q(z_i - zh_ij),  zh_ij <- zh_ij + q       (on both ends)
--   i: x_i <- x_i - w z_i,    a_i <- a_i - w
--   j: x_j <- x_j + w zh_ij,  a_j <- a_j + w
-- What Q dropped stays in z_i - zh_ij and goes with i's next push to j (the
-- copy is the error feedback). The weights move exactly; the numerators
-- only up to the copy's error w (z_i - zh_ij) per push, which error feedback
-- keeps small. j needs w, so its pushes in are an inbox in the controller
-- that j's next step takes, in order, before it reads a_j: j's numerator
-- changes only in its own batches. Sends go first in a push: a send that
-- fails (the neighbour went away) leaves both copies as they were.

local function gossip_copies_setup(J, adj)
  batch_on_every_worker(J, function(i)
    local cmds = { { "tensor", { name = "unit", size = J.model_size + 1, fill = 1 } } }
    for _, j in ipairs(graphs.neighbours(adj, i)) do
      cmds[#cmds + 1] = { "copy", { src = J.model_name, dst = "zo." .. j } }
      cmds[#cmds + 1] = { "copy", { src = J.model_name, dst = "zh." .. j } }
    end
    return cmds
  end)
end

-- Pushes one batch takes from an inbox at most: 2 commands each, within a
-- batch's 256.
local INBOX_BATCH = 100

-- The commands that take (up to INBOX_BATCH of) worker i's inbox, in order:
-- each push into its numerator, and their weights; those taken leave it.
local function inbox_commands(J, G, i)
  local P, inbox = J.model_size, G.inbox[i]
  if #inbox == 0 then return {} end
  local take = math.min(#inbox, INBOX_BATCH)
  local names, weight, cmds = {}, 0, {}
  for n = 1, take do names[n] = inbox[n].name end
  cmds[1] = { "wait", { tensors = names, k = take } }
  for n = 1, take do
    local e, copy = inbox[n], "zh." .. inbox[n].from
    cmds[#cmds + 1] = { "decompress", { tensor = e.name, out = copy, add = true } }
    cmds[#cmds + 1] = { "axpy", { y = "x", x = copy, alpha = e.w, range = { 0, P } } }
    weight = weight + e.w
  end
  cmds[#cmds + 1] = { "axpy", { y = "x", x = "unit", alpha = weight, range = { P, 1 } } }
  cmds[#cmds + 1] = { "drop", { names = names } }
  G.inbox[i] = table.move(inbox, take + 1, #inbox, 1, {})
  return cmds
end

-- The commands of i's push to j after its step: z_i (the model m after the
-- step) against the pair's copy.
local function push_commands(J, G, i, j, a)
  local P, c, w = J.model_size, J.o.compress, a / 2
  G.sent[i] = G.sent[i] + 1
  local name = "gq." .. i .. "." .. G.sent[i]
  local copy = "zo." .. j
  return {
    { "copy", { src = J.model_name, dst = "d" } },
    { "axpy", { y = "d", x = copy, alpha = -1 } },
    { "compress", { tensor = "d", method = c.method, ratio = c.ratio, out = name } },
    { "send", { tensor = name, to = J.workers[j] } },
    { "decompress", { tensor = name, out = copy, add = true } },
    { "drop", { name = name } },
    { "axpy", { y = "x", x = J.model_name, alpha = -w, range = { 0, P } } },
    { "axpy", { y = "x", x = "unit", alpha = -w, range = { P, 1 } } },
  }, { from = i, name = name, w = w, epoch = G.epoch[i], to_epoch = G.epoch[j] }
end

-- A push goes to j's inbox unless i or j restarted since it was made.
local function deliver(J, G, j, e)
  if G.epoch[e.from] ~= e.epoch or G.epoch[j] ~= e.to_epoch then return end
  table.insert(G.inbox[j], e)
end

-- A restarted worker's copies are gone: the pairs it is in start again
-- from zero on both ends, and pushes to or from it not yet taken are lost
-- (as the push-sum mass it held is).
local function gossip_copies_rejoin(J, G, adj, i)
  G.epoch[i] = G.epoch[i] + 1
  G.inbox[i] = {}
  local P, mine = J.model_size, { { "tensor", { name = "unit", size = J.model_size + 1, fill = 1 } } }
  for _, j in ipairs(graphs.neighbours(adj, i)) do
    local kept = {}
    for _, e in ipairs(G.inbox[j]) do if e.from ~= i then kept[#kept + 1] = e end end
    G.inbox[j] = kept
    mine[#mine + 1] = { "tensor", { name = "zo." .. j, size = P } }
    mine[#mine + 1] = { "tensor", { name = "zh." .. j, size = P } }
    local other = J.workers[j]
    pcall(other.batch, other, { { "tensor", { name = "zo." .. i, size = P } },
                                { "tensor", { name = "zh." .. i, size = P } } })
  end
  J.workers[i]:batch(mine)
end

-- ---- gossip (push-sum) ----

-- The commands that make x = (weight * model, weight): push-sum's
-- numerator (the model's elements), then its weight.
local function push_sum_x(J, weight)
  local P = J.model_size
  return { { "tensor", { name = "x", size = P + 1, fill = weight } },
           { "scale", { x = "x", alpha = 0, range = { 0, P } } },
           { "axpy", { y = "x", x = J.model_name, alpha = weight, range = { 0, P } } } }
end

local function gossip_setup(J)
  batch_on_every_worker(J, function() return push_sum_x(J, 1) end)
end

-- A worker whose push-sum weight fell below this keeps it (a step without
-- a push is still push-sum: a column of the mixing matrix with 1 on the
-- diagonal). Weight collects in a worker that steps less often than the
-- others (what is pushed to it stays until it pushes): on a loaded host,
-- where a peer may wait for the CPU for many of the others' steps, the
-- others' weights fell below 1e-6 within 40 steps, and after about 127
-- halvings 1 / a no longer fits a float32 (a failed run: 2 s of gossip on 5
-- workers). A weight of 2^-20 carries nothing worth sending anyway.
local MIN_PUSH_WEIGHT = 2 ^ -20

-- running[j]: worker j's task still steps (a worker that has made its
-- steps never mixes again: what it is pushed stays with it).
local function gossip_step(J, adj, rng, G, running)
  local m, P, o = J.model_name, J.model_size, J.o.worker_opt
  return function(i, t)
    local node, nbrs = J.workers[i], graphs.neighbours(adj, i)
    -- z = x / a from a private snapshot (adds may land in x at any time);
    -- with compression the pushes in are taken first (G: the inbox).
    local first = G and inbox_commands(J, G, i) or {}
    first[#first + 1] = { "copy", { src = "x", dst = "xs" } }
    first[#first + 1] = { "read", { tensor = "xs", range = { P, 1 } } }
    local res = node:batch(first).results
    local a = res[#res].values[1]
    -- a random neighbour among those it can reach now (a partition or a
    -- dead node leaves it fewer; with none it trains alone this step)
    local reach = {}
    for _, j in ipairs(nbrs) do
      if J:alive(j) and running[j] and node.network:reachable(node, J.workers[j]) then reach[#reach + 1] = j end
    end
    local j = (#reach > 0 and a >= MIN_PUSH_WEIGHT) and reach[rng(#reach)] or nil
    local cmds = {
      { "scale", { x = m, alpha = 0 } },
      { "axpy", { y = m, x = "xs", alpha = 1 / a, range = { 0, P } } },
      { "grad", { model = m, out = "g", batch = J.o.batch } },
      -- x <- x - lr a g: a step of lr on z = x / a, whatever the weight
      { "axpy", { y = "x", x = "g", alpha = -(o.lr or 0.05) * a, range = { 0, P } } },
    }
    local entry
    if j and G then
      -- z after the step, in m, for the push from copies
      cmds[#cmds + 1] = { "axpy", { y = m, x = "g", alpha = -(o.lr or 0.05) } }
      local push
      push, entry = push_commands(J, G, i, j, a)
      for _, c in ipairs(push) do cmds[#cmds + 1] = c end
    elseif j then
      -- keep half, give half: send h = x / 2, then x <- x - h, so that what
      -- arrives meanwhile is neither lost nor doubled, and a send that fails
      -- (the neighbour died) takes nothing away
      cmds[#cmds + 1] = { "copy", { src = "x", dst = "half" } }
      cmds[#cmds + 1] = { "scale", { x = "half", alpha = 0.5 } }
      cmds[#cmds + 1] = { "send", { tensor = "half", to = J.workers[j], as = "x", add = true } }
      cmds[#cmds + 1] = { "axpy", { y = "x", x = "half", alpha = -1 } }
    end
    local ok, r = pcall(node.batch, node, cmds)
    if not ok then
      if not j or (J:alive(j) and node.network:reachable(node, J.workers[j])) then error(r, 0) end
      return -- the neighbour went away mid-send: its half stays here
    end
    if entry then deliver(J, G, j, entry) end
    local summary = step_summary(r.results, cmds)
    local taken = step_summary(res, first)
    summary.compute_ms, summary.wait_ms = summary.compute_ms + taken.compute_ms, taken.wait_ms
    record(J, i, t, summary)
    if i == 1 and J:eval_due(t) then J:evaluate(t) end
  end
end

-- ---- EASGD ----

local function easgd_step(J, center, alpha, period)
  local m = J.model_name
  local c = J.o.compress
  return function(i, t)
    local node = J.workers[i]
    local cmds = local_step_commands(J, m)
    local r = step_summary(node:batch(cmds).results, cmds)
    if t % period == 0 then
      -- Elastic exchange: pull the centre, move towards it, push the difference.
      local pull = center:send{ tensor = "c", to = node, as = "center" }
      local ex = {
        { "copy", { src = m, dst = "d" } },
        { "axpy", { y = "d", x = "center", alpha = -1 } },
        { "scale", { x = "d", alpha = alpha } },
        { "axpy", { y = m, x = "d", alpha = -1 } },
      }
      local sent = "d"
      if c then
        ex[#ex + 1] = job.compress_command(c, "d", "dc")
        sent = "dc"
      end
      ex[#ex + 1] = { "send", { tensor = sent, to = center, as = c and ("dc." .. i) or "c",
                                add = not c or nil } }
      local e = step_summary(node:batch(ex).results, ex)
      if c then center:decompress{ tensor = "dc." .. i, out = "c", add = true } end
      r.comm_ms, r.bytes = r.comm_ms + pull.ms + e.comm_ms, r.bytes + pull.bytes + e.bytes
      r.compute_ms = r.compute_ms + e.compute_ms
      J.updates_applied = J.updates_applied + 1
    end
    record(J, i, t, r)
  end
end

-- The final model of gossip, on worker 1: the push-sum average
-- sum_i x_i / sum_i a_i over the live workers, which every z_i tends to
-- (Kempe et al. 2003), gathered after the clock stopped. One worker's z_i
-- alone is no good summary under asynchrony: a worker that pushed many
-- times in a row holds almost no weight, and one push that lands after its
-- last step (a model many steps old) then makes up nearly all of its z.
local function gossip_final(J)
  local home, P, others = J.workers[1], J.model_size, {}
  for i = 2, #J.workers do if J:alive(i) then others[#others + 1] = J.workers[i] end end
  home:copy{ src = "x", dst = "xsum" }
  local tasks = {}
  for k, w in ipairs(others) do
    tasks[k] = hn.spawn(function() w:send{ tensor = "x", to = home, as = "xsum", add = true } end)
  end
  hn.wait_all(tasks)
  local a = home:batch{ { "wait", { tensor = "xsum", clear = true } },
                        { "read", { tensor = "xsum", range = { P, 1 } } } }.results[2].values[1]
  home:batch{ { "scale", { x = J.model_name, alpha = 0 } },
              { "axpy", { y = J.model_name, x = "xsum", alpha = 1 / a, range = { 0, P } } } }
end

-- ---- dc.train ----

local OPTIONS = {
  algo = check.oneof(table.unpack(dc.algos)),
  graph = function(what, v)
    if type(v) == "table" or v == "ring" or v == "complete" or v == "links" then return v end
    fail("%s: expected \"ring\", \"complete\", \"links\" or a table, got %s", what, tostring(v))
  end,
  center = check.node, alpha = check.fraction, period = check.posint, gamma = check.fraction,
}

-- EASGD's centre by default: the network's one host of tier "cloud" that
-- is not a worker (the node a hierarchy keeps its global model on).
local function default_center(J)
  local is_worker, found = {}, {}
  for _, w in ipairs(J.workers) do is_worker[w.name] = true end
  for _, n in ipairs(J.workers[1].network:nodes()) do
    if n.tier == "cloud" and n.kind == "host" and not is_worker[n.name] then found[#found + 1] = n end
  end
  if #found == 1 then return found[1] end
  local why = #found == 0 and "the network has no node of tier \"cloud\" besides the workers"
      or string.format("the network has %d nodes of tier \"cloud\"", #found)
  fail("decentral.train: easgd needs a centre: %s; give option 'center' (the node holding the centre variable)", why)
end

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

-- Faults (Job:watch_faults). D-PSGD's neighbours wait for each other: a
-- worker away fails the training, naming it. Gossip has no hub: a worker
-- gossips with the neighbours it can reach, and one that was killed comes
-- back with a sliver of a neighbour's model (push-sum weight 0.01: the mass
-- it held is lost with it). EASGD's workers must reach the centre; one cut
-- off waits, one restarted starts from the centre.
local REJOIN_WEIGHT = 0.01

local function gossip_rejoin(J, i)
  local node = J.workers[i]
  for j, other in ipairs(J.workers) do
    if j ~= i and node.network:reachable(other, node) then
      other:send{ tensor = J.model_name, to = node } -- its z
      break
    end
  end
  node:batch(push_sum_x(J, REJOIN_WEIGHT))
end

-- copies_rejoin(i): with compressed gossip, resets the pair copies of a
-- restarted worker.
watch = function(J, R, algo, center, copies_rejoin)
  J:watch_faults{
    sync = algo == "dpsgd",
    hub = algo == "easgd" and function() return center end or nil,
    cut_off = algo == "dpsgd" and function(i)
      if not J:main_group()[i] then return "is cut off from the other workers" end
    end or nil,
    rejoin = function(i)
      if algo == "gossip" then gossip_rejoin(J, i) end
      if copies_rejoin then copies_rejoin(i) end
      if algo == "easgd" then center:send{ tensor = "c", to = J.workers[i], as = J.model_name } end
    end,
    on_change = function(i, back)
      local w = J.workers[i]
      if back then
        if R.running[i] then R.wake(i) elseif not J:stopped() then R.spawn(i) end
        return
      end
      if algo == "easgd" then J:abort_between(w, { center }) end
      -- The training stops (D-PSGD cannot drop a worker), and every wait of
      -- the step must end: w's neighbours wait on w, the others on
      -- neighbours whose step w has stopped (any_wait, as in a ring).
      if algo == "dpsgd" then J:abort_between(w, J:others(i), true) end
    end,
  }
  -- a partition stops the transfers between its sides
  if algo == "gossip" then J:on_partition(function() J:abort_cut() end) end
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

-- Each algo's plan: P.step (a worker's step), P.lockstep, and what its
-- faults and its end need (P.adj, P.G: compressed gossip's inboxes,
-- P.running); extra: summary fields.
local function dpsgd_plan(J, extra, adj)
  local W = dc.metropolis(adj)
  local step
  if J.o.compress then
    choco_setup(J, adj)
    extra.gamma = J.o.gamma or dc.CHOCO_GAMMA[J.o.compress.method]
    step = choco_step(J, adj, W, extra.gamma)
  else
    step = dpsgd_step(J, adj, W)
  end
  return { step = step, lockstep = true, adj = adj }
end

local function gossip_plan(J, adj)
  local G
  gossip_setup(J)
  if J.o.compress then
    gossip_copies_setup(J, adj)
    G = { inbox = {}, sent = {}, epoch = {} }
    for i = 1, #J.workers do G.inbox[i], G.sent[i], G.epoch[i] = {}, 0, 0 end
  end
  local seed = J.o.seed
  local function rng(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
  local running = {}
  return { step = gossip_step(J, adj, rng, G, running), adj = adj, G = G, running = running }
end

local function easgd_plan(J, center, extra)
  -- The centre starts as the common initial model (a model, so it can be evaluated).
  center:model{ name = "c", arch = J.o.model, seed = J.o.seed }
  center:copy{ src = "w", dst = "c" }
  local alpha, period = J.o.alpha or (0.9 / #J.workers), J.o.period or 4
  extra.alpha, extra.period = alpha, period
  return { step = easgd_step(J, center, alpha, period) }
end

-- Compressed gossip's pushes not taken yet go home, so that every worker's
-- mass is in its x.
local function take_inboxes(J, G)
  local tasks = {}
  for i, w in ipairs(J.workers) do
    if J:alive(i) then
      tasks[#tasks + 1] = hn.spawn(function()
        while #G.inbox[i] > 0 do w:batch(inbox_commands(J, G, i)) end
      end)
    end
  end
  hn.wait_all(tasks)
end

function dc.train(opts)
  local algo = type(opts) == "table" and opts.algo
  if not algo then fail("decentral.train: option 'algo' is required (%s)", table.concat(dc.algos, ", ")) end
  local J = job.new("decentral", opts, { mode = algo, options = OPTIONS })
  if J.o.compute == "profile" then
    -- push-sum keeps its weight in an element past the model's, which a
    -- profiled model's virtual tensors do not hold (docs/lua-api.md)
    job.fail("decentral.train: compute = \"profile\" is not supported by decentral yet; use ps, allreduce or hier")
  end
  check_algo_options(J, algo, opts)
  local center = J.o.center
  if algo == "easgd" and not center then center = default_center(J) end
  local extra = { algo = algo }
  -- The graph before the set-up: a graph that is refused leaves no records.
  local adj
  if algo ~= "easgd" then adj, extra.graph = pick_graph(J) end
  J:setup{ origin = J.workers[1], holders = center and { center } or {}, model_name = "w",
           eval_node = algo == "easgd" and center or J.workers[1] }
  local P
  if algo == "dpsgd" then
    P = dpsgd_plan(J, extra, adj)
  elseif algo == "gossip" then
    P = gossip_plan(J, adj)
  else
    P = easgd_plan(J, center, extra)
  end
  local R = new_runner(J, P.step, P.lockstep, P.running)
  if algo == "easgd" then
    -- The centre is evaluated as of when every live worker has made `step`
    -- local steps: eval.csv's step counts steps, as steps.csv's does.
    R.on_steps = function(v) if J:eval_due(v) then J:evaluate(v, center, "c") end end
  end
  watch(J, R, algo, center, P.G and function(i) gossip_copies_rejoin(J, P.G, P.adj, i) end)
  J:start_clock()
  J:guard(function()
    R.run()
    J:stopped() -- the reason, when every worker stopped at `steps` by itself
    if J.fault_error then error(J.fault_error, 0) end
  end)
  if algo ~= "easgd" then J.updates_applied = J.steps * #J.workers end
  if P.G then take_inboxes(J, P.G) end
  if algo == "gossip" and J:alive(1) then gossip_final(J) end
  if algo == "easgd" then extra.final_node, extra.final_model = center, "c" end
  return J:finish(extra)
end

return dc
