-- Compute/communication overlap (overlap = true, bucket_mb; docs/lua-api.md
-- "Overlap: gradient buckets") changes when bytes leave, never what the
-- model becomes:
--   * the bucket plan of hn.grad_buckets, checked against buckets worked out
--     by hand for an mlp (DDP's rule: from the last layer, closed at the
--     cap, a layer never cut), and for cnn:resnet20 (a contiguous cover of
--     the flat tensor, its running statistics in the first bucket);
--   * BSP ps and ring all-reduce with 2 workers end on the same model as
--     without overlap, bit for bit: with two addends a float sum is the same
--     in either order, so neither the bucket ranges nor the arrival order
--     may change a bit; by kernel and by profile;
--   * ring all-reduce with 3 workers, and halving-doubling, tree and
--     hierarchical with 4, end on the same model to float tolerance: the
--     schedules' chunks are cut per bucket, so an element's addends are
--     summed in another order (rounding only), and on the same model bit
--     for bit when run again (every sum in an order fixed by the schedule:
--     a peer's sends to one peer arrive in the batch's order, whichever
--     thread took their snapshots);
--   * the peer's timing by profile: grad_ms, the plan's buckets, a grad
--     ending no sooner than its first bucket and the last no sooner than
--     the whole step (lower bounds only: the worker pads, never cuts);
--   * the refusals, one line each: compression, an optimizer's update, the
--     BB rate, several servers, bucket_mb alone, hier.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local hier = require("hiernet.algo.hier")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")
local PROFILE = dir .. "data/round.profile"

