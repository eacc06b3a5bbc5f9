-- Scenario half of tools/bench/parallelism (--set part=bubble). Prints
-- "result KEY VALUE" lines for the script.
--
-- bubble: a 3-stage GPipe pipeline of mlp:1024-1024-1024-1024-10 cut
-- 1 | 2 | 3-4 (three stages of equal work) on backend none, batch `batch`
-- in M = 1, 4 and 16 micro-batches; per M the measured bubble share (mean
-- over steps and stages of 1 - the stage's compute / the step's time), the
-- ideal (p - 1) / (M + p - 1), and the stages' transfer time as a share of
-- the step (the allowance the target adds to the ideal).
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local ex = require("hiernet.experiment")

local part = hn.param("part", "bubble")

local function result(key, value)
  print(string.format("result %s %s", key, tostring(value)))
end

if part == "bubble" then
  local steps, batch = hn.param("steps", 6), hn.param("batch", 96)
  local net = hn.network{ name = "pipe", backend = "none", dilation = hn.param("dilation", 4) }
  local nodes = {}
  for i = 1, 3 do nodes[i] = net:node("s" .. i) end
  net:link(nodes[1], nodes[2])
  net:link(nodes[2], nodes[3])
  net:link(nodes[1], nodes[3])
  net:start()
  for _, m in ipairs({ 1, 4, 16 }) do
    local prefix = "m" .. m .. "_"
    local s = split.train{ parts = { { node = nodes[1], layers = "1" }, { node = nodes[2], layers = "2" },
                                     { node = nodes[3], layers = "3-" } },
                           model = "mlp:1024-1024-1024-1024-10",
                           dataset = { name = "synthetic", n = 4096, dim = 1024, classes = 10, test_n = 64 },
                           batch = batch, microbatches = m, schedule = "gpipe", steps = steps,
                           eval_every = 1000, eval_limit = 64, prefix = prefix, progress = false }
    -- Transfer: per step, the mean over stages of their sends' time, as a
    -- share of the step (the first step is a warm-up and is left out).
    local transfer, span, n = 0, 0, 0
    for _, row in ipairs(ex.read_csv(prefix .. "steps")) do
      if row.step > 1 then transfer, n = transfer + row.transfer_ms / 3, n + 1 end
    end
    span = s.step_s * 1000 -- the median step
    local transfer_share = n > 0 and transfer / (n / 3) / span or 0
    result("m" .. m .. "_bubble", string.format("%.4f", s.bubble_share))
    result("m" .. m .. "_ideal", string.format("%.4f", s.bubble_share_ideal))
    result("m" .. m .. "_transfer_share", string.format("%.4f", transfer_share))
    result("m" .. m .. "_step_ms", string.format("%.2f", span))
  end
  net:stop()
end
