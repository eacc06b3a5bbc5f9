-- allreduce.train computes what docs/algorithms.md says, exactly: after a
-- few steps every worker's model equals a sequential reference (same
-- shards, initial model and mini-batches; the mean update computed one
-- command at a time, tests/lua/lib/reference.lua) to float tolerance. For
-- every algorithm, with equal speeds and with one worker 20 times slower,
-- with local steps, with compression, with a segmented ring, on fresh peers each time (a
-- first step must not be refused for a tensor the receiver has not made
-- yet), and the same final model, bit for bit, whatever the speeds.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

local N, STEPS = 3, 4
local TOL = 2e-5

local runs = 0
-- A fresh network: N workers (speeds), N reference peers. Trains, checks
-- every worker against the reference, returns worker 1's model values.
local function case(what, o)
  runs = runs + 1
  local net, workers, refs = R.star("exact" .. runs, N, o.speeds, "cloud")
  local spec = { model = o.model or T.model, dataset = o.dataset or T.dataset, seed = 7, batch = o.batch or 16 }
  local s = ar.train{ workers = workers, algo = o.algo, model = spec.model, dataset = spec.dataset,
                      seed = spec.seed, batch = spec.batch, steps = STEPS, local_steps = o.local_steps,
                      worker_opt = o.worker_opt or { lr = 0.1 }, compress = o.compress,
                      eval_every = 1000, eval_limit = 50,
                      prefix = "r" .. runs .. "_", progress = false }
  T.eq(s.steps, STEPS, what .. ": steps")
  local ref = R.new(refs, spec)
  for _ = 1, STEPS do
    ref:sync_step{ worker_opt = o.worker_opt or { lr = 0.1 }, local_steps = o.local_steps, compress = o.compress }
  end
  local diff, moved = R.distance(workers[1], "w", refs[1], "w"), ref:moved()
  for i = 1, N do R.check_equal(workers[i], "w", refs[1], "w", TOL, what .. ", worker " .. i) end
  hn.log(string.format("%s: |w - reference| = %.3g for a training that moved %.3g", what, diff, moved))
  local values = R.read_all(workers[1], "w")
  net:stop()
  return values
end

local SLOW = { 1, 0.05, 1 } -- worker 2 at 1/20 of the speed


for _, algo in ipairs(ar.algos) do
  -- bit for bit: every peer adds what it receives in an order fixed by
  -- the schedule (slots per sender where several add into one peer)
  R.both_speeds(case, algo, { algo = algo }, SLOW, "worker 2 at 1/20")
end
-- Compressed updates are all-gathered and every worker adds all N
-- decompressed, in the order 1..N, as the reference does.
for _, algo in ipairs(ar.algos) do
  case(algo .. ", top-k 10% with error feedback, worker 2 at 1/20",
       { algo = algo, speeds = SLOW, compress = { method = "topk", ratio = 0.1 } })
end
case("ring, int8, 2 local steps", { algo = "ring", local_steps = 2, compress = { method = "int8" } })
-- Local steps: the update is w_before - w_after, in "w0".
case("ring, 3 local steps, worker 2 at 1/20", { algo = "ring", local_steps = 3, speeds = SLOW })
case("tree, momentum worker optimizer, 2 local steps",
     { algo = "tree", local_steps = 2, worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 } })
-- A ring whose chunks go in 2 segments (a model of 3 x 2 x 131072 floats).
do
  local big = "mlp:16-49152-4"
  local size = 16 * 49152 + 49152 + 49152 * 4 + 4
  T.le(2, ar.ring_segments(N, size), "segments of the big model")
  case("segmented ring, worker 2 at 1/20", { algo = "ring", model = big, speeds = SLOW, batch = 4 })
end
hn.log(string.format("%d trainings matched their reference", runs))

-- The primitive on tensors still being written: on fresh peers, each
-- peer's "g" is made by a batch queued on it before the all-reduce (the
-- tasks spawned first send first), 20 times slower on one peer. Every
-- peer must end with the sum of what the batches wrote.
do
  local n, size = 4, 30011
  for _, algo in ipairs(ar.algos) do
    runs = runs + 1
    local net = hn.network{ name = "exact" .. runs, backend = "none" }
    local hub = net:node("hub", { tier = "cloud" })
    local peers = {}
    for i = 1, n do
      peers[i] = net:node("p" .. i, { tier = "terminal", speed = i == 2 and 0.05 or nil })
      net:link(hub, peers[i])
    end
    net:start()
    for i, p in ipairs(peers) do
      hn.spawn(function()
        p:batch{ { "tensor", { name = "mine", size = size, fill = "uniform", low = -1, high = 1, seed = i } },
                 { "scale", { x = "mine", alpha = 1 } }, { "copy", { src = "mine", dst = "g" } } }
      end)
    end
    ar.allreduce{ peers = peers, tensor = "g", algo = algo, size = size }
    local want = {}
    for _, p in ipairs(peers) do
      for e, v in ipairs(R.read_all(p, "mine")) do want[e] = (want[e] or 0) + v end
    end
    for i, p in ipairs(peers) do
      local got = R.read_all(p, "g")
      for e = 1, size do
        if math.abs(got[e] - want[e]) > 1e-5 * math.max(1, math.abs(want[e])) then
          error(string.format("%s on tensors being written: peer %d element %d: %.7g, the sum is %.7g",
                              algo, i, e - 1, got[e], want[e]))
        end
      end
    end
    net:stop()
  end
end
