-- Scenario half of tools/bench/parallelism's bubble section. Prints
-- "result KEY VALUE" lines for the script.
--
-- A 3-stage GPipe pipeline of mlp:16-1024-1024-16-1024-1024-16-1024-
-- 1024-16 cut 1-3 | 4-6 | 7-9 on backend none, batch `batch` in M = 1, 4
-- and 16 micro-batches, first with the stages computing by profile
-- (`profile`, default rpi4; result keys "p_..."), then by kernel (keys
-- without the "p_"); `rows` picks them ("profile,kernel" by default);
-- `model`, `classes` and `cuts` replace the pipeline's model.
-- The stages are equal as GPipe's formula assumes, in the forward pass
-- and in the backward pass each, by a profile's FLOP times as well as
-- by the host's kernels: every stage is the same three layers, 16 ->
-- 1024 -> 1024 -> 16, and computes its input gradient but the first
-- (the first layer's input gradient, 16 x 1024 multiply-accumulates a
-- sample, is 0.7% of a stage's backward). (The earlier 16-1024-1024-
-- 1024-1024-10 cut 1-2 | 3 | 4-5 was equal by kernel, but not by
-- profile: there bias and ReLU cost bandwidth / 8 a FLOP, and the first
-- stage's extra 1024-wide layer made its forward 5% longer on rpi4.)
-- Per M, over the steps after the first (which also makes the stashes):
-- split.train's bubble shares (measured; replayed with the measured
-- compute alone, each pass's own time and each stage's mean; the
-- controller's share), the ideal (p - 1) / (M + p - 1), the stages'
-- transfer time as a share of the step (the allowance the target adds to
-- the ideal), the slowest stage's bubble (1 - its compute / the step)
-- and the median step; per row the share of compute commands that
-- overran their emulated time.
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local ex = require("hiernet.experiment")

local steps, batch = hn.param("steps", 6), hn.param("batch", 1536)
local dim = hn.param("input", 16)

local function result(key, value)
  print(string.format("result %s %s", key, tostring(value)))
end

-- Per step (after the first): the mean over stages of their sends' time,
-- and the slowest stage's bubble, each as a share of the step; their
-- means over the steps.
local function step_figures(prefix)
  local by_step = {}
  for _, row in ipairs(ex.read_csv(prefix .. "steps")) do
    if row.step > 1 then
      local s = by_step[row.step] or { transfer = 0, busiest = 0, stages = 0 }
      by_step[row.step] = s
      -- the step's span, from the stage's own bubble share
      s.span = row.bubble_share < 1 and row.compute_ms / (1 - row.bubble_share) or s.span
      s.transfer, s.stages = s.transfer + row.transfer_ms, s.stages + 1
      s.busiest = math.max(s.busiest, row.compute_ms)
    end
  end
  local transfer, slowest, n = 0, 0, 0
  for _, s in pairs(by_step) do
    if s.span and s.span > 0 then
      transfer = transfer + s.transfer / s.stages / s.span
      slowest = slowest + 1 - s.busiest / s.span
      n = n + 1
    end
  end
  return n > 0 and transfer / n or 0, n > 0 and slowest / n or 0
end

local profile = hn.param("profile", "rpi4")
local model = hn.param("model", string.format("mlp:%d-1024-1024-16-1024-1024-16-1024-1024-16", dim))
local classes = hn.param("classes", 16)
local cuts = {}
for c in hn.param("cuts", "1-3,4-6,7-"):gmatch("[^,]+") do cuts[#cuts + 1] = c end
local net = hn.network{ name = "pipe", backend = "none", dilation = hn.param("dilation", 16) }
local nodes = {}
for i = 1, 3 do nodes[i] = net:node("s" .. i, { profile = profile }) end
net:link(nodes[1], nodes[2])
net:link(nodes[2], nodes[3])
net:link(nodes[1], nodes[3])
net:start()
local parts = {}
for k, c in ipairs(cuts) do parts[k] = { node = nodes[k], layers = c } end

-- One GPipe training per M; `row` "p_" computes by profile, "" by kernel.
local function run(row, compute, m)
  local key = row .. "m" .. m .. "_"
  local s = split.train{ parts = parts, model = model, compute = compute,
                         dataset = { name = "synthetic", n = 4096, dim = dim, classes = classes, test_n = 64 },
                         batch = batch, microbatches = m, schedule = "gpipe", steps = steps,
                         eval_every = 1000, eval_limit = 64, prefix = key, progress = false }
  local transfer, slowest = step_figures(key)
  result(key .. "bubble", string.format("%.4f", s.bubble_share))
  result(key .. "compute", string.format("%.4f", s.bubble_share_compute))
  result(key .. "even", string.format("%.4f", s.bubble_share_even))
  result(key .. "control", string.format("%.4f", s.control_share))
  result(key .. "ideal", string.format("%.4f", s.bubble_share_ideal))
  result(key .. "transfer_share", string.format("%.4f", transfer))
  result(key .. "slowest", string.format("%.4f", slowest))
  result(key .. "step_ms", string.format("%.2f", s.step_s * 1000))
end

-- The rows: by profile (judged by tools/bench/parallelism) and by kernel
-- (reported), each with its own share of compute commands that overran
-- their emulated time (the overload account counts the run so far).
local rows = hn.param("rows", "profile,kernel")
for _, row in ipairs{ { "profile", "p_", "profile" }, { "kernel", "", nil } } do
  if rows:find(row[1], 1, true) then
    local before = hn.overload()
    for _, m in ipairs({ 1, 4, 16 }) do run(row[2], row[3], m) end
    local after = hn.overload()
    local commands = after.commands - before.commands
    result(row[2] .. "overrun_share",
           string.format("%.4f", commands > 0 and (after.overruns - before.overruns) / commands or 0))
  end
end
net:stop()
