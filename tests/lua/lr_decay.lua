-- allreduce's lr_decay (a step decay of the worker's rate) on real peers
-- (backend none): steps.csv records the decayed rate of every step; the
-- step after a milestone moves the model by exactly factor x the step it
-- replaces (w2 = w1 - f lr d2, d2 the gradient or the momentum's velocity,
-- so w1 = 2 w2(f = 0.5) - w2(f = 1), and w1 is the model after one step),
-- with sgd and with momentum; bad settings are refused naming the field.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net, _, workers = T.network("lrdecay", 1, { no_server = true })
local base = { workers = workers, model = T.model, dataset = T.dataset, batch = 32, seed = 3,
               worker_opt = { method = "sgd", lr = 0.1 } }
local size = hn.model_check(T.model)

-- The model after a training with options `extra` over base.
local function train(extra)
  ar.train(T.with(base, extra))
  return T.read_all(workers[1], "w", size)
end

-- Rates as recorded: 0.1 for steps 1-2, 0.05 for 3-4, 0.025 for 5.
train{ steps = 5, lr_decay = { at = { 2, 4 }, factor = 0.5 }, prefix = "rates_" }
local want = { 0.1, 0.1, 0.05, 0.05, 0.025 }
local rows = T.csv("rates_steps")
T.eq(#rows, #want, "steps.csv rows (one worker, one a step)")
for i, row in ipairs(rows) do T.eq(row.lr, want[i], "steps.csv lr of step " .. i) end

-- The second step at half the rate: w1 = 2 w_half - w_full, with plain
-- sgd (the update lr g) and with momentum (the rate goes into the optim
-- command; the velocity of step 2 does not depend on it).
local function check_half(opt, what)
  local w1 = train{ steps = 1, worker_opt = opt }
  local half = train{ steps = 2, worker_opt = opt, lr_decay = { at = { 1 }, factor = 0.5 } }
  local full = train{ steps = 2, worker_opt = opt }
  local moved = 0
  for e = 1, size do
    T.near(2 * half[e] - full[e], w1[e], 1e-5, what .. ": element " .. e .. " of the model before the decayed step")
    moved = math.max(moved, math.abs(half[e] - full[e]))
  end
  assert(moved > 1e-4, what .. ": the decayed step moved the model as the full one did")
end
check_half(base.worker_opt, "sgd")
check_half({ method = "momentum", lr = 0.05, momentum = 0.9, weight_decay = 5e-4 }, "momentum")

-- Bad settings: one line naming the field and the value.
local function refused(decay, pattern)
  T.fails(pattern, ar.train, T.with(base, { steps = 1, lr_decay = decay }))
end
refused({ at = { 3, 2 }, factor = 0.1 }, "option 'lr_decay'.at[2]: 2 is not after the step before it (3)")
refused({ at = { 0 }, factor = 0.1 }, "option 'lr_decay'.at[1]: expected a positive integer, got 0")
refused({ at = { 5 }, factor = 2 }, "option 'lr_decay'.factor: expected a number in (0, 1], got 2")
refused({ at = { 5 } }, "option 'lr_decay': give both 'at' (a list of steps) and 'factor'")
refused({ at = {}, factor = 0.1 }, "option 'lr_decay'.at: expected at least one step")
refused({ at = 5, factor = 0.1 }, "option 'lr_decay'.at: expected a list of steps, got 5")
refused({ at = { 2, x = 6 }, factor = 0.1 }, "option 'lr_decay'.at: expected a list of steps, got keys other than 1..2")
refused({ every = 5, factor = 0.1 }, "option 'lr_decay': unknown field 'every'")
net:stop()
hn.log("lr_decay: recorded rates, the decayed step exact with sgd and momentum, bad settings refused")
