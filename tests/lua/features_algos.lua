-- Algorithm options that a broken library would silently ignore, each
-- against a value computed here:
--   worker_opt momentum / nesterov / adam / weight_decay through
--     allreduce.train and ps.train (BSP): the final model equals the
--     sequential reference (tests/lua/lib/reference.lua) with that optimizer
--   dataset partition "dirichlet" through train: every worker's shard has
--     the label histogram of the shard the dataset command makes with the
--     same alpha and seed; the shards add up to the split's histogram
--   decentral graph as a table: every steps.csv row carries the model to
--     exactly that worker's neighbours in the table
--   decentral gamma: CHOCO with lossless top-k (ratio 1) on two workers:
--     gamma = 1 is synchronous SGD (the reference), model for model; one
--     step at gamma = 0.5 mixes the updates 3:1 as the formula says
--   ps adaptive-k bb / bb_opts: with the BB rate clamped to 0.5 lr (no
--     smoothing) every rate after a worker's first is lr or 0.5 lr; bb =
--     false keeps lr
--   fastest-k late = "merge": the late pushes join the next round (they
--     have a k), where late = "drop" leaves them without one
--   D-PSGD with on_failure = "drop" is refused, naming why
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local dc = require("hiernet.algo.decentral")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

local N, STEPS, TOL = 2, 3, 2e-5

local net = hn.network{ name = "falgo", backend = "none" }
local cloud = net:node("cloud", { tier = "cloud" })
local workers = {}
for i = 1, 4 do
  workers[i] = net:node("w" .. i, { tier = "terminal" })
  net:link(cloud, workers[i])
end
local refs = R.nodes(net, N, cloud)
net:start()
local pair = { workers[1], workers[2] }

local runs = 0
local function prefix()
  runs = runs + 1
  return "r" .. runs .. "_"
end

-- ---- optimizers through an algorithm ----

local OPTS = {
  { method = "momentum", lr = 0.05, momentum = 0.8 },
  { method = "nesterov", lr = 0.05, momentum = 0.9 },
  { method = "adam", lr = 0.01, beta1 = 0.8, beta2 = 0.99 },
  { method = "sgd", lr = 0.1, weight_decay = 0.05 },
  { method = "adam", lr = 0.01, weight_decay = 0.1 },
}
local spec = { model = T.model, dataset = T.dataset, seed = 7, batch = 16 }

-- holder: the node whose "w" is the final model (a ps worker may end on
-- its own last local step: the final model is the server's).
local function optimizer_case(train, holder, opt, what)
  train{ workers = pair, model = spec.model, dataset = spec.dataset, seed = spec.seed, batch = spec.batch,
         steps = STEPS, worker_opt = opt, eval_every = 1000, eval_limit = 50, prefix = prefix(),
         progress = false }
  local ref = R.new(refs, spec)
  for _ = 1, STEPS do ref:sync_step{ worker_opt = opt } end
  return R.check_equal(holder, "w", refs[1], "w", TOL, what)
end

for _, opt in ipairs(OPTS) do
  local what = opt.method .. (opt.weight_decay and " + weight decay" or "")
  optimizer_case(function(o) o.algo = "ring"; return ar.train(o) end, workers[1], opt, "allreduce ring, " .. what)
  optimizer_case(function(o) o.server, o.mode = cloud, "bsp"; return ps.train(o) end, cloud, opt, "ps bsp, " .. what)
end
-- The reference itself tells the methods apart (else the checks above
-- could not fail for an optimizer ignored).
local plain = R.new(refs, spec)
plain:sync_step{ worker_opt = { lr = 0.05 } }
plain:sync_step{ worker_opt = { lr = 0.05 } }
plain.nodes[1]:copy{ src = "w", dst = "w.sgd" }
local mom = R.new(refs, spec)
mom:sync_step{ worker_opt = OPTS[1] }
mom:sync_step{ worker_opt = OPTS[1] }
assert(R.max_diff(refs[1], "w", refs[1], "w.sgd") > 1e-4, "momentum and sgd references coincide")

-- ---- dirichlet partitioning through train ----

-- A logreg:16-4 whose only non-zero parameter is a bias of 100 for class c
-- (bias after the 16 x 4 weights) predicts c for every sample: its accuracy
-- on a split is the share of class c there.
local function histogram(node, split)
  local h, total = {}, 0
  node:tensor{ name = "ones", size = 68, fill = "uniform", low = 1, high = 1 }
  for c = 0, 3 do
    node:model{ name = "probe", arch = "logreg:16-4", init = "zeros" }
    node:axpy{ y = "probe", x = "ones", alpha = 100, range = { 64 + c, 1 } }
    local r = node:eval{ model = "probe", split = split }
    h[c] = math.floor(r.accuracy * r.samples + 0.5)
    total = total + h[c]
    T.eq(math.abs(h[c] - r.accuracy * r.samples) < 1e-6, true, node.name .. ": class " .. c .. " count")
  end
  return h, total
end

local DIR = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600,
              partition = "dirichlet", alpha = 0.3, seed = 11 }
