-- hiernet.algo.decentral.dpsgd: D-PSGD (Lian et al. 2017), and with
-- compression CHOCO-SGD (Koloskova, Stich and Jaggi 2019), for
-- hiernet.algo.decentral. Each step worker i sends its model to its
-- neighbours, computes its gradient g_i, and sets
--   x_i <- sum_j W_ij x_j - lr g_i
-- with Metropolis-Hastings weights W_ij = 1 / (1 + max(d_i, d_j)) for
-- neighbours, W_ii = 1 - sum. The workers step in lockstep: a neighbour
-- waits for the others' models every step.
local job = require("hiernet.algo.job")
local graphs = require("hiernet.algo.graphs")
local common = require("hiernet.algo.decentral.common")

local dpsgd = {}
local step_summary, record = common.step_summary, common.record

-- CHOCO's consensus step gamma by default (compressed dpsgd), per method.
-- The theory wants gamma of the order of the compression's quality, so the
-- sparse top-k gets a small one: on 5 workers in a ring (the synthetic
-- problem of tests/lua, 200 steps) top-1% reached 0.20 of the initial loss
-- with gamma 0.05 to 0.2 and diverged with 0.5; int8 and sign trained as
-- well as uncompressed D-PSGD with 0.5 (0.19-0.20) and kept the models
-- closer than with 0.1 or 0.2.
dpsgd.CHOCO_GAMMA = { topk = 0.1, int8 = 0.5, sign = 0.5 }

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
  J:on_every_worker(function(i)
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

-- The plan (hiernet.algo.decentral): lockstep steps, and its faults. The
-- neighbours wait for each other: a worker away fails the training, naming
-- it (D-PSGD cannot drop one), and every wait of the step must end: w's
-- neighbours wait on w, the others on neighbours whose step w has stopped
-- (any_wait, as in a ring).
function dpsgd.plan(J, extra, adj)
  local W = graphs.metropolis(adj)
  local step
  if J.o.compress then
    choco_setup(J, adj)
    extra.gamma = J.o.gamma or dpsgd.CHOCO_GAMMA[J.o.compress.method]
    step = choco_step(J, adj, W, extra.gamma)
  else
    step = dpsgd_step(J, adj, W)
  end
  return {
    step = step, lockstep = true,
    faults = J:group_faults(),
  }
end

return dpsgd
