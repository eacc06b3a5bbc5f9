-- decentral.train computes what docs/algorithms.md says, exactly. After a
-- few steps every worker's model equals a sequential reference (same
-- shards, initial model and mini-batches, tests/lua/lib/reference.lua; the
-- mixing written out here, one command at a time on reference peers) to
-- float tolerance, on fresh peers, with equal speeds and with one worker 20
-- times slower, with an evaluation every step (which must not disturb the
-- training), and the same final models, bit for bit, whatever the speeds:
--   D-PSGD on a ring and on a graph given as a table (uneven degrees, so
--   the Metropolis weights differ from pair to pair);
--   CHOCO-SGD (D-PSGD with compression) with an explicit gamma, int8 and
--   top-k: public copies, compressed differences.
-- Gossip (asynchronous push-sum) has no fixed order to replay: its
-- conserved quantities are checked instead (with a vanishing lr the sum over
-- workers of x, weights included, stays N (w_init, 1); with any lr the
-- final model is the push-sum average sum_i x_i / sum_i a_i of the workers'
-- x, exactly, also with compression). EASGD is asynchronous too (a
-- worker's exchange with the centre happens whenever it gets there): its
-- elastic exchange conserves the sum of the workers' models and the
-- centre (with error feedback, and the residuals), which is checked.
local hn = require("hiernet")
local dc = require("hiernet.algo.decentral")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

local N, STEPS, LR = 4, 4, 0.1
local TOL = 2e-5
local SLOW = { 1, 0.05, 1, 1 } -- worker 2 at 1/20 of the speed

-- ---- the reference's formulas ----

-- Neighbour sets over indices 1..N: a ring, or a table {[i] = {j, ...}}
-- made symmetric.
local function ring(n)
  local adj = {}
  for i = 1, n do adj[i] = {} end
  for i = 1, n do
    local j = i % n + 1
    adj[i][j], adj[j][i] = true, true
  end
  return adj
end

local function from_table(n, t)
  local adj = {}
  for i = 1, n do adj[i] = {} end
  for i, list in pairs(t) do
    for _, j in ipairs(list) do adj[i][j], adj[j][i] = true, true end
  end
  return adj
end

local function neighbours(adj, i)
  local list = {}
  for j in pairs(adj[i]) do list[#list + 1] = j end
  table.sort(list)
  return list
end

-- Metropolis-Hastings (Lian et al. 2017; docs/algorithms.md):
-- W_ij = 1 / (1 + max(d_i, d_j)) for neighbours, W_ii = 1 - sum_j W_ij.
local function metropolis(adj)
  local W = {}
  for i = 1, #adj do
    W[i] = { [i] = 1 }
    for _, j in ipairs(neighbours(adj, i)) do
      W[i][j] = 1 / (1 + math.max(#neighbours(adj, i), #neighbours(adj, j)))
      W[i][i] = W[i][i] - W[i][j]
    end
  end
  return W
end

-- One D-PSGD step on the reference: x_i <- W_ii x_i + sum_j W_ij x_j - lr g_i(x_i),
-- every x_j the model of before the step.
local function dpsgd_step(ref, adj, W)
  local nodes = ref.nodes
  for i = 1, N do nodes[i]:grad{ model = "w", out = "g", batch = ref.batch } end
  for j = 1, N do
    for _, i in ipairs(neighbours(adj, j)) do nodes[j]:send{ tensor = "w", to = nodes[i], as = "x." .. j } end
  end
  for i = 1, N do
    nodes[i]:scale{ x = "w", alpha = W[i][i] }
    for _, j in ipairs(neighbours(adj, i)) do nodes[i]:axpy{ y = "w", x = "x." .. j, alpha = W[i][j] } end
    nodes[i]:axpy{ y = "w", x = "g", alpha = -LR }
  end
end

-- CHOCO-SGD (Koloskova, Stich and Jaggi 2019, Algorithm 2), worker i with
-- copies xh.j of j in N(i) and of itself, all the initial model at first:
--   x_i <- x_i - lr g_i;  q_i = C(x_i - xh_i);  xh_j <- xh_j + q_j (j in N(i), i)
--   x_i <- x_i + gamma sum_j W_ij (xh_j - xh_i)
local function choco_setup(ref, adj)
  for i = 1, N do
    ref.nodes[i]:copy{ src = "w", dst = "xh." .. i }
    for _, j in ipairs(neighbours(adj, i)) do ref.nodes[i]:copy{ src = "w", dst = "xh." .. j } end
  end
end

local function choco_step(ref, adj, W, gamma, c)
  local nodes = ref.nodes
  for i = 1, N do
    nodes[i]:grad{ model = "w", out = "g", batch = ref.batch }
    nodes[i]:axpy{ y = "w", x = "g", alpha = -LR }
    nodes[i]:copy{ src = "w", dst = "d" }
    nodes[i]:axpy{ y = "d", x = "xh." .. i, alpha = -1 }
    nodes[i]:compress{ tensor = "d", method = c.method, ratio = c.ratio, out = "q" }
  end
  for j = 1, N do
    nodes[j]:decompress{ tensor = "q", out = "xh." .. j, add = true }
    for _, i in ipairs(neighbours(adj, j)) do
      nodes[j]:send{ tensor = "q", to = nodes[i], as = "q." .. j }
      nodes[i]:decompress{ tensor = "q." .. j, out = "xh." .. j, add = true }
    end
  end
  for i = 1, N do
    local others = 0
    for _, j in ipairs(neighbours(adj, i)) do
      nodes[i]:axpy{ y = "w", x = "xh." .. j, alpha = gamma * W[i][j] }
      others = others + W[i][j]
    end
    nodes[i]:axpy{ y = "w", x = "xh." .. i, alpha = -gamma * others }
  end
end

-- ---- one case: a fresh network, a training, its reference ----

local runs = 0
local function network(speeds)
  runs = runs + 1
  return R.star("exdc" .. runs, N, speeds)
end

local function train(workers, o)
  return dc.train{ algo = o.algo, workers = workers, graph = o.graph, model = T.model, dataset = T.dataset,
                   seed = 7, batch = 64, steps = STEPS, worker_opt = { lr = o.lr or LR }, compress = o.compress,
                   gamma = o.gamma, alpha = o.alpha, period = o.period, eval_every = 1, eval_limit = 50, prefix = "d" .. runs .. "_",
                   progress = false }
end

-- Trains, replays on the reference, checks every worker's model against its
-- reference's; returns the workers' final models (values).
local function case(what, o)
  local net, workers, refs = network(o.speeds)
  local s = train(workers, o)
  T.eq(s.steps, STEPS, what .. ": steps")
  local ref = R.new(refs, { model = T.model, dataset = T.dataset, seed = 7, batch = 64 })
  local adj = o.adj
  local W = metropolis(adj)
  if o.compress then choco_setup(ref, adj) end
  for _ = 1, STEPS do
    if o.compress then choco_step(ref, adj, W, o.gamma, o.compress) else dpsgd_step(ref, adj, W) end
  end
  local worst, moved = 0, 0
  local finals = {}
  for i = 1, N do
    local diff, norm = R.distance(workers[i], "w", refs[i], "w")
    local from_init = R.distance(refs[i], "w", refs[1], "w.init")
    worst, moved = math.max(worst, diff), math.max(moved, from_init)
    hn.log(string.format("%s, worker %d: |w - w_ref| = %.3g, |w_ref| = %.3g, |w_ref - w_init| = %.3g",
                         what, i, diff, norm, from_init))
  end
  hn.log(string.format("%s: largest |w - w_ref| = %.3g against |w_ref - w_init| up to %.3g", what, worst, moved))
  for i = 1, N do
    R.check_equal(workers[i], "w", refs[i], "w", TOL, what .. ", worker " .. i)
    finals[i] = R.read_all(workers[i], "w")
  end
  net:stop()
  return finals
end


-- Both speeds, and the same final models whatever the speeds, bit for bit
-- (determinism: every worker mixes in its neighbours' sorted order).
local function both_speeds(what, o) R.both_speeds(case, what, o, SLOW, "worker 2 at 1/20") end

-- A graph as a table, by worker names: 1-2, 1-3, 1-4, 2-3 (degrees 3, 2, 2, 1).
local TABLE = { [1] = { 2, 3, 4 }, [2] = { 3 } }
local function by_names(t)
  local out = {}
  for i, list in pairs(t) do
    local names = {}
    for k, j in ipairs(list) do names[k] = "w" .. j end
    out["w" .. i] = names
  end
  return out
end

both_speeds("dpsgd, ring", { algo = "dpsgd", graph = "ring", adj = ring(N) })
both_speeds("dpsgd, table graph", { algo = "dpsgd", graph = by_names(TABLE), adj = from_table(N, TABLE) })
both_speeds("choco, int8, gamma 0.4, ring",
            { algo = "dpsgd", graph = "ring", adj = ring(N), compress = { method = "int8" }, gamma = 0.4 })
both_speeds("choco, top-k 25%, gamma 0.3, table graph",
            { algo = "dpsgd", graph = by_names(TABLE), adj = from_table(N, TABLE),
              compress = { method = "topk", ratio = 0.25 }, gamma = 0.3 })

-- ---- gossip: what push-sum conserves ----

-- Every worker's x (numerator, then the weight as the last element).
local function xs_of(workers)
  local xs = {}
  for i = 1, N do xs[i] = R.read_all(workers[i], "x") end
  return xs
end

-- Element-wise sum over the workers of a tensor's values (lists).
local function sum_of(lists)
  local sum = {}
  for e = 1, #lists[1] do
    local v = 0
    for _, list in ipairs(lists) do v = v + list[e] end
    sum[e] = v
  end
  return sum
end

local function initial_model(node)
  node:model{ name = "w.init", arch = T.model, seed = 7 }
  return R.read_all(node, "w.init")
end

-- With a learning rate of 1e-30 (lr must be positive) the steps move no
-- parameter by more than about 1e-30: only the mixing moves x, and it
-- conserves sum_i x_i = N (w_init, 1). With any lr, worker 1's final model
-- is sum_i x_i / sum_i a_i of the workers' x. With compression the weights
-- still move exactly, the numerators only up to the copies' error.
local TINY = 1e-30
local function gossip_case(what, o)
  local net, workers = network(o.speeds)
  local s = train(workers, { algo = "gossip", graph = o.graph, lr = o.lr, compress = o.compress })
  T.eq(s.steps, STEPS, what .. ": steps")
  local xs = xs_of(workers)
  local P = #xs[1] - 1
  local sum = sum_of(xs)
  local a = sum[P + 1]
  T.near(a, N, 1e-5, what .. ": the sum of the push-sum weights")
  local mixed = false
  for i = 1, N do mixed = mixed or xs[i][P + 1] ~= 1 end
  assert(mixed, what .. ": no weight moved (no push was made)")
  if o.lr == TINY and not o.compress then
    local init = initial_model(workers[1])
    for e = 1, P do
      T.near(sum[e], N * init[e], TOL, what .. ": sum of x, element " .. (e - 1))
    end
  end
  local final = R.read_all(workers[1], "w")
  local worst = 0
  for e = 1, P do
    local want = sum[e] / a
    worst = math.max(worst, math.abs(final[e] - want))
    T.near(final[e], want, TOL, what .. ": the final model is the push-sum average, element " .. (e - 1))
  end
  hn.log(string.format("%s: |final - sum x / sum a| <= %.3g elementwise", what, worst))
  net:stop()
end

-- One step each, between two workers: a push gives half of the sender's x
-- (weight included). A worker pushes only to a neighbour still stepping, so
-- steps.csv says who pushed (bytes > 0): one push leaves the pusher 0.5 and
-- the other 1.5; two leave (1.25, 0.75) or (0.75, 1.25) (one after the
-- other) or (1, 1) (both at once), exactly.
do
  runs = runs + 1
  local net, workers = R.star("exdc" .. runs, 2, { 1, 0.05 })
  dc.train{ algo = "gossip", graph = "ring", workers = workers, model = T.model, dataset = T.dataset,
            seed = 7, batch = 64, steps = 1, worker_opt = { lr = TINY }, eval_every = 1000, eval_limit = 50,
            prefix = "gossip_pair_", progress = false }
  local a = {}
  for i = 1, 2 do
    local x = R.read_all(workers[i], "x")
    a[i] = x[#x]
  end
  local pushed = {}
  for _, r in ipairs(T.csv("gossip_pair_steps")) do
    if (r.bytes or 0) > 0 then pushed[#pushed + 1] = tonumber(r.worker:match("%d+")) end
  end
  local ok
  if #pushed == 1 then
    ok = a[pushed[1]] == 0.5 and a[3 - pushed[1]] == 1.5
  else
    T.eq(#pushed, 2, "gossip, one step each: pushes")
    ok = (a[1] == 1.25 and a[2] == 0.75) or (a[1] == 0.75 and a[2] == 1.25) or (a[1] == 1 and a[2] == 1)
  end
  assert(ok, string.format("gossip, %d push(es): weights %.9g and %.9g, not halves", #pushed, a[1], a[2]))
  net:stop()
end
gossip_case("gossip, lr 1e-30, ring", { graph = "ring", lr = TINY })
gossip_case("gossip, lr 1e-30, complete, worker 2 at 1/20", { graph = "complete", lr = TINY, speeds = SLOW })
gossip_case("gossip, lr 0.1, complete, worker 2 at 1/20", { graph = "complete", lr = LR, speeds = SLOW })
gossip_case("gossip, int8, lr 0.1, ring, worker 2 at 1/20",
            { graph = "ring", lr = LR, speeds = SLOW, compress = { method = "int8" } })

-- ---- EASGD: what the elastic exchange conserves ----
--
-- Worker i: x_i <- x_i - d, centre: c <- c + d (compressed: c <- c + C(d +
-- e_i), residual e_i <- d + e_i - C(d + e_i)). Whatever the order in which
-- the workers reach the centre, sum_i x_i + c (+ sum_i e_i) moves only with
-- the local steps. With period = steps every worker makes its steps from
-- w_init alone (plain SGD on its shard, which the reference replays:
-- u_i = w_init - x_i before the exchange) and then one exchange, so
--   sum_i x_i + c (+ sum_i e_i) = (N + 1) w_init - sum_i u_i.
local function easgd_case(what, o)
  local net, workers, refs, hub = network(o.speeds)
  local s = train(workers, { algo = "easgd", alpha = 0.3, period = STEPS, compress = o.compress })
  T.eq(s.steps, STEPS, what .. ": steps")
  T.eq(s.updates_applied, N, what .. ": elastic exchanges")
  local lists = { R.read_all(hub, "c") }
  for i = 1, N do
    lists[#lists + 1] = R.read_all(workers[i], "w")
    if o.compress then lists[#lists + 1] = R.read_all(workers[i], "ef") end
  end
  local got = sum_of(lists)
  local ref = R.new(refs, { model = T.model, dataset = T.dataset, seed = 7, batch = 64 })
  local ids = {}
  for i = 1, N do
    ref:local_update(i, { lr = LR }, STEPS)
    ids[i] = i
  end
  ref:sum_updates(ids, 1)
  local init, updates = R.read_all(refs[1], "w.init"), R.read_all(refs[1], "sum")
  local worst = 0
  for e = 1, #init do
    local want = (N + 1) * init[e] - updates[e]
    worst = math.max(worst, math.abs(got[e] - want))
    T.near(got[e], want, TOL, what .. ": sum of the models and the centre, element " .. (e - 1))
  end
  local moved = R.distance(hub, "c", refs[1], "w.init")
  hn.log(string.format("%s: |sum - ((N + 1) w_init - sum u)| <= %.3g elementwise; the centre moved %.3g",
                       what, worst, moved))
  net:stop()
end

easgd_case("easgd, worker 2 at 1/20", { speeds = SLOW })
easgd_case("easgd, top-k 25% with error feedback, worker 2 at 1/20",
           { speeds = SLOW, compress = { method = "topk", ratio = 0.25 } })
-- EASGD's formula exactly (docs/algorithms.md): every step x <- x - lr g;
-- every `period` steps d = alpha (x - c), x <- x - d, c <- c + d. Two
-- workers, one exchange each at their last step: the centre takes them one
-- after the other (either order) or both from the initial centre, and must
-- equal the reference of one of these three (the
-- conservation check above holds for any alpha; this one does not).
do
  runs = runs + 1
  local net, workers, refs, hub = R.star("exdc" .. runs, 2, nil)
  local alpha, steps = 0.3, 3
  dc.train{ algo = "easgd", workers = workers, center = hub, alpha = alpha, period = steps,
            model = T.model, dataset = T.dataset, seed = 7, batch = 64, steps = steps,
            worker_opt = { lr = LR }, eval_every = 1000, eval_limit = 50, prefix = "easgd_exact_",
            progress = false }
  R.new(refs, { model = T.model, dataset = T.dataset, seed = 7, batch = 64 })
  for i = 1, 2 do
    for _ = 1, steps do
      refs[i]:grad{ model = "w", out = "g", batch = 64 }
      refs[i]:axpy{ y = "w", x = "g", alpha = -LR }
    end
  end
  local c0, x = R.read_all(refs[1], "w.init"), { R.read_all(refs[1], "w"), R.read_all(refs[2], "w") }
  local got_c, got_x = R.read_all(hub, "c"), { R.read_all(workers[1], "w"), R.read_all(workers[2], "w") }
  -- order: the workers in the order their pushes reached the centre, each
  -- having pulled the centre after the pushes before it; or "both": each
  -- pulled the initial centre before either push landed.
  local function worst(order)
    local diff = 0
    for e = 1, #c0 do
      local c, xs = c0[e], {}
      if order == "both" then
        local d1, d2 = alpha * (x[1][e] - c), alpha * (x[2][e] - c)
        xs[1], xs[2], c = x[1][e] - d1, x[2][e] - d2, c + d1 + d2
      else
        for _, i in ipairs(order) do
          local d = alpha * (x[i][e] - c)
          xs[i], c = x[i][e] - d, c + d
        end
      end
      diff = math.max(diff, math.abs(got_c[e] - c), math.abs(got_x[1][e] - xs[1]), math.abs(got_x[2][e] - xs[2]))
    end
    return diff
  end
  local best = math.min(worst{ 1, 2 }, worst{ 2, 1 }, worst("both"))
  T.le(best, TOL, "easgd: centre and workers against the reference of one exchange order")
  hn.log(string.format("easgd, two exchanges: |w - w_ref| = %.3g (the closest of the three orders)", best))
  net:stop()
end

hn.log(string.format("exact_decentral: %d trainings checked", runs))
print("exact_decentral: ok")