local three = { workers[1], workers[2], workers[3] }
local s = ps.train{ server = cloud, workers = three, mode = "bsp", model = T.model, dataset = DIR, batch = 16,
                    steps = 1, eval_every = 100, eval_limit = 50, prefix = prefix(), progress = false }
local sums, skewed = { [0] = 0, 0, 0, 0 }, 0
for i, w in ipairs(three) do
  local got, size = histogram(w, "train")
  refs[1]:dataset{ name = DIR.name, split = "train", shard = i, shards = 3, partition = "dirichlet",
                   alpha = DIR.alpha, seed = DIR.seed, n = DIR.n, dim = DIR.dim, classes = DIR.classes,
                   noise = DIR.noise }
  local want, want_size = histogram(refs[1], "train")
  T.eq(size, want_size, "dirichlet: shard " .. i .. " size")
  for c = 0, 3 do
    T.eq(got[c], want[c], string.format("dirichlet: shard %d class %d", i, c))
    sums[c] = sums[c] + got[c]
    if got[c] >= 0.5 * size then skewed = skewed + 1 end
  end
end
refs[1]:dataset{ name = DIR.name, split = "train", n = DIR.n, dim = DIR.dim, classes = DIR.classes,
                 noise = DIR.noise, seed = DIR.seed }
local whole = histogram(refs[1], "train")
for c = 0, 3 do T.eq(sums[c], whole[c], "dirichlet: the shards' class " .. c .. " adds up to the split's") end
assert(skewed >= 1, "dirichlet alpha 0.3: no shard has a class of half its samples (shuffle-like)")
T.eq(s.steps, 1, "dirichlet training steps")

-- ---- decentral: graph as a table, gamma ----

local P = workers[1]:norm{ x = "w" }.size -- the model's parameters (T.model)
local path = { w1 = { "w2" }, [workers[2]] = { workers[3] }, w3 = { "w4" } } -- w1 - w2 - w3 - w4
local degree = { w1 = 1, w2 = 2, w3 = 2, w4 = 1 }
local p = prefix()
s = dc.train{ algo = "dpsgd", workers = workers, graph = path, model = T.model, dataset = T.dataset,
              batch = 16, steps = 3, worker_opt = { lr = 0.1 }, eval_every = 100, eval_limit = 50,
              prefix = p, progress = false }
T.eq(s.graph, "custom", "graph table: summary.graph")
for _, row in ipairs(T.csv(p .. "steps")) do
  T.eq(row.bytes, degree[row.worker] * P * 4, "graph table: bytes of " .. row.worker .. " step " .. row.step)
end

-- A table that leaves a worker out is refused, naming it.
local ok, err = pcall(dc.train, { algo = "dpsgd", workers = workers, graph = { w1 = { "w2" }, w3 = { "w4" } },
                                  model = T.model, dataset = T.dataset, steps = 1, prefix = prefix(), progress = false })
assert(not ok and tostring(err):find("the given graph does not connect every worker: w3 cannot reach w1", 1, true),
       "a graph table in two parts: " .. tostring(err))
-- A key or a neighbour that is no worker is named (a node by its name), and
-- the training stops before its set-up: no records under its prefix.
local function graph_error(graph)
  local p = prefix()
  local ok2, err2 = pcall(dc.train, { algo = "gossip", workers = workers, graph = graph, model = T.model,
                                      dataset = T.dataset, steps = 1, prefix = p, progress = false })
  assert(not ok2, "graph accepted: " .. tostring(err2))
  local left = io.open(hn.results_dir() .. "/" .. p .. "steps.csv")
  if left then left:close() end
  assert(not left, "a refused graph left " .. p .. "steps.csv")
  return tostring(err2)
end
err = graph_error{ { "w2" } }
assert(err:find("option 'graph': key 1 is not a worker", 1, true), err)
err = graph_error{ w1 = { "w2", "w9" } }
assert(err:find("option 'graph': 'w1''s neighbour 'w9' is not a worker", 1, true), err)
err = graph_error{ w1 = "w2" }
assert(err:find("option 'graph': 'w1': expected a list of workers, got 'w2'", 1, true), err)

local function dpsgd(o)
  return dc.train(T.with({ algo = "dpsgd", workers = pair, graph = "complete", model = T.model,
                           dataset = T.dataset, seed = 3, batch = 16, steps = 4, worker_opt = { lr = 0.1 },
                           eval_every = 100, eval_limit = 50, prefix = prefix(), progress = false }, o))
