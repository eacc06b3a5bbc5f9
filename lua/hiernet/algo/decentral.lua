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
--           and adds the other half into one random neighbour's. Sums are
--           conserved whatever arrives meanwhile.
--   easgd   elastic averaging (Zhang et al. 2015), asynchronous: every
--           `period` local steps worker i pulls the centre c from the centre
--           node, d = alpha (x_i - c), x_i <- x_i - d, and c <- c + d (the
--           centre adds d as it arrives).
-- Neighbours (`graph`): "ring" (a logical ring over `workers` in order),
-- "complete", "links" (workers directly linked in the topology), or a
-- table {[node name] = {nodes}} (made symmetric). Default: "links" when
-- the workers' own links connect them all, else "ring".
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")

local dc = {}
local check, fail = job.check, job.fail
local watch

dc.algos = { "dpsgd", "gossip", "easgd" }

-- ---- neighbour graphs ----

local function add_edge(adj, i, j)
  if i == j then return end
  adj[i][j], adj[j][i] = true, true
end

-- Adjacency sets over worker indices.
function dc.graph(workers, graph)
  local n, adj = #workers, {}
  for i = 1, n do adj[i] = {} end
  if graph == "ring" then
    for i = 1, n do add_edge(adj, i, i % n + 1) end
  elseif graph == "complete" then
    for i = 1, n do for j = i + 1, n do add_edge(adj, i, j) end end
  elseif graph == "links" then
    local net = workers[1].network
    for i = 1, n do
      for j = i + 1, n do
        if #net:route(workers[i], workers[j]) == 2 then add_edge(adj, i, j) end
      end
    end
  elseif type(graph) == "table" then
    local index = {}
    for i, w in ipairs(workers) do index[w.name] = i end
    for name, list in pairs(graph) do
      local i = index[type(name) == "string" and name or name.name]
      if not i then fail("decentral.train: graph: '%s' is not a worker", tostring(name)) end
      for _, other in ipairs(list) do
        local j = index[other.name or other]
        if not j then fail("decentral.train: graph: '%s' is not a worker", tostring(other.name or other)) end
        add_edge(adj, i, j)
      end
    end
  else
    fail("decentral.train: option 'graph': expected \"ring\", \"complete\", \"links\" or a table, got %s",
         tostring(graph))
  end
  return adj
end

