-- speedup_model: measured speed-up of synchronous data parallelism over a
-- ring all-reduce against the model T_N = T_1 / N + T_comm of the
-- data-parallel ring all-reduce paper
-- (../shared/papers/data-parallel-ring-allreduce.txt, "System-Level
-- Optimization of Distributed Training for Deep Neural Networks Using Data
-- Parallelism": speed-up, scalability and communication cost).
--
-- N = 1, 2, 4, 8 workers on one switch (1 Gbit/s, 0.5 ms links), each
-- computing at a fiftieth of this host's speed (so that compute, not the
-- links, dominates one worker's step), train mlp:784-128-10 on the same
-- number of Fashion-MNIST samples (`epochs`, default 1): each of N workers
-- does 1/N of the steps. T_comm is measured on the links: the median time of
-- an all-reduce of the model alone, times the number of steps.
--
--   tools/run scenarios/speedup_model.lua [--set name=value ...]
--     epochs=1       epochs of Fashion-MNIST each N trains (quick: 0.05)
--     quick=false    the reduced run of the test suite (N = 1, 2, 4)
--     backend=auto   auto, kernel, user or none
--     plots=true     plots and the report page at the end
--
-- Expected: the measured speed-up T_1 / T_N falls further below N as N
-- grows: each step's all-reduce moves 2 (N-1)/N of the model whatever N is,
-- so T_comm per step does not shrink while the compute per worker does.
-- The model predicts the time within about 10% (measured on two cores: N
-- = 2 +8.9%, N = 4 -1.9%, N = 8 +2.3%; with the unpipelined ring of an
-- earlier version N = 8 was 27% over). Where the run is slower than the
-- model, a training step's all-reduce waited for its slowest worker's
-- compute, which the model leaves out, or the host's CPU limited the run
-- (run.json's `overload` says so); the model's T_comm, an all-reduce timed
-- alone, can also come out a little slow, as at N = 4.
-- summary.json: per N the steps, measured time, T_comm, the model's time,
-- both speed-ups, the model's error and the final accuracy.
--
-- Second part (profiled=true): ResNet-50 by the rtx2080ti profile (batch
-- 32, the adaptive-k paper's measured 0.86 s a step; docs/models.md),
-- timing only, its 97.5 MiB gradient virtual but whole on the wire, at
-- N = 2, 4, ... up to `max_n` (64) workers on one switch of `bw` (10 Gbit/s,
-- 0.05 ms) links, `total_steps` (64) steps of work split between the N
-- workers. T_1 is total_steps x the profile's step time (one worker has
-- nothing to all-reduce), T_comm the median all-reduce of the model alone
-- x the steps each worker does. summary.json `profiled`: per N the same
-- figures as above, and the run's `limited` (the host's CPU could not move
-- the bytes at the links' rate: T_N and T_comm are then upper bounds).
-- Measured on a shared 2-core host (N = 2, 4, 8, total_steps=16, bw=1Gbit;
-- docs/cookbook.md): the model within -0.4%, +15%, +3%; at 1 Gbit/s an
-- all-reduce of ResNet-50 costs more than its step, so N = 2 is slower than
-- one worker and N = 8 gains 1.7x. At the default 10 Gbit/s, one N per run
-- (ns=N first=false total_steps=32 probes=3, under nice at load average 21
-- to 61): at D = 8 for N = 2 to 16 and auto's 7 and 60 at N = 32 and 64
-- (both judged host-limited at their end) the model within +12%, +1.4%,
-- +0.9%, -16%, -6.9%, -12%, though an all-reduce alone took 1.5 to 43
-- times the ring's 2 (N-1)/N S / B (drops, RTOs, and at N >= 32 the
-- host); auto kept D = 1 for N = 2 to 16 on that loaded host (its data
-- plane looked a small load beside other programs') and those runs are
-- off by -32% to +172% (docs/cookbook.md says why).
--     profiled=false  run the second part (quick: true, N = 2 only, 2 steps)
--     max_n=64        the largest N (powers of two from 2)
--     ns=            the N to run instead, comma-separated (e.g. 16,32):
--                    one N per run lets `--dilation auto` pick the D
--                    each N needs (the run's D is chosen once, by its
--                    first network)
--     first=true     run the first part too (false: the second alone)
--     probes=5       all-reduces of the model alone whose median is T_comm's
--                    (both parts; fewer for a large N: each moves 2 N S)
--     total_steps=64  steps of work split between the N workers
--     bw=10Gbit       the links' rate
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local epochs = hn.param("epochs", quick and 0.05 or 1)
local batch = 64
local sizes = quick and { 1, 2, 4 } or { 1, 2, 4, 8 }
if not hn.param("first", true) then sizes = {} end
-- The second part's options are errors without it (one line each), not
-- silently unused: checked before the first part runs.
local with_profiled = hn.param("profiled", quick)
if not with_profiled and hn.param("ns", "") ~= "" then
  error("--set ns=" .. hn.param("ns", "") .. ": the N of the second part, which runs only with profiled=true", 0)
end
if not with_profiled and #sizes == 0 then error("--set first=false without profiled=true: nothing to run", 0) end

local function median(list)
  table.sort(list)
  return list[(#list + 1) // 2]
end

-- The median time (ms) of `probes` (5) ring all-reduces of the model alone
-- (a copy of every worker's "w") on the workers' links.
local probes = hn.param("probes", 5)
if math.type(probes) ~= "integer" or probes < 1 then
  error("--set probes: '" .. tostring(probes) .. "' is not a whole number >= 1", 0)
end
local function allreduce_ms(workers)
  local times = {}
  for r = 1, probes do
    for _, w in ipairs(workers) do w:copy{ src = "w", dst = "probe" } end
    times[r] = ar.allreduce{ peers = workers, tensor = "probe", algo = "ring" }.ms
  end
  return median(times)
end

local results, t1 = {}, nil
for _, n in ipairs(sizes) do
  local net = hn.network{ name = "speedup" .. n, backend = ex.backend(), seed = 1 }
  local sw, workers = net:switch("sw"), {}
  for i = 1, n do
    workers[i] = net:node("w" .. i, { speed = 0.02 })
    net:link(sw, workers[i], { bw = "1Gbit", delay = "0.5ms" })
  end
  net:start()
  local steps = math.max(1, math.floor(epochs * 60000 / (n * batch) + 0.5))
  local s = ar.train{ workers = workers, algo = "ring", model = "mlp:784-128-10",
                      dataset = { name = "fashion-mnist" }, batch = batch, steps = steps,
                      worker_opt = { method = "sgd", lr = 0.1 }, eval_every = steps, eval_limit = 1000,
                      final_eval_limit = 2000, prefix = "n" .. n .. "_", progress = not quick }
  -- T_comm: an all-reduce of the model alone, on the same links.
  local comm_ms = n > 1 and allreduce_ms(workers) or 0
  t1 = t1 or s.wall_s
  local t_comm = comm_ms * steps / 1000
  local model = t1 / n + t_comm
  results[#results + 1] = ex.row("N=" .. n, s, { workers = n, steps = steps, time_s = s.wall_s,
    t_comm_s = t_comm, model_time_s = model, speedup = t1 / s.wall_s, model_speedup = t1 / model,
    model_error = (s.wall_s - model) / model })
  net:stop()
end

-- The N of the second part: `ns` where given (each checked: one line
-- naming the value at fault), else the powers of two from 2 to max_n.
local function profiled_sizes(max_n)
  local ns = hn.param("ns", "")
  local out = {}
  if ns == "" then
    local n = 2
    while n <= max_n do out[#out + 1], n = n, n * 2 end
    return out
  end
  for _, n in ipairs(ex.list_param("ns", ns)) do
    if math.type(n) ~= "integer" or n < 2 then error("--set ns: '" .. tostring(n) .. "' is not a whole N >= 2", 0) end
    out[#out + 1] = n
  end
  return out
end

-- The second part: ResNet-50 by profile at N = 2..max_n (header).
local function profiled_part()
  local max_n, total = hn.param("max_n", quick and 2 or 64), hn.param("total_steps", quick and 2 or 64)
  local bw, batch_rn = hn.param("bw", "10Gbit"), 32
  local cp = hn.profile_grad_seconds("rtx2080ti", "resnet50", batch_rn)
  local t1_rn, rows = total * cp, {}
  for _, n in ipairs(profiled_sizes(max_n)) do
    local net = hn.network{ name = "speedup_rn" .. n, backend = ex.backend(), seed = 1 }
    local sw, workers = net:switch("sw"), {}
    for i = 1, n do
      workers[i] = net:node("w" .. i, { profile = "rtx2080ti" })
      net:link(sw, workers[i], { bw = bw, delay = "0.05ms" })
    end
    net:start()
    local steps = math.max(1, total // n)
    local s = ar.train{ workers = workers, algo = "ring", model = "resnet50", compute = "profile",
                        dataset = { name = "synthetic", n = 64 * n, dim = 784, classes = 10, test_n = 100 },
                        batch = batch_rn, steps = steps, worker_opt = { lr = 0.1 }, prefix = "resnet50_n" .. n .. "_",
                        progress = false }
    local t_comm = allreduce_ms(workers) * steps / 1000
    local model = t1_rn / n + t_comm
    rows[#rows + 1] = ex.row("resnet50 N=" .. n, s, { workers = n, steps = steps, time_s = s.wall_s,
      t_comm_s = t_comm, model_time_s = model, speedup = t1_rn / s.wall_s, model_speedup = t1_rn / model,
      model_error = (s.wall_s - model) / model, limited = (s.overload or {}).limited })
    net:stop()
  end
  ex.table(string.format("speedup_model: ResNet-50 by profile rtx2080ti, %d steps of batch %d, %s links, T_1 = %.4g s",
                         total, batch_rn, bw, t1_rn), rows,
           { "label", "steps", "time_s", "t_comm_s", "model_time_s", "speedup", "model_speedup", "model_error",
             "limited" })
  return { t1_s = t1_rn, step_s = cp, total_steps = total, bw = bw, results = rows }
end

local profiled = with_profiled and profiled_part() or nil
if #results > 0 then
  ex.table(string.format("speedup_model: %.2f epochs of Fashion-MNIST, ring all-reduce", epochs), results,
           { "label", "steps", "time_s", "t_comm_s", "model_time_s", "speedup", "model_speedup", "final_accuracy" })
end
ex.finish{ scenario = "speedup_model", paper = "data-parallel ring all-reduce: T_N = T_1/N + T_comm",
           epochs = epochs, results = results, profiled = profiled }
