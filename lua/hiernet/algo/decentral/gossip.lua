-- hiernet.algo.decentral.gossip: push-sum SGD (Kempe et al. 2003; Assran
-- et al. 2019) for hiernet.algo.decentral. Each worker keeps a numerator
-- x_i and a weight a_i (carried as x_i's last element, so both travel in
-- one send); a step is x_i <- x_i - lr a_i grad(z_i) at z_i = x_i / a_i (a
-- step of lr on z_i), then it keeps half of (x_i, a_i) and adds the other
-- half into one random neighbour's (one that still steps). With
-- compression it pushes compressed differences from per-pair copies.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local graphs = require("hiernet.algo.graphs")
local common = require("hiernet.algo.decentral.common")

local gossip = {}
local step_summary, record = common.step_summary, common.record

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
  J:on_every_worker(function(i)
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
  J:on_every_worker(function() return push_sum_x(J, 1) end)
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
      -- the neighbour's machine may be being lost: known once settled
      if j and J:alive(j) then J:settle_losses{ J.workers[j] } end
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
  job.each(others, function(_, w) w:send{ tensor = "x", to = home, as = "xsum", add = true } end)
  local a = home:batch{ { "wait", { tensor = "xsum", clear = true } },
                        { "read", { tensor = "xsum", range = { P, 1 } } } }.results[2].values[1]
  home:batch{ { "scale", { x = J.model_name, alpha = 0 } },
              { "axpy", { y = J.model_name, x = "xsum", alpha = 1 / a, range = { 0, P } } } }
end

-- Faults: gossip has no hub. A worker gossips with the neighbours it can
-- reach, and one that was killed comes back with a sliver of a neighbour's
-- model (push-sum weight 0.01: the mass it held is lost with it).
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

-- The plan (hiernet.algo.decentral): steps on their own, a restarted
-- worker's rejoin, the aborts across a partition, and the end (the pushes
-- not taken yet go home, then the push-sum average on worker 1).
function gossip.plan(J, extra, adj)
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
  return {
    step = gossip_step(J, adj, rng, G, running), running = running,
    faults = {
      -- a step pushes to one of them (its failure, their loss: job.lua)
      partners = function(i)
        local out = {}
        for _, j in ipairs(graphs.neighbours(adj, i)) do out[#out + 1] = J.workers[j] end
        return out
      end,
      rejoin = function(i)
        gossip_rejoin(J, i)
        if G then gossip_copies_rejoin(J, G, adj, i) end
      end,
    },
    -- a partition stops the transfers between its sides
    on_partition = function() J:abort_cut() end,
    finish = function()
      if G then take_inboxes(J, G) end
      if J:alive(1) then gossip_final(J) end
    end,
  }
end

return gossip