function dc.connected(adj)
  local seen, stack, count = { [1] = true }, { 1 }, 1
  while #stack > 0 do
    local i = table.remove(stack)
    for j in pairs(adj[i]) do
      if not seen[j] then seen[j], count = true, count + 1; stack[#stack + 1] = j end
    end
  end
  return count == #adj
end

local function sorted_neighbours(adj, i)
  local list = {}
  for j in pairs(adj[i]) do list[#list + 1] = j end
  table.sort(list)
  return list
end

local function degree(adj, i)
  local d = 0
  for _ in pairs(adj[i]) do d = d + 1 end
  return d
end

-- Metropolis-Hastings mixing weights: W[i][j] for neighbours and W[i][i];
-- symmetric and doubly stochastic, so the models' average is kept.
function dc.metropolis(adj)
  local W = {}
  for i = 1, #adj do
    W[i] = {}
    local self_weight = 1
    for j in pairs(adj[i]) do
      W[i][j] = 1 / (1 + math.max(degree(adj, i), degree(adj, j)))
      self_weight = self_weight - W[i][j]
    end
    W[i][i] = self_weight
  end
  return W
end

-- ---- the shared loop ----

-- Runs step(i, t) for t = 1.. on every worker in its own task until the job
-- stops; all workers then finish the same number of steps (D-PSGD's
-- neighbours wait for each other's messages). J.steps is the fewest steps
-- any live worker has finished. A worker away (Job:watch_faults) waits to
-- be back; a killed one's task ends, and run:spawn(i) starts a new one when
-- it is restarted.
local function new_runner(J, step, lockstep)
  local n = #J.workers
  local R = { done = {}, started = {}, tasks = {}, running = {}, signals = {} }
  for i = 1, n do R.done[i], R.started[i], R.signals[i] = 0, 0, hn.queue() end
  -- With lockstep, the step every worker ends with: the highest step any
  -- worker has started when the stop is noticed (one already under way
  -- waits for its neighbours' messages of that step).
  local function update_steps()
    local m = math.huge
    for i = 1, n do if J:alive(i) then m = math.min(m, R.done[i]) end end
    J.steps = m == math.huge and J.steps or m
  end
  local function next_step(i)
    local t = R.done[i] + 1
    if J.o.steps and t > J.o.steps then return nil end
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

-- ---- D-PSGD ----

-- Neighbours' models land in "x.<sender>.<step parity>": a neighbour can be
-- one step ahead (it waits for our message of its previous step), never two.
local function dpsgd_step(J, adj, W)
  local m, o = J.model_name, J.o.worker_opt
  return function(i, t)
    local node, nbrs = J.workers[i], sorted_neighbours(adj, i)
    local parity = t % 2
    local to, incoming = {}, {}
    for _, j in ipairs(nbrs) do
      to[#to + 1] = J.workers[j]
      incoming[#incoming + 1] = "x." .. j .. "." .. parity
    end
    local cmds = {
      { "send", { tensor = m, to = to, as = "x." .. i .. "." .. parity } },
      { "grad", { model = m, out = "g", batch = J.o.batch } },
      { "wait", { tensors = incoming, k = #incoming } },
      { "scale", { x = m, alpha = W[i][i] } },
    }
    for n, j in ipairs(nbrs) do
      cmds[#cmds + 1] = { "axpy", { y = m, x = incoming[n], alpha = W[i][j] } }
    end
    cmds[#cmds + 1] = { "axpy", { y = m, x = "g", alpha = -(o.lr or 0.05) } }
    record(J, i, t, step_summary(node:batch(cmds).results, cmds))
    if i == 1 and J:eval_due(t) then J:evaluate(t) end
  end
end

-- ---- gossip (push-sum) ----

local function gossip_setup(J)
  local P, tasks = J.model_size, {}
  for i, w in ipairs(J.workers) do
    tasks[i] = hn.spawn(function()
      -- x = (model, weight 1): the model's elements, then the weight.
      w:batch{ { "tensor", { name = "x", size = P + 1, fill = 1 } },
               { "scale", { x = "x", alpha = 0, range = { 0, P } } },
               { "axpy", { y = "x", x = J.model_name, alpha = 1, range = { 0, P } } } }
    end)
  end
  hn.wait_all(tasks)
end

local function gossip_step(J, adj, rng)
  local m, P, o = J.model_name, J.model_size, J.o.worker_opt
  return function(i, t)
    local node, nbrs = J.workers[i], sorted_neighbours(adj, i)
    -- z = x / a from a private snapshot (adds may land in x at any time).
    local a = node:batch{ { "copy", { src = "x", dst = "xs" } },
                          { "read", { tensor = "xs", range = { P, 1 } } } }.results[2].values[1]
    -- a random neighbour among those it can reach now (a partition or a
    -- dead node leaves it fewer; with none it trains alone this step)
    local reach = {}
    for _, j in ipairs(nbrs) do
      if J:alive(j) and node.network:reachable(node, J.workers[j]) then reach[#reach + 1] = j end
    end
    local j = #reach > 0 and reach[rng(#reach)] or nil
    local cmds = {
      { "scale", { x = m, alpha = 0 } },
      { "axpy", { y = m, x = "xs", alpha = 1 / a, range = { 0, P } } },
      { "grad", { model = m, out = "g", batch = J.o.batch } },
      -- x <- x - lr a g: a step of lr on z = x / a, whatever the weight
      { "axpy", { y = "x", x = "g", alpha = -(o.lr or 0.05) * a, range = { 0, P } } },
    }
    if j then
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
    record(J, i, t, step_summary(r.results, cmds))
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
      if J:eval_due(J.updates_applied) then J:evaluate(J.updates_applied, center, "c") end
    end
    record(J, i, t, r)
  end
end

-- ---- dc.train ----

local OPTIONS = {
  algo = check.oneof(table.unpack(dc.algos)),
  graph = function(what, v)
    if type(v) == "table" or v == "ring" or v == "complete" or v == "links" then return v end
    fail("%s: expected \"ring\", \"complete\", \"links\" or a table, got %s", what, tostring(v))
  end,
  center = check.node, alpha = check.fraction, period = check.posint,
}

local function pick_graph(J)
  local g = J.o.graph
  if g == nil then
    local links = dc.graph(J.workers, "links")
    if #J.workers > 1 and dc.connected(links) then return links, "links" end
    return dc.graph(J.workers, "ring"), "ring"
  end
  local adj = dc.graph(J.workers, g)
  if not dc.connected(adj) then fail("decentral.train: the '%s' graph does not connect every worker", tostring(g)) end
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
  local node, P = J.workers[i], J.model_size
  for j, other in ipairs(J.workers) do
    if j ~= i and node.network:reachable(other, node) then
      other:send{ tensor = J.model_name, to = node } -- its z
      break
    end
  end
  node:batch{ { "tensor", { name = "x", size = P + 1, fill = REJOIN_WEIGHT } },
              { "scale", { x = "x", alpha = 0, range = { 0, P } } },
              { "axpy", { y = "x", x = J.model_name, alpha = REJOIN_WEIGHT, range = { 0, P } } } }
end

local function abort_between(a, list)
  hn.spawn(function() pcall(a.abort, a, { nodes = list }) end)
  for _, b in ipairs(list) do hn.spawn(function() pcall(b.abort, b, { nodes = { a } }) end) end
end

watch = function(J, R, algo, center)
  J:watch_faults{
    sync = algo == "dpsgd",
    hub = algo == "easgd" and function() return center end or nil,
    cut_off = algo == "dpsgd" and function(i)
      if not J:main_group()[i] then return "is cut off from the other workers" end
    end or nil,
    rejoin = function(i)
      if algo == "gossip" then gossip_rejoin(J, i) end
      if algo == "easgd" then center:send{ tensor = "c", to = J.workers[i], as = J.model_name } end
    end,
    on_change = function(i, back)
      local w = J.workers[i]
      if back then
        if R.running[i] then R.wake(i) elseif not J:stopped() then R.spawn(i) end
        return
      end
      if algo == "easgd" then abort_between(w, { center }) end
      if algo == "dpsgd" then
        -- The training stops (D-PSGD cannot drop a worker), and every wait of
        -- the step must end: w's neighbours wait on w, the others on
        -- neighbours whose step w has stopped (any_wait, as in a ring).
        for j = 1, #J.workers do
          local other = J.workers[j]
          if other ~= w then
            hn.spawn(function() pcall(other.abort, other, { nodes = { w }, any_wait = true }) end)
            hn.spawn(function() pcall(w.abort, w, { nodes = { other } }) end)
          end
        end
      end
    end,
  }
  if algo == "gossip" then
    -- a partition stops the transfers between its sides
    local net = J.workers[1].network
    net:on("partition", function()
      if J.closed then return end
      for i, a in ipairs(J.workers) do
        local cut = {}
        for j, b in ipairs(J.workers) do if j ~= i and not net:reachable(a, b) then cut[#cut + 1] = b end end
        if #cut > 0 then hn.spawn(function() pcall(a.abort, a, { nodes = cut }) end) end
      end
    end)
  end
end

function dc.train(opts)
  local algo = type(opts) == "table" and opts.algo
  if not algo then fail("decentral.train: option 'algo' is required (%s)", table.concat(dc.algos, ", ")) end
  local J = job.new("decentral", opts, { mode = algo, options = OPTIONS })
  if #J.workers < 2 then fail("decentral.train: give at least 2 workers") end
  if J.o.compress and algo ~= "easgd" then
    fail("decentral.train: compression is supported for easgd (the elastic difference); %s exchanges whole models", algo)
  end
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
  local center = J.o.center
  if algo == "easgd" and not center then fail("decentral.train: easgd needs option 'center' (the node holding the centre variable)") end
  J:setup{ origin = J.workers[1], holders = center and { center } or {}, model_name = "w",
           eval_node = algo == "easgd" and center or J.workers[1] }
  local extra = { algo = algo }
  local step, lockstep
  if algo == "dpsgd" then
    local adj, name = pick_graph(J)
    step, lockstep, extra.graph = dpsgd_step(J, adj, dc.metropolis(adj)), true, name
  elseif algo == "gossip" then
    local adj, name = pick_graph(J)
    gossip_setup(J)
    local seed = J.o.seed
    local function rng(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
    step, extra.graph = gossip_step(J, adj, rng), name
  else
    -- The centre starts as the common initial model (a model, so it can be evaluated).
    center:model{ name = "c", arch = J.o.model, seed = J.o.seed }
    center:copy{ src = "w", dst = "c" }
    local alpha, period = J.o.alpha or (0.9 / #J.workers), J.o.period or 4
    step, extra.alpha, extra.period = easgd_step(J, center, alpha, period), alpha, period
  end
  local R = new_runner(J, step, lockstep)
  watch(J, R, algo, center)
  J:start_clock()
  J:guard(function()
    R.run()
    J:stopped() -- the reason, when every worker stopped at `steps` by itself
    if J.fault_error then error(J.fault_error, 0) end
  end)
  if algo ~= "easgd" then J.updates_applied = J.steps * #J.workers end
  if algo == "gossip" then
    -- The final model of worker 1 is z_1 = x_1 / a_1.
    local node = J.workers[1]
    local a = node:batch{ { "copy", { src = "x", dst = "xs" } },
                          { "read", { tensor = "xs", range = { J.model_size, 1 } } } }.results[2].values[1]
    node:batch{ { "scale", { x = "w", alpha = 0 } },
                { "axpy", { y = "w", x = "xs", alpha = 1 / a, range = { 0, J.model_size } } } }
  end
  if algo == "easgd" then extra.final_node, extra.final_model = center, "c" end
  return J:finish(extra)
end

return dc
