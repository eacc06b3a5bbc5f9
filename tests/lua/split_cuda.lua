-- forward{} and backward{} on a cuda node: the parts' gradients of mlp,
-- cnn:lenet and cnn:resnet20 (batch statistics in the tail), split in 2
-- and 3 parts over a cuda node and two cpu nodes,
-- with the cuda node running each part in turn (the first, reading the
-- data; a middle one; the last, starting from the loss), equal the cuda
-- node's own grad{} (cuBLAS) to 1e-4 of the largest element. A cuda node
-- runs its part on the GPU's layer-range passes (kernels/cuda/, docs/lua-
-- api.md "forward and backward"), so this checks them on a real GPU, and
-- that activations and gradients pass between GPU and CPU parts. Without
-- a usable GPU: exit 77 (skipped), after checking that the start names
-- why; unit.test_cuda_host checks the passes' arithmetic without one.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local S = dofile(dir .. "lib/split_grad.lua")

local BATCH = 8
local net = hn.network{ name = "splitcuda", backend = "none" }
local g = net:node("g", { device = "cuda" })
local nodes = { g, net:node("c1"), net:node("c2") }
net:link(nodes[1], nodes[2])
net:link(nodes[2], nodes[3])
net:link(nodes[1], nodes[3])
local ok, err = pcall(net.start, net)
if not ok then
  assert(err:find("node 'g': device 'cuda' is not available: ", 1, true), "start names why: " .. tostring(err))
  print("SKIP: no usable CUDA device, the split on cuda not run: " .. err:gsub("\n.*", ""))
  os.exit(77)
end
if os.getenv("HIERNET_CUDA_MODULE") then
  print("SKIP: a fake CUDA module computes with the CPU's code, nothing of a GPU's to compare")
  net:stop()
  os.exit(77)
end

local function data(n)
  n:dataset{ name = "synthetic", n = 64, dim = 784, classes = 10, noise = 0.5, seed = 3, shard = 0 }
end

-- The nodes of a split whose part `pos` runs on the cuda node.
local function order(pos)
  local out, cpu = {}, { nodes[2], nodes[3] }
  for k = 1, 3 do out[k] = k == pos and g or table.remove(cpu, 1) end
  return out
end

for _, case in ipairs({
  { "mlp:784-32-16-10", { { { 1, 1 }, { 2, 3 } }, { { 1, 1 }, { 2, 2 }, { 3, 3 } } } },
  { "cnn:lenet", { { { 1, 4 }, { 5, 8 } }, { { 1, 2 }, { 3, 5 }, { 6, 8 } } } },
  -- before stage 2's downsampling block; after the stem, before the pool
  { "cnn:resnet20", { { { 1, 17 }, { 18, 49 } }, { { 1, 2 }, { 3, 47 }, { 48, 49 } } } },
}) do
  local arch, cuts = case[1], case[2]
  for _, parts in ipairs(cuts) do
    for pos = 1, #parts do
      data(g)
      local size = g:model{ name = "w", arch = arch, seed = 5 }.size
      g:grad{ model = "w", batch = BATCH, out = "ref" }
      local want = S.read_all(g, "ref", size)
      local on = order(pos)
      data(on[1])
      local got = S.split_grad(on, arch, parts, size, BATCH, 5)
      S.compare(got, want, 1e-4, string.format("%s in %d parts, part %d on cuda", arch, #parts, pos))
    end
  end
end
net:stop()
print("split_cuda: ok")
