-- resnet20: a residual CNN with batch normalisation trained on
-- Fashion-MNIST on one node: cnn:resnet20 (He et al.'s CIFAR ResNet-20 on
-- 28x28x1 input, option-A shortcuts; kernels/model.h) with SGD and
-- momentum and a step decay of the rate, to a target of 0.90 test
-- accuracy, evaluated with the batch norms' running statistics.
--
--   tools/run scenarios/resnet20.lua [--set name=value ...]
--     epochs=3       passes over the 60 000 training images (quick: 30 steps)
--     batch=128      samples per step (quick: 32)
--     lr=0.05        SGD rate, momentum 0.9, weight decay 5e-4; times 0.1
--                    after 2/3 of the steps and again after 5/6 (allreduce
--                    option lr_decay)
--     quick=false    the reduced run of the test suite: 30 steps of 32
--                    samples; the first step's loss must be the known
--                    first loss (the init and data order are seeded), the
--                    last steps' must be below it, and steps.csv must show
--                    the decayed rates
--     plots=true     plots and the report page at the end
--     device=cpu     the node's device: cuda trains on the GPU's kernels
--                    (kernels/cuda/), same model, data order and rates
--
-- Evaluations: every 100 steps on the first 2000 test images (quick: every
-- 10 on 500), and at the end on all 10 000 (quick: 1000); the full run
-- fails unless that last one is 0.90 or more. Measured in docs/cookbook.md
-- ("resnet20"): 0.9186 on the 10 000 test images after 1407 steps (0.9205
-- on the first 2000 at step 1000, the first evaluation after the first
-- decay), 44 minutes on a loaded 2-core host. The quick run's first loss
-- is 3.2260 (seed 1) and its last five steps average below 2.0.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local ex = require("hiernet.experiment")

local quick = hn.param("quick", false)
local epochs = hn.param("epochs", 3)
local batch = hn.param("batch", quick and 32 or 128)
local lr = hn.param("lr", 0.05)
local device = hn.param("device", "cpu")

local steps_total = quick and 30 or math.ceil(epochs * 60000 / batch)
-- The milestones, 2/3 and 5/6 of the steps; a short run (--set epochs or
-- batch) keeps those that are whole, distinct steps, and none below 2 steps
-- (lr_decay refuses a step 0 or a repeat, which the user never wrote).
local function step_decay(n)
  local at = {}
  for _, s in ipairs{ n * 2 // 3, n * 5 // 6 } do
    if s >= 1 and s > (at[#at] or 0) then at[#at + 1] = s end
  end
  return #at > 0 and { at = at, factor = 0.1 } or nil
end
local decay = step_decay(steps_total)

local net = hn.network{ name = "resnet20", backend = "none", seed = 1 }
local node = net:node("n1", { tier = "cloud", device = device })
net:start()

local s = ar.train{ workers = { node }, model = "cnn:resnet20", seed = 1,
                    dataset = { name = "fashion-mnist" }, batch = batch,
                    steps = quick and 30 or nil, epochs = not quick and epochs or nil,
                    worker_opt = { method = "momentum", lr = lr, momentum = 0.9, weight_decay = 5e-4 },
                    lr_decay = decay, target_accuracy = 0.90, stop_at_target = false,
                    eval_every = quick and 10 or 100, eval_limit = quick and 500 or 2000,
                    final_eval_limit = quick and 1000 or 0, progress = not quick,
                    prefix = "resnet20_" }
net:stop()

local steps = ex.read_csv("resnet20_steps")
local first_loss, tail = steps[1].loss, {}
for i = math.max(1, #steps - 4), #steps do tail[#tail + 1] = steps[i] end
local last_loss = ex.mean(tail, "loss")
hn.log(string.format("resnet20: first loss %.4f, last five steps %.4f", first_loss, last_loss))
if quick then
  -- The seeded init and data order fix the first step's loss.
  assert(math.abs(first_loss - 3.2260) < 2e-3,
         string.format("resnet20: the first loss %.4f is not the known 3.2260", first_loss))
  assert(last_loss < 2.0, string.format("resnet20: the loss did not fall (%.4f)", last_loss))
  -- steps 1-20 at lr, 21-25 at lr/10, 26-30 at lr/100 (exactly: steps.csv's %.6g)
  for _, c in ipairs{ { 20, lr }, { 21, lr * 0.1 }, { 25, lr * 0.1 }, { 26, lr * 0.01 }, { 30, lr * 0.01 } } do
    local want = tonumber(string.format("%.6g", c[2]))
    assert(steps[c[1]].lr == want,
           string.format("resnet20: step %d ran at lr %s, not the decayed %s", c[1], tostring(steps[c[1]].lr), want))
  end
else
  assert(s.final_accuracy >= 0.90,
         string.format("resnet20: final test accuracy %.4f (10 000 images) is below the target 0.90", s.final_accuracy))
end
local row = ex.row("resnet20", s, { first_loss = first_loss, last_loss = last_loss, batch = batch,
                                    steps_to_target = s.steps_to_target })
ex.table("resnet20: Fashion-MNIST on one node", { row },
         { "label", "final_accuracy", "best_accuracy", "steps_to_target", "time_to_target_s", "steps", "first_loss",
           "last_loss", "wall_s" })
ex.finish{ scenario = "resnet20", backend = net.backend, batch = batch, lr = lr, device = device,
           results = { row } }
