-- Scenario half of tools/bench/train: one peer trains a model on the whole
-- Fashion-MNIST training set through peer commands (dataset, model, grad,
-- optim, eval) and reports the time to a target test accuracy.
-- Prints "accuracy seconds_to_target epochs" (seconds -1 when never reached).
local hn = require("hiernet")
local arch = hn.param("arch", "mlp:784-256-128-10")
local target = hn.param("target", 0.88)
local epochs = hn.param("epochs", 10)
local batch = hn.param("batch", 64)
local method = hn.param("method", "momentum")
local lr = hn.param("lr", 0.02)

local net = hn.network{ name = "train", backend = "none" }
local n = net:node("trainer")
net:start()
local train = n:dataset{ name = "fashion-mnist", split = "train", seed = 1 }
n:dataset{ name = "fashion-mnist", split = "test" }
n:model{ name = "w", arch = arch, seed = 1 }
local steps_per_epoch = train.samples // batch
local t0, reached, acc = hn.now(), -1, 0
for epoch = 1, epochs do
  for _ = 1, steps_per_epoch do
    n:grad{ model = "w", batch = batch, out = "g" }
    n:optim{ model = "w", grad = "g", method = method, lr = lr }
  end
  acc = n:eval{ model = "w", split = "test" }.accuracy
  hn.log(string.format("%s epoch %d: test accuracy %.4f at %.1f s", arch, epoch, acc, hn.now() - t0))
  if acc >= target and reached < 0 then reached = hn.now() - t0 end
  if reached >= 0 then break end
end
print(string.format("%.4f %.2f %d", acc, reached, epochs))
net:stop()
