-- compression: gradient compression on a slow uplink. From the survey
-- ../shared/papers/survey-distributed-training-refs.txt ("Distributed System
-- for Deep learning Training: A Survey": its compression techniques, lower
-- arithmetic precision and sparsification, and the works it cites such as
-- 1-bit SGD and sparse communication); no figure of it is reproduced.
--
-- Four terminals under one edge (100 Mbit/s, 2 ms) whose uplink to the
-- cloud server is slow (20 Mbit/s, 10 ms). BSP training of mlp:784-128-10 on
-- Fashion-MNIST for the same emulated time with the updates sent as they
-- are (none), top-1% sparsified (topk), 8-bit quantized (int8) and as signs
-- (sign), each with error feedback.
--
--   tools/run scenarios/compression.lua [--set name=value ...]
--     seconds=40     emulated seconds per training (quick: 6)
--     target=0.65    the accuracy whose time is measured (quick: 0.5)
--     quick=false    the reduced run of the test suite (none and int8, 6 s each)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected: the uplink carries four pushes and four pulls of the model a
-- step, so an uncompressed step takes about 8 x 407 KB / 20 Mbit/s = 1.3 s.
-- Compression shrinks the pushes (int8 4x, sign ~32x, topk 1% ~50x) but the
-- model pulled stays dense, so a step gets at most twice as fast; the
-- compressed runs make up to twice the steps in the same time and reach the
-- target sooner, and error feedback keeps their accuracy near the dense one.
-- summary.json: per method bytes per step, steps, time to the target
-- accuracy (null when not reached), final accuracy.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 6 or 40)
local target = hn.param("target", quick and 0.5 or 0.65)
local methods = quick and { "none", "int8" } or { "none", "topk", "int8", "sign" }

local net = hn.network{ name = "compression", backend = ex.backend(), seed = 1 }
local cloud = net:node("cloud", { tier = "cloud" })
local edge = net:node("edge", { tier = "edge" })
net:link(cloud, edge, { bw = "20Mbit", delay = "10ms" })
local workers = {}
for i = 1, 4 do
  workers[i] = net:node("t" .. i, { tier = "terminal" })
  net:link(edge, workers[i], { bw = "100Mbit", delay = "2ms" })
end
net:start()

local results = {}
for _, method in ipairs(methods) do
  local s = ps.train{ server = cloud, workers = workers, mode = "bsp", model = "mlp:784-128-10",
                      dataset = { name = "fashion-mnist" }, batch = 64, seconds = seconds,
                      target_accuracy = target, stop_at_target = false, worker_opt = { method = "sgd", lr = 0.1 },
                      compress = method ~= "none" and { method = method, ratio = method == "topk" and 0.01 or nil } or nil,
                      eval_every = 2, eval_limit = 1000, final_eval_limit = 2000, prefix = method .. "_",
                      progress = not quick }
  results[#results + 1] = ex.row(method, s, { method = method,
    bytes_per_step = s.steps > 0 and s.bytes / s.steps or nil })
end
net:stop()
ex.table(string.format("compression: BSP over a 20 Mbit/s uplink, %d s each, target %.2f", seconds, target),
         results, { "label", "bytes_per_step", "steps", "time_to_target_s", "final_accuracy" })
ex.finish{ scenario = "compression", seconds = seconds, target_accuracy = target, results = results }
