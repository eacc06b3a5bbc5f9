-- device = "cuda" nodes through the whole stack (controller, --device, peer).
-- Without a usable GPU the start fails before anything is created, naming
-- the node and why; the test checks that and exits 77 (skipped: what needs
-- a GPU did not run). With one -- or with the fake CUDA module of the unit
-- tests (ctest runs this script again as lua.cuda_device_fake, with
-- HIERNET_CUDA_MODULE set) -- a cuda node trains like a cpu node (mlp and
-- cnn:lenet), and receives its parameters from it over the data plane. With
-- HIERNET_FAKE_CUDA_CTX_ERROR the fake GPU exists but cannot be opened: the
-- peer's own reason reaches the start error.
local hn = require("hiernet")
local net = hn.network{ name = "dev", backend = "none" }
local g = net:node("g", { device = "cuda" })
local c = net:node("c", { device = "cpu" })

local ok, err = pcall(net.start, net)
local ctx_error = os.getenv("HIERNET_FAKE_CUDA_CTX_ERROR")
if ctx_error and ctx_error ~= "" then
  assert(not ok, "a GPU that cannot be opened fails the start")
  assert(err:find("start failed: node 'g': cannot compute on cuda: ", 1, true) and err:find(ctx_error, 1, true),
         "the peer's reason reaches the start error: " .. tostring(err))
  hn.log("cuda node refused by its peer: " .. err)
  return
end
if not ok then
  assert(err:find("node 'g': device 'cuda' is not available: ", 1, true) and
         (err:find("no CUDA device", 1, true) or err:find("no CUDA support", 1, true) or
          err:find("cannot load the CUDA kernels", 1, true)),
         "start names the node and why cuda is unavailable: " .. tostring(err))
  -- The refusal is checked; the training on a GPU is not: a skip, not a pass.
  print("SKIP: no usable CUDA device, the cuda node's training not run: " .. err:gsub("\n.*", ""))
  os.exit(77)
end

local st = g:stats()
assert(st.device:find("^cuda:"), "the cuda node computes on cuda: " .. tostring(st.device))
assert(c:stats().device == "cpu")
for _, n in ipairs({ g, c }) do
  n:dataset{ name = "synthetic", n = 2000, dim = 12, classes = 4, seed = 5 }
  n:dataset{ name = "synthetic", split = "test", n = 500, dim = 12, classes = 4, seed = 5 }
  n:model{ name = "m", arch = "mlp:12-10-4", seed = 2 }
end
local function same(name, tol)
  local a, b = g:read{ tensor = name }.values, c:read{ tensor = name }.values
  assert(#a == #b and #a > 0, name .. ": sizes")
  for i = 1, #a do
    assert(math.abs(a[i] - b[i]) <= tol * math.max(1, math.abs(b[i])),
           string.format("%s[%d]: cuda %.9g, cpu %.9g", name, i, a[i], b[i]))
  end
end
for step = 1, 5 do
  local lg, lc = g:grad{ model = "m", batch = 25 }.loss, c:grad{ model = "m", batch = 25 }.loss
  assert(math.abs(lg - lc) <= 1e-5 * lc, string.format("step %d: loss %.9g vs %.9g", step, lg, lc))
  g:optim{ model = "m", method = "adam", lr = 0.01 }
  c:optim{ model = "m", method = "adam", lr = 0.01 }
end
same("m", 1e-5)
-- A step on the cuda node alone, undone by the cpu node's parameters.
g:optim{ model = "m", method = "sgd", lr = 1 }
c:send{ tensor = "m", to = g, as = "m" }
same("m", 0)
local lg, lc = g:grad{ model = "m" }.loss, c:grad{ model = "m" }.loss
assert(math.abs(lg - lc) <= 1e-5 * lc, "the received parameters are used on the device")
same("grad", 1e-5)
local eg, ec = g:eval{ model = "m" }, c:eval{ model = "m" }
assert(math.abs(eg.accuracy - ec.accuracy) <= 2 / 500, "accuracy")
-- cnn:lenet trains on the cuda node as on the cpu node.
for _, n in ipairs({ g, c }) do
  n:dataset{ name = "synthetic", n = 200, dim = 784, classes = 10, seed = 8 }
  n:dataset{ name = "synthetic", split = "test", n = 100, dim = 784, classes = 10, seed = 8 }
  n:model{ name = "cnn", arch = "cnn:lenet", seed = 4 }
end
for step = 1, 3 do
  local lg, lc = g:grad{ model = "cnn", batch = 16, out = "cg" }.loss, c:grad{ model = "cnn", batch = 16, out = "cg" }.loss
  assert(math.abs(lg - lc) <= 1e-5 * lc, string.format("lenet step %d: loss %.9g vs %.9g", step, lg, lc))
  g:optim{ model = "cnn", grad = "cg", method = "sgd", lr = 0.05 }
  c:optim{ model = "cnn", grad = "cg", method = "sgd", lr = 0.05 }
end
same("cnn", 1e-5)
local lg2, lc2 = g:eval{ model = "cnn" }, c:eval{ model = "cnn" }
assert(math.abs(lg2.accuracy - lc2.accuracy) <= 1.5 / 100, "lenet accuracy")
hn.log(string.format("cuda node on %s agrees with the cpu node (%d uploads)", st.device, g:stats().device_uploads))
net:stop()
