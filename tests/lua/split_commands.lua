-- forward{} and backward{} (docs/lua-api.md "forward and backward"): a
-- model cut into 2 and 3 parts on 3 peers, activations, labels and
-- gradients sent between them over the data plane, gives the gradient of
-- the unsplit model's grad{} on a reference peer (same data, same initial
-- parameters) to float tolerance, for mlp, cnn:lenet and cnn:resnet20;
-- two micro-batches in flight at once keep their own activations; bad
-- ranges and a backward without its forward are refused.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")

local BATCH = 4
local DATA = { name = "synthetic", n = 64, dim = 784, classes = 10, noise = 0.5, seed = 3 }

local net = hn.network{ name = "splitcmd", backend = "none" }
local ref = net:node("ref", { tier = "cloud" })
local nodes = { net:node("t1", { tier = "terminal" }), net:node("e1", { tier = "edge" }),
                net:node("c1", { tier = "cloud" }) }
for i = 1, 3 do
  net:link(ref, nodes[i])
  for k = i + 1, 3 do net:link(nodes[i], nodes[k]) end
end
net:start()

local function data(n)
  local d = { split = "train", shard = 0 }
  for k, v in pairs(DATA) do d[k] = v end
  n:dataset(d)
end
data(ref)
data(nodes[1])

-- A tensor's values, read in pieces of at most 65536.
local function read_all(n, name, size)
  local out = {}
  for off = 0, size - 1, 65536 do
    local r = n:read{ tensor = name, range = { off, math.min(65536, size - off) } }
    for _, v in ipairs(r.values) do out[#out + 1] = v end
  end
  return out
end

-- The gradient of parts {first, last} (1-based layers) on nodes[1..#parts],
-- summed over the parts, and the loss.
local function split_grad(arch, parts, size, microbatch)
  for k = 1, #parts do nodes[k]:model{ name = "w", arch = arch, seed = 5 } end
  local loss
  for k, p in ipairs(parts) do
    local n = nodes[k]
    local r = n:forward{ model = "w", layers = p, input = k > 1 and "x" or nil, out = "y",
                         batch = k == 1 and BATCH or nil, labels = k > 1 and "lbl" or nil,
                         labels_out = k == 1 and "lbl" or nil, microbatch = microbatch }
    T.eq(r.batch, BATCH, arch .. " forward batch")
    if k < #parts then
      n:send{ tensor = "y", to = nodes[k + 1], as = "x" }
      n:send{ tensor = "lbl", to = nodes[k + 1], as = "lbl" }
    else
      loss = r.loss
    end
  end
  local sum = {}
  for k = #parts, 1, -1 do
    local n = nodes[k]
    n:backward{ model = "w", layers = parts[k], grad_in = k < #parts and "dy" or nil,
                grad_out = k > 1 and "dx" or nil, out = "g", microbatch = microbatch }
    if k > 1 then n:send{ tensor = "dx", to = nodes[k - 1], as = "dy" } end
    for i, v in ipairs(read_all(n, "g", size)) do sum[i] = (sum[i] or 0) + v end
  end
  return sum, loss
end

local function check(arch, cuts)
  local size = ref:model{ name = "w", arch = arch, seed = 5 }.size
  for _, parts in ipairs(cuts) do
    -- The reference takes the same mini-batch as t1: both datasets start afresh.
    data(ref)
    data(nodes[1])
    local want = ref:grad{ model = "w", batch = BATCH, out = "g" }
    local wg = read_all(ref, "g", size)
    local got, loss = split_grad(arch, parts, size)
    T.near(loss, want.loss, 1e-6, arch .. " loss")
    local worst, scale = 0, 0
    for i = 1, size do
      worst = math.max(worst, math.abs(got[i] - wg[i]))
      scale = math.max(scale, math.abs(wg[i]))
    end
    if not (scale > 0 and worst <= 1e-5 * scale) then
      error(string.format("%s in %d parts: gradient differs by %g (largest %g)", arch, #parts, worst, scale))
    end
  end
end

check("mlp:784-32-16-10", { { { 1, 1 }, { 2, 3 } }, { { 1, 1 }, { 2, 2 }, { 3, 3 } } })
check("cnn:lenet", { { { 1, 4 }, { 5, 8 } }, { { 1, 1 }, { 2, 5 }, { 6, 8 } } })
check("cnn:resnet20", { { { 1, 7 }, { 8, 49 } }, { { 1, 2 }, { 3, 27 }, { 28, 49 } } })

-- Two micro-batches in flight on one part: each backward uses its own
-- forward's activations (the second forward does not overwrite the first's).
local t1 = nodes[1]
t1:model{ name = "m", arch = "mlp:784-8-10", seed = 2 }
data(t1)
t1:forward{ model = "m", layers = { 1, 2 }, batch = BATCH, microbatch = 1, out = "l1" }
t1:forward{ model = "m", layers = { 1, 2 }, batch = BATCH, microbatch = 2, out = "l2" }
t1:backward{ model = "m", layers = { 1, 2 }, microbatch = 1, out = "g1" }
t1:backward{ model = "m", layers = { 1, 2 }, microbatch = 2, out = "g2" }
data(ref)
ref:model{ name = "m", arch = "mlp:784-8-10", seed = 2 }
ref:grad{ model = "m", batch = BATCH, out = "r1" }
ref:grad{ model = "m", batch = BATCH, out = "r2" }
for _, pair in ipairs({ { "g1", "r1" }, { "g2", "r2" } }) do
  local a, b = read_all(t1, pair[1], 6370), read_all(ref, pair[2], 6370)
  for i = 1, 6370 do T.near(a[i], b[i], 1e-5, "micro-batch gradient " .. pair[1]) end
end
-- add = true sums micro-batches into one gradient.
t1:copy{ src = "g1", dst = "gsum" }
t1:forward{ model = "m", layers = { 1, 2 }, batch = BATCH, microbatch = 1, out = "l1" }
t1:backward{ model = "m", layers = { 1, 2 }, microbatch = 1, out = "gsum", add = true }
ref:grad{ model = "m", batch = BATCH, out = "r3" }
local s, r1, r3 = read_all(t1, "gsum", 6370), read_all(ref, "r1", 6370), read_all(ref, "r3", 6370)
for i = 1, 6370 do T.near(s[i], r1[i] + r3[i], 1e-5, "add = true") end

T.fails("layers {1, 3}: dense has layers 1 to 2", function() t1:forward{ model = "m", layers = { 1, 3 } } end)
T.fails("no forward of micro-batch 9 to go back through", function()
  t1:backward{ model = "m", layers = { 1, 2 }, microbatch = 9 }
end)
T.fails("input= is missing", function() t1:forward{ model = "m", layers = { 2, 2 } } end)
t1:model{ name = "r", arch = "cnn:resnet20" }
T.fails("falls inside the residual block of layers 3-7", function()
  t1:forward{ model = "r", layers = { 1, 4 }, batch = 2 }
end)
print("split_commands: ok")
net:stop()
