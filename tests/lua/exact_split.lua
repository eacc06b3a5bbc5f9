-- split.train computes what docs/algorithms.md says, exactly: a pipeline
-- of 3 parts on nodes of uneven speeds (1, 0.3, 2), with GPipe's and
-- 1F1B's schedules and 4 micro-batches, trains the same model as a
-- sequential replay on one reference peer (the same shard, initial model
-- and mini-batches: per step the 4 micro-batches' grad{} summed, scaled by
-- 1/4, one SGD step) to float tolerance, for an mlp and cnn:lenet; a
-- 2-part splitfed round with 2 clients equals its replay (each client's
-- step on its part, the server's mean step, the client parts averaged);
-- steps.csv and summary.json carry the stage split and the bubble share.
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")

local TOL = 2e-5
local DATA = { name = "synthetic", n = 512, dim = 784, classes = 10, noise = 0.5, test_n = 64 }
local SEED, LR, STEPS, M, BATCH = 7, 0.05, 3, 4, 16

local S = dofile(dir .. "lib/split_grad.lua")
local read_all = S.read_all

local function compare(got, want, what)
  S.compare(got, want, TOL, what)
end

local runs = 0
local function network(speeds, extra)
  runs = runs + 1
  local net = hn.network{ name = "exsplit" .. runs, backend = "none" }
  local nodes = {}
  for i, s in ipairs(speeds) do nodes[i] = net:node("n" .. i, { tier = "edge", speed = s }) end
  local ref = net:node("ref", { tier = "cloud" })
  for i = 1, #nodes do
    net:link(ref, nodes[i])
    for k = i + 1, #nodes do net:link(nodes[i], nodes[k]) end
  end
  net:start()
  return net, nodes, ref
end

-- The job's shard i of n of the training split on node (job.lua's dataset_params).
local function shard(node, i, n)
  node:dataset{ name = DATA.name, split = "train", shard = i, shards = n, n = DATA.n, dim = DATA.dim,
                classes = DATA.classes, noise = DATA.noise, seed = SEED }
end

