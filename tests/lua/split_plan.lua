-- split.plan ranks every cut by Neurosurgeon's sum (docs/algorithms.md
-- "Split learning and pipelines"): for LeNet on 3 nodes, all C(7, 2) = 21
-- cuts, each one's compute the sum of its parts' measured segment times on
-- their nodes and its transfer the activations (with the labels) and their
-- gradient over each hop at the hop's goodput plus its delay, recomputed
-- here; ranked fastest first. resnet20's segments are its blocks (never
-- cut inside one). Bad parts and options are refused naming them.
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")

local net = hn.network{ name = "splitplan", backend = "none" }
local a = net:node("a", { speed = 0.25 })
local b = net:node("b")
local c = net:node("c")
net:link(a, b)
net:link(b, c)
net:start()

local links = { { bw = 20e6, delay = 0.005 }, { bw = 1e9, delay = 0.01 } }
local BATCH = 8
local r = split.plan{ model = "cnn:lenet", nodes = { a, b, c }, links = links, batch = BATCH, reps = 3 }
local layers = hn.model_layers("cnn:lenet")
T.eq(#r.segments, 8, "lenet segments")
T.eq(#r.cuts, 21, "cuts of 8 segments into 3 parts")
T.eq(r.best, r.cuts[1], "best is the first")
local seen = {}
for i, cut in ipairs(r.cuts) do
  if i > 1 then T.le(r.cuts[i - 1].predicted_s, cut.predicted_s, "ranked") end
  local key = table.concat(cut.parts, "|")
  assert(not seen[key], "cut listed twice: " .. key)
  seen[key] = true
  local compute, transfer = 0, 0
  for k, part in ipairs(cut.parts) do
    local first, last = part:match("^(%d+)-(%d+)$")
    first, last = tonumber(first), tonumber(last)
    for s = first, last do compute = compute + r.compute_s[k][s] end
    if k < 3 then
      local bytes = BATCH * layers[last].out_size * 4
      T.eq(cut.activation_bytes[k], bytes, key .. " activation bytes")
      local l = links[k]
      transfer = transfer + 2 * l.delay + ((bytes + 4 * BATCH) + bytes) * 8 / (l.bw * 1448 / 1514)
    end
  end
  T.near(cut.compute_s, compute, 1e-9, key .. " compute")
  T.near(cut.transfer_s, transfer, 1e-9, key .. " transfer")
  T.near(cut.predicted_s, compute + transfer, 1e-9, key .. " predicted")
end
-- Node a is 4 times slower than c: its measured times are larger on most
-- segments (a segment's CPU time on a loaded host can jump now and then).
local slower = 0
for s = 1, 8 do if r.compute_s[1][s] > r.compute_s[3][s] then slower = slower + 1 end end
assert(slower >= 5, string.format("speed 0.25 slower than speed 1 on %d of 8 segments", slower))

-- resnet20: 13 segments (conv, bn, 9 blocks, pool, dense).
local segs = split.segments(hn.model_layers("cnn:resnet20"))
T.eq(#segs, 13, "resnet20 segments")
T.eq(segs[3][1], 3, "block 1 starts")
T.eq(segs[3][2], 7, "block 1 ends")

T.fails("split.plan: option 'links': expected 2 links", function()
  split.plan{ model = "cnn:lenet", nodes = { a, b, c }, links = { links[1] } }
end)
T.fails("split.plan: unknown option 'nodez'", function() split.plan{ model = "cnn:lenet", nodez = {} } end)
local base = { model = "cnn:resnet20", dataset = { name = "synthetic", n = 64, dim = 784, classes = 10 },
               steps = 1, batch = 8 }
T.fails("a part cannot start at layer 5", function()
  split.train(T.with(base, { parts = { { node = a, layers = "1-4" }, { node = b, layers = "5-" } } }))
end)
T.fails("starts at layer 4, the part before ends at layer 2", function()
  split.train(T.with(base, { model = "cnn:lenet", parts = { { node = a, layers = "1-2" }, { node = b, layers = "4-" } } }))
end)
T.fails("layers 7 to 8 belong to no part", function()
  split.train(T.with(base, { model = "cnn:lenet", parts = { { node = a, layers = "1-2" }, { node = b, layers = "3-6" } } }))
end)
T.fails("batch 8 is not a whole number of 3 micro-batches", function()
  split.train(T.with(base, { model = "cnn:lenet", microbatches = 3,
                             parts = { { node = a, layers = "1-2" }, { node = b, layers = "3-" } } }))
end)
T.fails("node 'a' already runs part 1", function()
  split.train(T.with(base, { model = "cnn:lenet",
                             parts = { { node = a, layers = "1-2" }, { node = b, layers = "3-4" }, { node = a, layers = "5-" } } }))
end)
net:stop()
print("split_plan: ok")
