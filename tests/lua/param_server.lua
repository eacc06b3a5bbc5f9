-- Parameter-server rounds on the none backend through the peer primitives:
-- a server broadcasts its model to two workers (to = {node, node}); each
-- worker computes a gradient and adds it into the server's accumulator in
-- one batch; the server waits for both arrivals, averages and steps. Then
-- the same with the parameters sharded over two servers (optim{tensor=},
-- send{range=, at=}). The accumulators are made new in the batch that
-- sends the model (never before), w2 computes at 1/20 of the speed.
-- Checks exact staleness (grad reports the version of the model it read,
-- equal to the server's), the arrivals, the sums against the workers'
-- gradients (element by element), a background eval next to training,
-- seeded random fills agreeing across peers, and the errors of wait and
-- batch.
local hn = require("hiernet")
local net = hn.network{ name = "ps", backend = "none" }
local server, s2 = net:node("server"), net:node("s2")
-- w2 computes at 1/20 of the speed: its gradient lands well after w1's
local workers = { net:node("w1"), net:node("w2", { speed = 0.05 }) }
net:start()

local arch, size = "logreg:16-4", 4 * 17
for _, node in ipairs({ server, s2, workers[1], workers[2] }) do
  node:dataset{ name = "synthetic", n = 512, dim = 16, classes = 4, seed = 3 }
  node:dataset{ name = "synthetic", split = "test", n = 256, dim = 16, classes = 4, seed = 3 }
end
server:model{ name = "w", arch = arch, seed = 1 }
for i, w in ipairs(workers) do
  w:dataset{ name = "synthetic", n = 512, dim = 16, classes = 4, seed = 3, shard = i, shards = 2 }
  w:model{ name = "w", arch = arch, seed = 99 }
end

-- Every element of got equals want (to float rounding).
local function check_values(got, want, what)
  for e = 1, #want do
    assert(math.abs(got[e] - want[e]) <= 1e-6 * math.max(1, math.abs(want[e])),
           string.format("%s: element %d is %.8g, want %.8g", what, e - 1, got[e], want[e]))
  end
end

-- One BSP round: returns the server's new model version. The accumulator
-- is made new in the batch that sends the model (so before any worker can
-- add into it, and not before); the server's mean must be exactly the
-- mean of the two gradients.
local function round(lr)
  local made = server:batch{ { "tensor", { name = "acc", size = size } },
                             { "send", { tensor = "w", to = workers } } }.results
  local sv, b = made[1].version, made[2]
  assert(b.transfers == 2 and b.bytes == 2 * size * 4, "broadcast to both workers")
  local pulled = b.version
  local tasks = {}
  for i, w in ipairs(workers) do
    tasks[i] = hn.spawn(function()
      local r = w:batch{
        { "grad", { model = "w", out = "g", batch = 32 } },
        { "send", { tensor = "g", to = server, as = "acc", add = true } },
      }
      return r.results[1].version
    end)
  end
  local r = server:batch{
    { "wait", { tensor = "acc", k = #workers, timeout = 30 } },
    { "scale", { x = "acc", alpha = 1 / #workers } },
    { "copy", { src = "acc", dst = "mean" } },
    { "optim", { model = "w", grad = "acc", lr = lr } },
  }
  local seen = {}
  for _, from in ipairs(r.results[1].from) do seen[from] = true end
  assert(seen.w1 and seen.w2 and #r.results[1].arrived == 2, "both workers' gradients arrived")
  assert(r.results[1].versions[2] == sv + 2, "two adds into acc: version " .. sv .. " + 2")
  for i, v in ipairs(hn.wait_all(tasks)) do
    assert(v == pulled, string.format("worker %d computed on version %d, the server sent %d", i, v, pulled))
  end
  local g1, g2 = workers[1]:read{ tensor = "g" }.values, workers[2]:read{ tensor = "g" }.values
  local want = {}
  for e = 1, size do want[e] = (g1[e] + g2[e]) / 2 end
  check_values(server:read{ tensor = "mean" }.values, want, "the server's mean of the gradients")
  return r.results[4].version
end

local before = server:eval{ model = "w", split = "train" }.loss
local bg = hn.spawn(function() return server:eval{ model = "w", background = true } end)
local v = 0
for _ = 1, 20 do
  local nv = round(0.5)
  assert(nv == v + 1 or v == 0, "one optim step per round")
  v = nv
end
local evaluated = bg:wait()
assert(evaluated.version == 1 and evaluated.samples == 256, "the background eval saw the first model")
local after = server:eval{ model = "w", split = "train" }.loss
hn.log(string.format("20 BSP rounds: train loss %.4f -> %.4f", before, after))
assert(after < before, "training lowers the loss")

-- Sharded: each server holds half of the parameters; a worker's gradient
-- range goes into a shard with at = 0, the shards come back with at = offset.
local half = size // 2
local shards = { { node = server, off = 0 }, { node = s2, off = half } }
for _, sh in ipairs(shards) do
  sh.node:tensor{ name = "shard", size = half, fill = "uniform", low = -0.1, high = 0.1, seed = 5 }
end
for _ = 1, 3 do
  -- each shard's accumulator made new in the batch that sends the shard
  for _, sh in ipairs(shards) do
    sh.node:batch{ { "tensor", { name = "gacc", size = half } },
                   { "send", { tensor = "shard", to = workers, as = "w", at = sh.off } } }
  end
  local tasks = {}
  for i, w in ipairs(workers) do
    tasks[i] = hn.spawn(function()
      local cmds = { { "grad", { model = "w", out = "g", batch = 32 } } }
      for _, sh in ipairs(shards) do
        cmds[#cmds + 1] = { "send", { tensor = "g", to = sh.node, as = "gacc", range = { sh.off, half }, at = 0, add = true } }
      end
      return w:batch(cmds)
    end)
  end
  hn.wait_all(tasks)
  local g1, g2 = workers[1]:read{ tensor = "g" }.values, workers[2]:read{ tensor = "g" }.values
  for _, sh in ipairs(shards) do
    sh.node:batch{ { "wait", { tensor = "gacc", k = 2 } },
                   { "optim", { tensor = "shard", grad = "gacc", method = "momentum", lr = 0.1 } } }
    local want = {}
    for e = 1, half do want[e] = g1[sh.off + e] + g2[sh.off + e] end
    check_values(sh.node:read{ tensor = "gacc" }.values, want, sh.node.name .. "'s sum of the gradient ranges")
  end
end
local st = server:optim{ tensor = "shard", grad = "gacc", lr = 0.1 }
assert(st.steps == 4, "optim state kept per tensor: step " .. st.steps)
-- A pull puts each server's shard at its offset of the workers' models.
for _, sh in ipairs(shards) do
  sh.node:send{ tensor = "shard", to = workers, as = "w", at = sh.off }
  local theirs = sh.node:read{ tensor = "shard" }.values
  for _, w in ipairs(workers) do
    local mine = w:read{ tensor = "w", range = { sh.off, half } }.values
    for e = 1, half do assert(mine[e] == theirs[e], "shard element " .. e) end
  end
end

-- Seeded fills agree across peers.
local a = workers[1]:tensor{ name = "rnd", size = 100, fill = "normal", seed = 42 }
workers[2]:tensor{ name = "rnd", size = 100, fill = "normal", seed = 42 }
local r1, r2 = workers[1]:read{ tensor = "rnd" }.values, workers[2]:read{ tensor = "rnd" }.values
for e = 1, 100 do assert(r1[e] == r2[e], "seeded fill differs at " .. e) end
assert(a.version >= 1)

-- Errors.
local ok, err = pcall(server.wait, server, { tensors = { "g1", "g2" }, timeout = 0.1 })
assert(not ok and err:find("node 'server': wait: timeout after 0.1 s: 0 of 2 arrivals", 1, true), err)
ok, err = pcall(server.batch, server, { { "ping" }, { "send", { tensor = "nope", to = s2 } } })
assert(not ok and err:find("node 'server': batch: command 2 (send): tensor 'nope' not found", 1, true), err)
ok, err = pcall(server.batch, server, { { "grad", { model = "w", same_batch = true, batch = 3 } } })
assert(not ok and err:find("same_batch: this peer has no previous grad", 1, true), err)
net:stop()
