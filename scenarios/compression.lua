-- compression: gradient compression on a slow uplink (survey of
-- distributed training: low precision and sparsification; error feedback).
--
-- Four terminals under one edge (100 Mbit/s, 2 ms) whose uplink to the
-- cloud server is slow (5 Mbit/s, 10 ms). BSP training of mlp:784-128-10 on
-- Fashion-MNIST for the same emulated time with the updates sent as they
-- are (none), top-1% sparsified (topk), 8-bit quantized (int8) and as signs
-- (sign), each with error feedback.
--
--   tools/run scenarios/compression.lua [--set seconds=40] [--set quick=true]
--
-- Expected: the uplink carries four pushes a step, so uncompressed steps
-- take about 4 x 407 KB / 5 Mbit/s = 2.6 s; int8 cuts the bytes 4x, sign
-- ~32x, topk 1% ~50x, and the compressed runs make that many more steps in
-- the same time, reaching a given accuracy sooner; error feedback keeps the
-- final accuracy near the uncompressed one. summary.json: per method bytes
-- per step, steps, time to the target accuracy, final accuracy.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local seconds = hn.param("seconds", quick and 6 or 40)
local target = hn.param("target", quick and 0.5 or 0.7)
local methods = quick and { "none", "int8" } or { "none", "topk", "int8", "sign" }

local net = hn.network{ name = "compression", backend = ex.backend(), seed = 1 }
local cloud = net:node("cloud", { tier = "cloud" })
local edge = net:node("edge", { tier = "edge" })
net:link(cloud, edge, { bw = "5Mbit", delay = "10ms" })
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
ex.table(string.format("compression: BSP over a 5 Mbit/s uplink, %d s each, target %.2f", seconds, target),
         results, { "label", "bytes_per_step", "steps", "time_to_target_s", "final_accuracy" })
ex.finish{ scenario = "compression", seconds = seconds, target_accuracy = target, results = results }
