-- The model zoo and the device profiles from Lua (docs/lua-api.md):
--   hn.zoo(name)        a zoo model's table, a model spec's (real = true, the
--                       parameter count hn.model_check gives), nil and a
--                       message listing the zoo for an unknown name
--   hn.zoo()            every zoo model, as `hiernet models` lists them
--   hn.profiles()       the built-in profile names, sorted
--   hn.profile(name)    rates, bandwidth, measured steps; nil and why
--   hn.profile_grad_seconds(profile, model, batch)
--                       the measured step where the profile has it, the
--                       FLOP sum otherwise
local hn = require("hiernet")

local function eq(got, want, what)
  if got ~= want then error(string.format("%s: got %s, want %s", what, tostring(got), tostring(want)), 2) end
end

local r50 = assert(hn.zoo("resnet50"))
eq(r50.name, "resnet50", "name")
eq(r50.family, "resnet", "family")
eq(r50.input, "3x224x224", "input")
eq(r50.params, 25557032, "resnet50 parameters (torchvision)")
eq(r50.grad_bytes, 4 * 25557032, "float32 gradient bytes")
eq(r50.real, false, "resnet50 is not computed by hiernet")
assert(r50.buffers > 0, "batch-norm running statistics counted apart")
local fwd = 0
for _, flops in pairs(r50.forward) do fwd = fwd + flops end
eq(fwd, r50.forward_flops, "forward_flops is the sum of forward by op kind")
assert(r50.forward.conv > 0 and r50.forward.dense > 0 and r50.forward.attention == nil,
       "only the op kinds ResNet-50 has")
assert(r50.grad_flops > 2.9 * r50.forward_flops, "grad = forward + backward")

local mlp = assert(hn.zoo("mlp:784-128-10"))
eq(mlp.real, true, "a model spec is real")
eq(mlp.params, hn.model_check("mlp:784-128-10"), "a spec's parameters as model_check")

local none, err = hn.zoo("resnet51")
eq(none, nil, "unknown model")
assert(err:find('"resnet51"', 1, true) and err:find("gpt2-small", 1, true), err)

local all = hn.zoo()
assert(#all >= 9, "the zoo lists its models")
local names = {}
for _, m in ipairs(all) do names[m.name] = m.params end
eq(names["gpt2-small"], 124439808, "GPT-2 small in the list")
eq(names["vgg16"], 138357544, "VGG16 in the list")

local profiles = hn.profiles()
local seen = {}
for i, name in ipairs(profiles) do
  seen[name] = true
  if i > 1 then assert(profiles[i - 1] < name, "profiles sorted") end
end
for _, want in ipairs{ "i5-7500", "rtx2080ti", "v100", "a100", "h100", "h200", "rpi4", "jetson-nano" } do
  assert(seen[want], "built-in profile " .. want)
end
-- h200's steps were measured (profiles/h200.profile): resnet50 at 32 is one.
local h200 = assert(hn.profile("h200"))
local measured = {}
for _, m in ipairs(h200.measured) do measured[m.model .. "@" .. m.batch] = m.seconds end
eq(#h200.measured, 9, "h200's measured steps")
eq(measured["resnet50@32"], 0.0379, "h200 resnet50 at 32")

local gpu = assert(hn.profile("rtx2080ti"))
eq(gpu.name, "rtx2080ti", "profile name")
assert(gpu.about:find("2080 Ti", 1, true), gpu.about)
assert(gpu.rates.conv > 0 and gpu.rates.embedding > 0 and gpu.bandwidth > 0, "rates")
eq(gpu.measured[1].model, "resnet50", "measured model")
eq(gpu.measured[1].batch, 32, "measured batch")
eq(gpu.measured[1].seconds, 0.86, "measured seconds (the paper's Table 4 Cp)")

local s, basis = hn.profile_grad_seconds("rtx2080ti", "resnet50", 32)
eq(s, 0.86, "measured step")
eq(basis, "measured", "basis")
s, basis = hn.profile_grad_seconds("rtx2080ti", "resnet50", 16)
eq(basis, "flops", "no measured step at batch 16")
local want = 0
for op, flops in pairs(r50.forward) do want = want + (flops + (r50.backward[op] or 0)) * 16 / gpu.rates[op] end
assert(math.abs(s - want) <= 1e-12 * want, string.format("flops step %.17g vs %.17g", s, want))

none, err = hn.profile("rtx3090")
eq(none, nil, "unknown profile")
assert(err:find('"rtx3090"', 1, true) and err:find("rtx2080ti", 1, true), err)
none, err = hn.profile_grad_seconds("rtx2080ti", "resnet51", 32)
eq(none, nil, "unknown model in profile_grad_seconds")
assert(not pcall(hn.profile_grad_seconds, "rtx2080ti", "resnet50", 0), "batch 0 refused")
