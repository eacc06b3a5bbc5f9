-- dilation.lua — a compute-bound training step on W workers, for
-- tools/bench/dilation and tests/cli/test_dilation.sh.
-- Every step, each worker computes one mini-batch gradient (grad{}) at the
-- same time; the step ends when the last one answers. Step times are
-- hn.now() differences: emulated time, so a run at --dilation D that the
-- host can serve reports the times of an unloaded host.
-- Params (--set): workers=16, steps=6 (the first, a warm-up, is not
-- measured), arch="mlp:784-256-128-10", batch=64, speed=1.
-- Prints one line: "dilation {json}" with the median and mean step in ms,
-- the mean grad ms, the dilation and the overload report.
local hn = require("hiernet")
local workers = hn.param("workers", 16)
local steps = hn.param("steps", 6)
local arch = hn.param("arch", "mlp:784-256-128-10")
local batch = hn.param("batch", 64)
local speed = hn.param("speed", 1)

local net = hn.network{ name = "dil", backend = "none" }
local nodes = {}
for i = 1, workers do nodes[i] = net:node("w" .. i, { speed = speed }) end
net:start()

local dim = tonumber(arch:match("^%a+:(%d+)"))
local classes = tonumber(arch:match("(%d+)$"))
hn.wait_all((function()
  local t = {}
  for i, n in ipairs(nodes) do
    t[i] = hn.spawn(function()
      n:dataset{ name = "synthetic", n = 4096, dim = dim, classes = classes, seed = i }
      n:model{ name = "m", arch = arch, seed = 1 }
    end)
  end
  return t
end)())

local step_ms, grad_ms = {}, {}
for s = 1, steps do
  local t0 = hn.now()
  local tasks = {}
  for i, n in ipairs(nodes) do
    tasks[i] = hn.spawn(function() return n:grad{ model = "m", batch = batch }.ms end)
  end
  local ms = hn.wait_all(tasks)
  if s > 1 then
    step_ms[#step_ms + 1] = (hn.now() - t0) * 1e3
    for _, v in ipairs(ms) do grad_ms[#grad_ms + 1] = v end
  end
end
net:stop()

local function median(v)
  local c = {}
  for i, x in ipairs(v) do c[i] = x end
  table.sort(c)
  local n = #c
  return n % 2 == 1 and c[(n + 1) // 2] or (c[n // 2] + c[n // 2 + 1]) / 2
end
local function mean(v)
  local s = 0
  for _, x in ipairs(v) do s = s + x end
  return s / #v
end

local o = hn.overload()
print(string.format('dilation {"workers":%d,"dilation":%g,"speed":%g,"step_ms_median":%.3f,' ..
                    '"step_ms_mean":%.3f,"grad_ms_mean":%.3f,"commands":%d,"overruns":%d,' ..
                    '"overrun_share":%.4f,"host_cpu_saturation":%.3f,"suggested_dilation":%g}',
                    workers, o.dilation, speed, median(step_ms), mean(step_ms), mean(grad_ms),
                    o.commands, o.overruns, o.overrun_share, o.host_cpu_saturation or -1,
                    o.suggested_dilation))