-- ---- the plan ----
-- mlp:784-32-16-10: [0, 25120) the first layer (784x32 + 32), [25120, 25648)
-- the second, [25648, 25818) the last. A cap of 132 elements (0.0005 MiB)
-- closes a bucket at every layer; a cap of 600 holds the last two together.
local MLP = "mlp:784-32-16-10"
local size = hn.model_check(MLP)
T.eq(size, 25818, "mlp size")
local function check_plan(b, want, what)
  T.eq(#b, #want, what .. ": buckets")
  for k, w in ipairs(want) do
    T.eq(b[k].offset, w[1], what .. ": bucket " .. k .. " offset")
    T.eq(b[k].count, w[2], what .. ": bucket " .. k .. " count")
  end
  T.eq(b[#b].ready_share, 1, what .. ": the last bucket ends the step")
  for k = 2, #b do T.le(b[k - 1].ready_share, b[k].ready_share, what .. ": shares grow") end
end
check_plan(hn.grad_buckets(MLP, size, 0.0005), { { 25648, 170 }, { 25120, 528 }, { 0, 25120 } }, "cap 132")
check_plan(hn.grad_buckets(MLP, size, 600 * 4 / 1048576), { { 25120, 698 }, { 0, 25120 } }, "cap 600")
check_plan(hn.grad_buckets(MLP, size, 25), { { 0, size } }, "cap 25 MiB")
do
  -- the share of bucket 1: the forward pass and the last layer's backward
  -- over the whole step's FLOPs (the rules of kernels/zoo.h)
  local z = hn.zoo(MLP)
  local b = hn.grad_buckets(MLP, size, 0.0005)
  local fwd, total = z.forward_flops, z.grad_flops
  -- the last layer: 16x10 MACs, backward 2 x 2 x 160, and its bias (10)
  local last_bwd = 4 * 160 + 10
  T.near(b[1].ready_share, (fwd + last_bwd) / total, 1e-9, "bucket 1's share")
end
do
  local rs = hn.model_check("cnn:resnet20")
  local b = hn.grad_buckets("cnn:resnet20", rs, 0.1)
  T.eq(b[1].offset + b[1].count, rs, "resnet20: bucket 1 ends at the tensor's end (running statistics)")
  for k = 2, #b do T.eq(b[k].offset + b[k].count, b[k - 1].offset, "resnet20: bucket " .. k .. " is contiguous") end
  T.eq(b[#b].offset, 0, "resnet20: the last bucket starts at 0")
  T.le(3, #b, "resnet20: buckets at 0.1 MiB")
end
local none, err = hn.grad_buckets("resnet50", hn.zoo("resnet50").params, 1e-9)
T.eq(none, nil, "resnet50 at a cap of 1 element: too many buckets")
T.eq(err:find("raise bucket_mb", 1, true) ~= nil, true, "the message says what to do: " .. err)

-- ---- the peer's timing of the buckets, by profile ----
-- round.profile measured mobilenet_v2 at batch 16: 0.01 s. A grad with
-- buckets says so (grad_ms, exactly), makes the plan's buckets, ends no
-- sooner than its first bucket (the worker pads a job to its budget, never
-- less) and the last bucket{} no sooner than the whole step. Lower bounds
-- that load cannot break: the bucket{} queued with the grad starts on the
-- device where the grad ends, and pads to the ready time from there, so
-- the two ms add up to the step however late the worker thread wakes (it
-- padded from its wake-up once, and fell short on a loaded host). Several
-- times, as a late wake-up is what the check is about.
do
  local net = hn.network{ name = "ovtime", backend = "none" }
  local n = net:node("n", { profile = PROFILE })
  net:start()
  n:model{ name = "m", arch = "mobilenet_v2", compute = "profile" }
  local plan = hn.grad_buckets("mobilenet_v2", hn.zoo("mobilenet_v2").params, 1, PROFILE)
  for _ = 1, 5 do
    local r = n:batch{ { "grad", { model = "m", out = "g", batch = 16, bucket_mb = 1 } },
                       { "bucket", { index = #plan } } }.results
    T.eq(r[1].grad_ms, 10, "grad_ms: the profile's step")
    T.eq(r[1].buckets, #plan, "the grad's buckets: hn.grad_buckets' plan")
    T.le(0.99 * plan[1].ready_share * 10, r[1].ms, "the grad ends at its first bucket, not sooner")
    T.le(0.99 * 10, r[1].ms + r[2].ms, "the last bucket is ready after the whole step")
  end
  T.fails("bucket " .. (#plan + 1) .. ": the last grad had " .. #plan .. " buckets", n.bucket, n, { index = #plan + 1 })
  net:stop()
end

-- ---- same model with and without overlap ----
local STEPS = 4
local runs = 0
local function train(family, n, o)
  runs = runs + 1
  local net = hn.network{ name = "ov" .. runs, backend = "none" }
  local hub = net:node("hub", { tier = "cloud", profile = o.profile })
  local workers = {}
  for i = 1, n do
    workers[i] = net:node("w" .. i, { tier = "terminal", profile = o.profile })
    net:link(hub, workers[i])
  end
  net:start()
  local opts = { workers = workers, model = o.model or MLP, dataset = T.dataset, seed = 7, batch = 16,
                 steps = STEPS, worker_opt = { lr = 0.1 }, eval_every = 1000, eval_limit = 50,
                 compute = o.profile and "profile" or nil,
                 overlap = o.overlap, bucket_mb = o.bucket_mb, prefix = "r" .. runs .. "_", progress = false }
  local s
  if family == "ps" then
    opts.server, opts.mode = hub, "bsp"
    s = ps.train(opts)
  else
    opts.algo = o.algo or "ring"
    s = ar.train(opts)
  end
  T.eq(s.steps, STEPS, family .. ": steps")
  local holder = family == "ps" and hub or workers[1]
  local values = R.read_all(holder, "w")
  net:stop()
  return values
end

local DATA_MLP = "mlp:16-32-16-4" -- T.dataset has 16 features
local function compare(family, n, o, exact)
  local base = train(family, n, T.with(o, { model = DATA_MLP }))
  local over = train(family, n, T.with(o, { model = DATA_MLP, overlap = true, bucket_mb = 0.0002 }))
  local what = string.format("%s%s, %d workers%s", family, o.algo and " " .. o.algo or "", n,
                             o.profile and ", by profile" or "")
  if exact then
    R.same_bits(base, over, what .. ": overlap against none")
  else
    local worst = 0
    for e = 1, #base do worst = math.max(worst, math.abs(base[e] - over[e])) end
    T.le(worst, 2e-5, what .. ": |overlap - none|")
    -- rounding, but the same from run to run: every sum in a fixed order
    local again = train(family, n, T.with(o, { model = DATA_MLP, overlap = true, bucket_mb = 0.0002 }))
    R.same_bits(over, again, what .. ": overlap, run again")
  end
  hn.log(what .. ": same model with and without overlap")
end
do
  local b = hn.grad_buckets(DATA_MLP, hn.model_check(DATA_MLP), 0.0002)
  T.eq(#b, 3, DATA_MLP .. ": one bucket per layer at 0.0002 MiB")
end
compare("ps", 2, {}, true)
compare("allreduce", 2, {}, true)
compare("allreduce", 2, { profile = PROFILE }, true)
compare("ps", 2, { profile = PROFILE }, true)
compare("allreduce", 3, {}, false)
-- the other schedules, each bucket's over its range (slots where several
-- peers add into one: tree, hierarchical)
for _, algo in ipairs{ "halving-doubling", "tree", "hierarchical" } do
  compare("allreduce", 4, { algo = algo }, false)
end

-- ---- refusals ----
local net, server, workers = T.network("refuse", 2)
local base = { workers = workers, model = DATA_MLP, dataset = T.dataset, steps = 1, progress = false }
T.fails("overlap = true with compress: refused", ar.train,
        T.with(base, { overlap = true, compress = { method = "topk", ratio = 0.1 } }))
T.fails("overlap = true needs the update to be lr x gradient", ar.train,
        T.with(base, { overlap = true, worker_opt = { method = "momentum", lr = 0.1 } }))
T.fails("overlap = true needs the update to be lr x gradient", ar.train,
        T.with(base, { overlap = true, local_steps = 2 }))
T.fails("option 'bucket_mb' goes with overlap = true", ps.train,
        T.with(base, { server = server, bucket_mb = 1 }))
T.fails("overlap = true with the Barzilai-Borwein rate", ps.train,
        T.with(base, { server = server, mode = "adaptive-k", overlap = true }))
T.fails("overlap = true with 2 servers: refused", ps.train,
        T.with(base, { servers = { server, workers[2] }, workers = { workers[1] }, overlap = true }))
T.fails("hier.train: overlap is refused", hier.train, T.with(base, { cloud = server, overlap = true }))
T.fails("bucket 1: the last grad had 0 buckets", workers[1].bucket, workers[1], { index = 1 })
net:stop()
hn.log(string.format("%d trainings: overlap kept the model", runs))
