-- hiernet.algo.hier: hierarchical averaging on terminal / edge / cloud trees
-- (HierFAVG, Liu et al. 2020).
--
--   local hier = require("hiernet.algo.hier")
--   local s = hier.train{ cloud = t.cloud[1], workers = t.terminal, tau1 = 5, tau2 = 2,
--                         steps = 200, worker_opt = { lr = 0.05 }, ... }
--
-- Terminals (the workers) train locally; every tau1 local steps each edge
-- replaces its terminals' models by their average weighted by samples,
--   w_e = sum_{i in e} (n_i / n_e) w_i;
-- every tau2 such edge rounds the cloud averages the edges the same way,
--   w = sum_e (n_e / n) w_e,
-- and sends the result back down. Every node of a round runs one batch
-- request: a terminal's local steps and its weighted model sent into a slot
-- of its own on its edge ("share.<i>"); an edge waits for its terminals,
-- sums the slots in its terminals' order, passes its weighted average up
-- (slot "up.<edge>") when it is the cloud's turn, and sends the model down.
-- Slots summed in a fixed order, not adds into one accumulator as they
-- arrive: float addition is not associative, so the order of arrival (the
-- nodes' speeds) changed the model in its last bits (up to 7e-7 against a
-- training that moved 0.4 to 0.8), and a training with the same seed did
-- not give the same model twice. Cost: an edge holds one model per
-- terminal (the compressed path's slots already did). Each terminal
-- belongs to the first of `edges` (default: the network's nodes of tier
-- "edge") on its route to the cloud (default: the network's one node of
-- tier "cloud"). When tau1 does not divide `steps`
-- the last round makes the steps left, so that exactly `steps` run.
--
-- With compression a terminal sends its compressed weighted change since
-- the last model it got from its edge (error feedback keeps what was
-- dropped for the next round), which the edge decompresses onto that model.
local hn = require("hiernet")
local job = require("hiernet.algo.job")

local hier = {}
local check, fail = job.check, job.fail

local OPTIONS = { cloud = check.node, edges = check.nodes, tau1 = check.posint, tau2 = check.posint }

-- Terminal indices per edge: each terminal goes to the first edge on its
-- route to the cloud.
function hier.assign(workers, edges, cloud)
  local net, is_edge, groups, order = cloud.network, {}, {}, {}
  for e, node in ipairs(edges) do is_edge[node.name] = e end
  for i, w in ipairs(workers) do
    local found
    for _, name in ipairs(net:route(w, cloud)) do
      if is_edge[name] then found = is_edge[name]; break end
    end
    if not found then fail("hier.train: terminal '%s' has no edge on its route to the cloud '%s'", w.name, cloud.name) end
    if not groups[found] then groups[found] = {}; order[#order + 1] = found end
    table.insert(groups[found], i)
  end
  local out = {}
  for _, e in ipairs(order) do out[#out + 1] = { edge = edges[e], terminals = groups[e] } end
  return out
end

local function tier_nodes(net, tier)
  local list = {}
  for _, n in ipairs(net:nodes()) do if n.tier == tier and n.kind == "host" then list[#list + 1] = n end end
  return list
end

-- The commands of a round (hiernet.algo.hier.commands), as hier.<name>.
for k, f in pairs(require("hiernet.algo.hier.commands")) do hier[k] = f end

-- ---- the training loop ----

-- The groups of this round: each edge with its terminals that take part
-- (not away: Job:watch_faults); edges without any sit the round out, and
-- `cloud` says whether the edge reaches the cloud for a cloud round.
local function active_groups(J, groups, cloud)
  local out = {}
  for _, group in ipairs(groups) do
    local terms = {}
    for _, i in ipairs(group.terminals) do if J:alive(i) then terms[#terms + 1] = i end end
    if #terms > 0 then
      out[#out + 1] = { edge = group.edge, terminals = terms,
                        cloud = cloud.network:reachable(group.edge, cloud) }
    end
  end
  return out
end

-- One round of `local_steps` local steps on every terminal of `groups`,
-- the edge averages, and the cloud's when cloud_round.
-- Every node's batch at once (job.all: when a fault cuts the round short,
-- all are waited for and the first failure is raised).
local function round(J, groups, shares, cloud, cloud_round, local_steps)
  local batches, edges, meta = {}, {}, {}
  for g, group in ipairs(groups) do
    local up = cloud_round and group.cloud
    if up then edges[#edges + 1] = group.edge end
    for _, i in ipairs(group.terminals) do
      local cmds = hier.terminal_commands(J, i, group.edge, shares.terminal[i], local_steps)
      meta[#meta + 1] = { i = i, cmds = cmds }
      batches[#batches + 1] = { J.workers[i], cmds, meta[#meta] }
    end
    batches[#batches + 1] = { group.edge, hier.edge_commands(J, group, up and shares.edge[g] or nil, cloud) }
  end
  if #edges > 0 then batches[#batches + 1] = { cloud, hier.cloud_commands(J, edges) } end
  local t0 = hn.now()
  job.all(batches, function(_, b)
    local reply, control_ms = job.timed_batch(b[1], b[2])
    if b[3] then b[3].res, b[3].control_ms = reply.results, control_ms end
  end)
  return meta, (hn.now() - t0) * 1000
end

local function record_round(J, meta, round_ms)
  for _, m in ipairs(meta) do
    local r = job.batch_summary(m.res, m.cmds)
    local compute = r.compute_ms + r.wait_ms
    -- the round's wall time on the controller holds the control channel's
    -- share (job.timed_batch): it is in control_ms, not in wait_ms
    J:step_row{ worker = m.i, step = J.steps, loss = r.loss, compute_ms = compute, comm_ms = r.send_ms,
                wait_ms = math.max(0, round_ms - compute - r.send_ms - m.control_ms), lr = J.o.worker_opt.lr,
                bytes = r.bytes, samples = r.samples, control_ms = m.control_ms }
  end
end

-- Sample shares: each terminal's share of its edge, each edge's of the
-- cloud (among the edges that reach it), over the groups taking part.
local function shares_of(J, groups)
  local s = { terminal = {}, edge = {} }
  local total = 0
  for g, group in ipairs(groups) do
    local n = 0
    for _, i in ipairs(group.terminals) do n = n + J.shard_samples[i] end
    for _, i in ipairs(group.terminals) do s.terminal[i] = J.shard_samples[i] / n end
    s.edge[g] = n
    if group.cloud ~= false then total = total + n end
  end
  for g in ipairs(groups) do s.edge[g] = s.edge[g] / total end
  return s
end

-- Faults: a terminal cut off from its edge (or killed, or whose edge died)
-- is away and the rounds go on with the others; one that is back gets its
-- edge's model first. An edge cut off from the cloud averages its
-- terminals and skips the cloud rounds until it is back. A fault in the
-- middle of a round aborts its waits and transfers (an abort names all the
-- round's nodes); J:rounds runs it again with who is left.
local function watch(J, groups, cloud, state)
  local edge_of = {}
  for _, g in ipairs(groups) do for _, i in ipairs(g.terminals) do edge_of[i] = g.edge end end
  local nodes = { cloud }
  for _, g in ipairs(groups) do nodes[#nodes + 1] = g.edge end
  for _, w in ipairs(J.workers) do nodes[#nodes + 1] = w end
  J:watch_faults{
    hub = function(i) return edge_of[i] end,
    essential = function(node) return node == cloud and "cloud" or nil end,
    on_change = function(i, back)
      if back then state.returning[i] = true else J:abort_among(nodes) end
    end,
  }
  J:on_partition(function() J:abort_among(nodes) end)
end

-- Terminals that are back start from their edge's model.
local function bring_back(J, state, groups)
  for i in pairs(state.returning) do
    for _, g in ipairs(groups) do
      for _, t in ipairs(g.terminals) do
        if t == i and J:alive(i) then pcall(g.edge.send, g.edge, { tensor = J.model_name, to = J.workers[i] }) end
      end
    end
  end
  state.returning = {}
end

-- A cut round leaves arrivals nobody waited for, in the slots and the
-- models: the next round's waits must not take them for their own.
local function clear_slots(J, groups, cloud)
  local edges, list = {}, {}
  for g, group in ipairs(groups) do
    edges[g] = group.edge
    local names = { J.model_name }
    for _, i in ipairs(group.terminals) do
      names[#names + 1] = hier.slot(i)
      names[#names + 1] = "sc." .. i
    end
    list[g] = { group.edge, names }
  end
  local names = hier.up_slots(edges)
  names[#names + 1] = J.model_name
  list[#list + 1] = { cloud, names }
  J:clear_arrivals(list)
end

-- The network's one host of tier "cloud": the default `cloud`, as the
-- default edges are its hosts of tier "edge".
local function default_cloud(J)
  local clouds = tier_nodes(J.workers[1].network, "cloud")
  if #clouds == 1 then return clouds[1] end
  if #clouds == 0 then fail("hier.train: no node of tier \"cloud\" in the network; give option 'cloud'") end
  local names = {}
  for k, n in ipairs(clouds) do names[k] = n.name end
  fail("hier.train: %d nodes of tier \"cloud\" (%s); give option 'cloud'", #clouds, table.concat(names, ", "))
end

-- The local steps of the next round: tau1, or what is left of `steps`, so
-- that exactly `steps` local steps run.
local function round_steps(J)
  local left = J.o.steps and (J.o.steps - J.steps) or math.huge
  return math.min(J.o.tau1, left)
end

-- The edge rounds (J:rounds): the groups that can take part, after a fault
-- the cut round's arrivals cleared and the terminals that are back given
-- their edge's model; every tau2-th round goes up to the cloud.
-- state.edge_rounds counts the rounds that went through.
local function edge_rounds(J, groups, cloud, state)
  return {
    state = state,
    members = function() return active_groups(J, groups, cloud) end,
    recover = function()
      clear_slots(J, groups, cloud)
      bring_back(J, state, groups)
    end,
    step = function(active)
      local cloud_round = (state.edge_rounds + 1) % J.o.tau2 == 0
      local local_steps = round_steps(J)
      local meta, ms = round(J, active, shares_of(J, active), cloud, cloud_round, local_steps)
      return meta, ms, cloud_round, local_steps
    end,
    record = function(active, meta, ms, cloud_round, local_steps)
      state.edge_rounds = state.edge_rounds + 1
      J.steps = J.steps + local_steps
      local taking_part = 0
      for _, g in ipairs(active) do taking_part = taking_part + #g.terminals end
      J.updates_applied = J.updates_applied + taking_part
      record_round(J, meta, ms)
      if cloud_round then
        J.cloud_rounds = (J.cloud_rounds or 0) + 1
        -- eval_every_s: the first cloud round at or after each period
        local due = J.o.eval_every_s and J:eval_due(J.steps) or
                    (not J.o.eval_every_s and J.cloud_rounds % J.eval_rounds == 0)
        if due then J:evaluate(J.steps) end
      end
    end,
  }
end

-- One cloud average of the models of the edges that reach the cloud,
-- without local steps.
local function final_cloud_average(J, groups, cloud)
  local up, list, batches = {}, {}, {}
  for _, g in ipairs(active_groups(J, groups, cloud)) do if g.cloud then up[#up + 1] = g end end
  local shares = shares_of(J, up)
  for g, group in ipairs(up) do
    list[g] = group.edge
    batches[g] = { group.edge, hier.up_commands(J, group.edge, shares.edge[g], cloud) }
  end
  batches[#batches + 1] = { cloud, hier.cloud_commands(J, list, true) }
  job.each(batches, function(_, b) b[1]:batch(b[2]) end)
end

function hier.train(opts)
  if type(opts) == "table" and (opts.overlap ~= nil or opts.bucket_mb ~= nil) then
    fail("hier.train: overlap is refused: terminals send their models after tau1 local steps, "
      .. "there is no step's gradient whose buckets could leave during its backward pass")
  end
  local J = job.new("hier", opts, { mode = "hierfavg", options = OPTIONS })
  -- Only the cloud's model is whole: eval_every counts cloud rounds here
  -- (default 1: every one), and the cloud is what is evaluated (with
  -- eval_every_s, at the cloud rounds).
  J.eval_rounds = opts.eval_every or 1
  job.eval_node_among_workers("hier.train", J.o, "the cloud's model")
  local cloud = J.o.cloud or default_cloud(J)
  local edges = J.o.edges or tier_nodes(cloud.network, "edge")
  if #edges == 0 then fail("hier.train: no edges (give option 'edges' or nodes of tier \"edge\")") end
  local groups = hier.assign(J.workers, edges, cloud)
  local used = {}
  for _, g in ipairs(groups) do used[#used + 1] = g.edge end
  J.o.tau1, J.o.tau2 = J.o.tau1 or 5, J.o.tau2 or 2
  J:setup{ origin = cloud, holders = { cloud, table.unpack(used) }, eval_node = cloud, model_name = "w" }
  local state = { returning = {}, edge_rounds = 0 }
  watch(J, groups, cloud, state)
  J:start_clock()
  J:guard(function() J:rounds(edge_rounds(J, groups, cloud, state)) end)
  -- The training ended between cloud rounds: one last cloud average of the
  -- edges' models (no local steps) so that the cloud holds the result.
  if state.edge_rounds % J.o.tau2 ~= 0 then final_cloud_average(J, groups, cloud) end
  return J:finish{ tau1 = J.o.tau1, tau2 = J.o.tau2, edges = #groups, edge_rounds = state.edge_rounds,
                   cloud_rounds = J.cloud_rounds or 0 }
end

return hier
