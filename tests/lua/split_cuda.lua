-- forward{} and backward{} on a cuda node: the parts' gradients of mlp and
-- cnn:lenet, split in 2 and 3 parts over a cuda node and two cpu nodes,
-- equal the cuda node's own grad{} (cuBLAS) to 1e-4 of the largest
-- element. The passes of a part run on the CPU kernels on every device
-- (docs/lua-api.md "forward and backward"), so this checks that a cuda
-- node's host tensors are current for them and that the two devices'
-- arithmetic agrees. Without a usable GPU: exit 77 (skipped), after
-- checking that the start names why.
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
  print("SKIP: a fake CUDA module computes no gradients to compare")
  net:stop()
  os.exit(77)
end

local function data()
  g:dataset{ name = "synthetic", n = 64, dim = 784, classes = 10, noise = 0.5, seed = 3, shard = 0 }
end

for _, case in ipairs({
  { "mlp:784-32-16-10", { { { 1, 1 }, { 2, 3 } }, { { 1, 1 }, { 2, 2 }, { 3, 3 } } } },
  { "cnn:lenet", { { { 1, 4 }, { 5, 8 } }, { { 1, 2 }, { 3, 5 }, { 6, 8 } } } },
}) do
  local arch, cuts = case[1], case[2]
  for _, parts in ipairs(cuts) do
    data()
    local size = g:model{ name = "w", arch = arch, seed = 5 }.size
    g:grad{ model = "w", batch = BATCH, out = "ref" }
    local want = S.read_all(g, "ref", size)
    data()
    local got = S.split_grad(nodes, arch, parts, size, BATCH, 5)
    S.compare(got, want, 1e-4, string.format("%s in %d parts on cuda", arch, #parts))
  end
end
net:stop()
print("split_cuda: ok")
