-- forward{} and backward{} by profile (docs/lua-api.md "forward and
-- backward"), checked exactly where the answer is known:
--   * a layer range of a model made with compute = "profile" reports the
--     profile's time for its layers and batch (device_ms), the figure
--     written out here from the test profile's round rates (1e10 FLOP/s
--     for every op kind), and the pass takes at least that long (the
--     worker pads it, asleep);
--   * split.train with compute = "profile" runs the same real passes: its
--     final parameters equal, bit for bit, those of the same training by
--     kernel (a GPipe pipeline, and splitfed), it evaluates (the model
--     itself learns), and each stage's forward_ms is at least its M
--     passes' profile time;
--   * the errors: a profiled model on a node without a profile, a
--     surrogate's or a zoo model's layer range, a part node without a
--     profile, learn = beside a split.
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local PROFILE = dir .. "data/round.profile"
local RATE = 1e10

local net = hn.network{ name = "splitprof", backend = "none" }
local nodes = {}
for i = 1, 3 do nodes[i] = net:node("p" .. i, { tier = "edge", profile = PROFILE }) end
local plain = net:node("plain", { tier = "cloud" })
for i = 1, 3 do
  net:link(plain, nodes[i])
  for k = i + 1, 3 do net:link(nodes[i], nodes[k]) end
end
net:start()

