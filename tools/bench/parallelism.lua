-- Scenario half of tools/bench/parallelism's bubble section. Prints
-- "result KEY VALUE" lines for the script.
--
-- A 3-stage GPipe pipeline of mlp:16-1024-1024-1024-1024-10 cut 1-2 | 3 |
-- 4-5 on backend none, batch `batch` in M = 1, 4 and 16 micro-batches.
-- The stages are equal as GPipe's formula assumes, in the forward pass
-- and in the backward pass each: every stage has one 1024 x 1024 layer
-- that computes its input gradient, the first's input layer (16 x 1024)
-- and the last's output layer (1024 x 10) are small. (Cut at single
-- layers, the first stage computes no input gradient: its backward was
-- 30% lighter, its forward heavier with a wider input, and the schedule
-- waits for the slowest stage of each phase.) Per M, over the steps after
-- the first (which also makes the stashes): split.train's bubble shares
-- (measured; replayed with the measured compute alone, each pass's own
-- time and each stage's mean; the controller's share), the ideal (p - 1)
-- / (M + p - 1), the stages' transfer time as a share of the step (the
-- allowance the target adds to the ideal), the slowest stage's bubble (1
-- - its compute / the step) and the median step.
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

local net = hn.network{ name = "pipe", backend = "none", dilation = hn.param("dilation", 16) }
local nodes = {}
for i = 1, 3 do nodes[i] = net:node("s" .. i) end
net:link(nodes[1], nodes[2])
net:link(nodes[2], nodes[3])
net:link(nodes[1], nodes[3])
net:start()
for _, m in ipairs({ 1, 4, 16 }) do
  local key = "m" .. m .. "_"
  local s = split.train{ parts = { { node = nodes[1], layers = "1-2" }, { node = nodes[2], layers = "3" },
                                   { node = nodes[3], layers = "4-" } },
                         model = string.format("mlp:%d-1024-1024-1024-1024-10", dim),
                         dataset = { name = "synthetic", n = 4096, dim = dim, classes = 10, test_n = 64 },
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
result("overrun_share", string.format("%.4f", hn.overload().overrun_share or 0))
net:stop()
