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

local S = dofile(dir .. "lib/split_grad.lua")
local read_all = S.read_all

local function check(arch, cuts)
  local size = ref:model{ name = "w", arch = arch, seed = 5 }.size
  for _, parts in ipairs(cuts) do
    -- The reference takes the same mini-batch as t1: both datasets start afresh.
    data(ref)
    data(nodes[1])
    local want = ref:grad{ model = "w", batch = BATCH, out = "g" }
    local got, loss = S.split_grad(nodes, arch, parts, size, BATCH, 5)
    T.near(loss, want.loss, 1e-6, arch .. " loss")
    S.compare(got, read_all(ref, "g", size), 1e-5, string.format("%s in %d parts", arch, #parts))
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

-- All parts on one node: the last part takes the labels its layer 1 read.
do
  data(ref)
  data(t1)
  local size = ref:model{ name = "k", arch = "cnn:lenet", seed = 4 }.size
  t1:model{ name = "k", arch = "cnn:lenet", seed = 4 }
  local want = ref:grad{ model = "k", batch = BATCH, out = "gk" }
  t1:forward{ model = "k", layers = { 1, 4 }, batch = BATCH, out = "k1" }
  local r = t1:forward{ model = "k", layers = { 5, 8 }, input = "k1", out = "k2" }
  T.near(r.loss, want.loss, 1e-6, "kept labels: loss")
  t1:backward{ model = "k", layers = { 5, 8 }, grad_out = "kd", out = "kg" }
  t1:backward{ model = "k", layers = { 1, 4 }, grad_in = "kd", out = "kg", add = true }
  S.compare(read_all(t1, "kg", size), read_all(ref, "gk", size), 1e-5, "one node, kept labels")
end

T.fails("layers {1, 3}: dense has layers 1 to 2", function() t1:forward{ model = "m", layers = { 1, 3 } } end)
T.fails("param 'layers': expected {first, last}, layer numbers from 1", function()
  t1:forward{ model = "m", layers = { 1 } }
end)
T.fails("no forward of micro-batch 9 to go back through", function()
  t1:backward{ model = "m", layers = { 1, 2 }, microbatch = 9 }
end)
T.fails("input= is missing", function() t1:forward{ model = "m", layers = { 2, 2 } } end)
T.fails("param 'batch': only without input=", function()
  t1:forward{ model = "m", layers = { 2, 2 }, input = "l1", batch = 3 }
end)
t1:model{ name = "r", arch = "cnn:resnet20" }
T.fails("falls inside the residual block of layers 3-7", function()
  t1:forward{ model = "r", layers = { 1, 4 }, batch = 2 }
end)
print("split_commands: ok")
net:stop()