local function pipeline(model, cuts, schedule)
  local net, nodes, ref = network({ 1, 0.3, 2 })
  local parts = {}
  for k, c in ipairs(cuts) do parts[k] = { node = nodes[k], layers = c } end
  local s = split.train{ parts = parts, model = model, dataset = DATA, seed = SEED, batch = BATCH,
                         microbatches = M, schedule = schedule, steps = STEPS,
                         worker_opt = { lr = LR }, eval_every = 2, eval_limit = 32,
                         prefix = "pipe" .. runs .. "_", progress = false }
  T.eq(s.steps, STEPS, "steps")
  T.eq(s.stages, 3, "stages")
  T.near(s.bubble_share_ideal, 2 / (M + 2), 1e-12, "ideal bubble")
  assert(s.bubble_share > 0 and s.bubble_share < 1, "bubble share " .. tostring(s.bubble_share))
  -- The replay with the compute alone never takes longer than the step
  -- (hiernet.algo.pipeline_replay: a lower bound whatever the load), so
  -- its bubble is no larger; the controller's share is a share.
  assert(s.bubble_share_compute >= 0 and s.bubble_share_compute <= s.bubble_share + 1e-9,
         string.format("compute-only bubble %s, measured %s", s.bubble_share_compute, s.bubble_share))
  assert(s.bubble_share_even >= 0 and s.bubble_share_even < 1, "even bubble " .. tostring(s.bubble_share_even))
  assert(s.control_share >= 0 and s.control_share < 1, "control share " .. tostring(s.control_share))
  -- The replay.
  shard(ref, 1, 1)
  local size = ref:model{ name = "w", arch = model, seed = SEED }.size
  for _ = 1, STEPS do
    for m = 1, M do ref:grad{ model = "w", batch = BATCH // M, out = "g" .. m } end
    local names = {}
    for m = 1, M do names[m] = "g" .. m end
    ref:sum{ out = "g", inputs = names }
    ref:scale{ x = "g", alpha = 1 / M }
    ref:optim{ model = "w", grad = "g", method = "sgd", lr = LR }
  end
  compare(read_all(nodes[3], "w", size), read_all(ref, "w", size), model .. " " .. schedule)
  net:stop()
  return s
end

pipeline("mlp:784-32-24-16-10", { "1-1", "2-3", "4-" }, "gpipe")
pipeline("mlp:784-32-24-16-10", { "1-2", "3-3", "4-4" }, "1f1b")
local s = pipeline("cnn:lenet", { "1-2", "3-5", "6-" }, "1f1b")

-- steps.csv: one row per stage and step with the split.
local out = os.getenv("HIERNET_TEST_OUT")
if out then
  local f = assert(io.open(out .. "/" .. s.prefix .. "steps.csv"))
  local header = f:read("l")
  for _, c in ipairs({ "stage", "forward_ms", "backward_ms", "transfer_ms", "bubble_share", "bubble_share_compute" }) do
    assert(header:find(c, 1, true), "steps.csv lacks " .. c)
  end
  local rows = 0
  for _ in f:lines() do rows = rows + 1 end
  f:close()
  T.eq(rows, 3 * STEPS, "steps.csv rows")
end

-- splitfed: 2 clients (speeds 1 and 0.5), server part on n3; n4 is the
-- second reference peer.
do
  local net, nodes, ref = network({ 1, 0.5, 1, 1 })
  local model = "mlp:784-32-16-10"
  -- A pipeline's options would be ignored here: refused.
  for _, k in ipairs{ "microbatches", "schedule" } do
    local bad = { mode = "splitfed", clients = { nodes[1], nodes[2] }, model = model, dataset = DATA,
                  parts = { { layers = "1-1" }, { node = nodes[3], layers = "2-" } }, batch = 8, steps = 1 }
    bad[k] = k == "schedule" and "1f1b" or 2
    T.fails("split.train: option '" .. k .. "' goes with a pipeline, not mode = \"splitfed\"", split.train, bad)
  end
  local r = split.train{ mode = "splitfed", clients = { nodes[1], nodes[2] },
                         parts = { { layers = "1-1" }, { node = nodes[3], layers = "2-" } },
                         model = model, dataset = DATA, seed = SEED, batch = 8, steps = 2,
                         worker_opt = { lr = LR }, eval_every = 1, eval_limit = 32, prefix = "sfed_",
                         progress = false }
  T.eq(r.clients, 2, "clients")
  assert(r.bubble_share_compute <= r.bubble_share + 1e-9, "splitfed: compute-only bubble above the measured")
  -- Replay: with plain SGD, the clients' steps averaged and the server's
  -- step with the mean gradient are both w - lr * mean(grad over the
  -- clients' batches), each client's batch from its own shard.
  local refs = { ref, nodes[4] }
  local size
  for i = 1, 2 do
    shard(refs[i], i, 2)
    size = refs[i]:model{ name = "w", arch = model, seed = SEED }.size
  end
  for _ = 1, 2 do
    for i = 1, 2 do refs[i]:grad{ model = "w", batch = 8, out = "g" } end
    refs[2]:send{ tensor = "g", to = refs[1], as = "g2" }
    refs[1]:axpy{ y = "w", x = "g", alpha = -LR / 2 }
    refs[1]:axpy{ y = "w", x = "g2", alpha = -LR / 2 }
    refs[1]:send{ tensor = "w", to = refs[2], as = "w" }
  end
  local client_n = 784 * 32 + 32
  compare(read_all(nodes[3], "w", size), read_all(refs[1], "w", size), "splitfed server copy")
  for i = 1, 2 do
    compare(read_all(nodes[i], "w", client_n), read_all(refs[1], "w", client_n), "splitfed client " .. i)
  end
  net:stop()
end
print("exact_split: ok")