end
-- CHOCO with lossless compression keeps x̂_j = x_j - lr g_j exactly, so a
-- step is x_i <- x'_i + gamma sum_j W_ij (x'_j - x'_i). Two workers (W_12 =
-- 1/2) with gamma = 1 both end each step on (x'_1 + x'_2) / 2: synchronous
-- SGD, the reference's sync step at the same lr. One step at gamma = 0.5
-- gives x_1 = x0 - (0.75 u_1 + 0.25 u_2), x_2 = x0 - (0.25 u_1 + 0.75 u_2),
-- u_i = lr g_i.
local LOSSLESS = { method = "topk", ratio = 1 }
local choco = dpsgd{ compress = LOSSLESS, gamma = 1 }
T.eq(choco.gamma, 1, "summary.gamma")
local ref = R.new(refs, { model = T.model, dataset = T.dataset, seed = 3, batch = 16 })
for _ = 1, 4 do ref:sync_step{ lr = 0.1 } end
for i = 1, 2 do R.check_equal(pair[i], "w", refs[1], "w", TOL, "CHOCO gamma 1, lossless, worker " .. i) end
dpsgd{ compress = LOSSLESS, gamma = 0.5, steps = 1 }
ref = R.new(refs, { model = T.model, dataset = T.dataset, seed = 3, batch = 16 })
for i = 1, 2 do ref:local_update(i, { lr = 0.1 }) end
refs[2]:send{ tensor = "u", to = refs[1], as = "u.2" }
for i, own in ipairs{ 0.75, 0.25 } do
  refs[1]:copy{ src = "w", dst = "x" .. i }
  refs[1]:axpy{ y = "x" .. i, x = "u", alpha = -own }
  refs[1]:axpy{ y = "x" .. i, x = "u.2", alpha = -(1 - own) }
  R.check_equal(pair[i], "w", refs[1], "x" .. i, TOL, "CHOCO gamma 0.5, one step, worker " .. i)
end

-- D-PSGD cannot go on without a worker: drop is refused up front.
ok, err = pcall(dpsgd, { on_failure = "drop" })
assert(not ok and tostring(err):find("dpsgd cannot drop a worker", 1, true), "dpsgd on_failure drop: " .. tostring(err))

-- ---- ps: adaptive-k's BB rate, fastest-k's late merge ----

local function ps_rows(o)
  local base = T.with({ server = cloud, workers = three, model = T.model, dataset = T.dataset, batch = 16,
                        steps = 12, worker_opt = { method = "sgd", lr = 0.2 }, eval_every = 100,
                        eval_limit = 50, prefix = prefix(), progress = false }, o)
  local r = ps.train(base)
  return T.csv(base.prefix .. "steps"), r
end

local rows = ps_rows{ mode = "adaptive-k", bb_opts = { min_lr = 0.5, max_lr = 0.5, smoothing = 1 } }
local seen, halved = {}, 0
for _, row in ipairs(rows) do
  if not seen[row.worker] then
    T.near(row.lr, 0.2, 1e-12, "bb: first rate of " .. row.worker)
    seen[row.worker] = true
  else
    assert(math.abs(row.lr - 0.2) < 1e-12 or math.abs(row.lr - 0.1) < 1e-12,
           string.format("bb clamped to 0.5 lr: %s step %d has rate %s", row.worker, row.step, tostring(row.lr)))
    if math.abs(row.lr - 0.1) < 1e-12 then halved = halved + 1 end
  end
end
assert(halved > 0, "bb: no rate was ever clamped to 0.5 lr (bb_opts not used)")
for _, row in ipairs(ps_rows{ mode = "adaptive-k", bb = false }) do
  T.near(row.lr, 0.2, 1e-12, "bb = false: rate of " .. row.worker .. " step " .. row.step)
end

-- fastest-k with k = 1 of 3: the other two pushes of a round come late.
local function late_rows(late)
  local rows_of, r = ps_rows{ mode = "fastest-k", k = 1, late = late }
  local with_k, last = 0, {}
  for n, row in ipairs(rows_of) do
    last[row.worker] = n
    if row.k then with_k = with_k + 1 end
  end
  return rows_of, with_k, last, r
end
local drop_rows, drop_k, _, drop_s = late_rows("drop")
T.eq(drop_k, drop_s.steps, "late = drop: only the rounds' own pushes have k")
assert(#drop_rows > drop_k, "fastest-k 1 of 3: no push came late")
local merge_rows, merge_k, merge_last = late_rows("merge")
for n, row in ipairs(merge_rows) do
  -- a push still in flight when training ended joins no round
  if not row.k then T.eq(n, merge_last[row.worker], "late = merge: a row without k that is not " .. row.worker .. "'s last") end
end
assert(merge_k > 12, "late = merge: no late push joined a round")

net:stop()