-- ---- the commands: device_ms is the profile's figure ----
-- mlp:16-1024-1024-4, layer 2 (1024 -> 1024 + bias and ReLU) over 256
-- samples: forward 2 FLOPs a multiply-accumulate plus 2 an output element
-- (bias, ReLU); backward the weight and input gradients (4 a MAC) plus 2.
local BATCH, ARCH = 256, "mlp:16-1024-1024-4"
local fwd_ms = 1e3 * (2 * 1024 * 1024 * BATCH / RATE + 2 * 1024 * BATCH / RATE)
local bwd_ms = 1e3 * (4 * 1024 * 1024 * BATCH / RATE + 2 * 1024 * BATCH / RATE)
local a, b = nodes[1], nodes[2]
a:dataset{ name = "synthetic", split = "train", n = 1024, dim = 16, classes = 4, seed = 3 }
for _, n in ipairs{ a, b } do n:model{ name = "m", arch = ARCH, compute = "profile", seed = 2 } end
local f1 = a:forward{ model = "m", layers = { 1, 1 }, batch = BATCH, out = "h" }
T.eq(f1.basis, "flops", "layer 1 forward's basis")
T.eq(f1.device_ms, 1e3 * (2 * 16 * 1024 * BATCH / RATE + 2 * 1024 * BATCH / RATE), "layer 1 forward's device_ms")
a:send{ tensor = "h", to = b, as = "x" }
local f2 = b:forward{ model = "m", layers = { 2, 2 }, input = "x", out = "h2" }
T.eq(f2.device_ms, fwd_ms, "layer 2 forward's device_ms")
local g2 = b:backward{ model = "m", layers = { 2, 2 }, grad_in = "h2", grad_out = "dx", out = "g" }
T.eq(g2.device_ms, bwd_ms, "layer 2 backward's device_ms")
-- the first layer computes no input gradient: 2 FLOPs a MAC backward
local g1 = a:backward{ model = "m", layers = { 1, 1 }, grad_in = "h", out = "g" }
T.eq(g1.device_ms, 1e3 * (2 * 16 * 1024 * BATCH / RATE + 2 * 1024 * BATCH / RATE), "layer 1 backward's device_ms")
-- The worker pads each pass to its time (an upper bound under load is
-- the host's business; the pass never ends early).
for what, r in pairs{ forward = f2, backward = g2 } do
  if r.ms < 0.98 * r.device_ms then
    error(string.format("layer 2 %s took %.2f ms, its profile time is %.2f", what, r.ms, r.device_ms))
  end
end
-- The same commands by kernel report no device time.
b:model{ name = "k", arch = ARCH, seed = 2 }
T.eq(b:forward{ model = "k", layers = { 2, 2 }, input = "x", out = "hk" }.device_ms, nil, "device_ms by kernel")

-- ---- the errors of the commands ----
plain:model{ name = "m", arch = ARCH, compute = "profile" }
plain:tensor{ name = "x", size = 1024 * 4, fill = 1 }
T.fails("node 'plain' has no profile", plain.forward, plain, { model = "m", layers = { 2, 2 }, input = "x" })
a:model{ name = "sur", arch = "mobilenet_v2", compute = "profile", learn = "mlp:16-32-4" }
T.fails("not a surrogate or a timing-only zoo model", a.forward, a, { model = "sur", layers = { 1, 1 }, batch = 4 })
a:model{ name = "zoo", arch = "mobilenet_v2", compute = "profile" }
T.fails("not a surrogate or a timing-only zoo model", a.forward, a, { model = "zoo", layers = { 1, 1 }, batch = 4 })

-- ---- split.train by profile against by kernel ----
local MODEL, M, STEPS, SPLIT_BATCH = "mlp:16-64-64-4", 2, 3, 32
local function train(compute, prefix)
  local s = split.train{ parts = { { node = nodes[1], layers = "1" }, { node = nodes[2], layers = "2" },
                                   { node = nodes[3], layers = "3-" } },
                         model = MODEL, compute = compute,
                         dataset = { name = "synthetic", n = 512, dim = 16, classes = 4, test_n = 64, seed = 4 },
                         seed = 9, batch = SPLIT_BATCH, microbatches = M, steps = STEPS, worker_opt = { lr = 0.1 },
                         eval_every = STEPS, eval_limit = 64, prefix = prefix, progress = false }
  return s, T.read_all(nodes[3], "w", hn.model_check(MODEL))
end
local s_kernel, w_kernel = train(nil, "kernel_")
local s_prof, w_prof = train("profile", "profile_")
T.eq(#w_prof, #w_kernel, "parameter count")
for i = 1, #w_kernel do T.eq(w_prof[i], w_kernel[i], "parameter " .. (i - 1) .. " by profile") end
T.eq(s_prof.learning, "real " .. MODEL .. ", timed by profile", "summary's learning")
T.eq(s_prof.final_accuracy, s_kernel.final_accuracy, "final accuracy by profile")
-- stage 2's forward: layer 2 (64 -> 64, bias and ReLU) over M micro-batches
local mb = SPLIT_BATCH // M
local stage2_ms = M * 1e3 * (2 * 64 * 64 * mb / RATE + 2 * 64 * mb / RATE)
for _, row in ipairs(T.csv("profile_steps")) do
  if row.stage == 2 and row.forward_ms < 0.98 * stage2_ms then
    error(string.format("step %d: stage 2's forward_ms %.3f, below its profile time %.3f", row.step, row.forward_ms, stage2_ms))
  end
end

-- splitfed by profile (clients nodes[1] and nodes[2], the server part on
-- nodes[3]) trains the same model as by kernel, bit for bit.
local function splitfed(compute, prefix)
  split.train{ mode = "splitfed", clients = { nodes[1], nodes[2] }, compute = compute,
               parts = { { layers = "1" }, { node = nodes[3], layers = "2-" } }, model = MODEL,
               dataset = { name = "synthetic", n = 256, dim = 16, classes = 4, test_n = 32, seed = 4 },
               seed = 9, batch = 8, steps = 2, worker_opt = { lr = 0.1 }, eval_every = 2, eval_limit = 32,
               prefix = prefix, progress = false }
  return T.read_all(nodes[3], "w", hn.model_check(MODEL))
end
local f_kernel, f_prof = splitfed(nil, "sfk_"), splitfed("profile", "sfp_")
for i = 1, #f_kernel do T.eq(f_prof[i], f_kernel[i], "splitfed parameter " .. (i - 1) .. " by profile") end

-- ---- the errors of split.train ----
local base = { model = MODEL, compute = "profile", dataset = { name = "synthetic", n = 64, dim = 16, classes = 4 },
               batch = 8, steps = 1, progress = false }
T.fails("part 3's node 'plain' has no profile", split.train,
        T.with(base, { parts = { { node = nodes[1], layers = "1" }, { node = nodes[2], layers = "2" },
                                 { node = plain, layers = "3-" } } }))
T.fails("option 'learn'", split.train,
        T.with(base, { learn = "mlp:16-8-4", parts = { { node = nodes[1], layers = "1" }, { node = nodes[2], layers = "2-" } } }))
T.fails("has no layer table", split.train,
        T.with(base, { model = "mobilenet_v2", parts = { { node = nodes[1], layers = "1" }, { node = nodes[2], layers = "2-" } } }))
net:stop()
