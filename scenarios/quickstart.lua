-- quickstart: a four-node terminal / edge / cloud network. Every terminal
-- and the edge compute a local update, the controller gathers their norms,
-- and the cloud scales its model by what it is told, all through peer commands.
--
--   tools/run scenarios/quickstart.lua [--set size=100000] [--set rounds=3]
--   tools/run scenarios/quickstart.lua --set backend=auto   (as root: emulated links)
--
-- On the default "none" backend the links below are recorded, not emulated,
-- and nothing needs privileges.
local hn = require("hiernet")

local size = hn.param("size", 100000)   -- elements per tensor
local rounds = hn.param("rounds", 3)

local net = hn.network{ name = "quickstart", backend = hn.param("backend", "none"), seed = 1 }
local cloud = net:node("cloud", { tier = "cloud" })
local edge = net:node("edge", { tier = "edge" })
local t1 = net:node("t1", { tier = "terminal" })
local t2 = net:node("t2", { tier = "terminal" })
local workers = { edge, t1, t2 }
net:link(cloud, edge, { bw = "1Gbit", delay = "10ms" })
net:link(edge, t1, { bw = "20Mbit", delay = "5ms" })
net:link(edge, t2, { bw = "20Mbit", delay = "5ms" })
net:start()

hn.log(string.format("network up: %d nodes, cloud at %s, path t1 -> cloud: %s", #net:nodes(),
                     cloud.addr, table.concat(net:route(t1, cloud), " -> ")))
local rec = hn.record("rounds", { "round", "node", "norm", "ms" })

-- Every worker holds a model "w" and computes an "update" from it.
cloud:tensor{ name = "w", size = size, fill = 1.0 }
for i, n in ipairs(workers) do
  n:tensor{ name = "w", size = size, fill = 1.0 }
  n:tensor{ name = "noise", size = size, fill = 0.01 * i }
end

for round = 1, rounds do
  -- Workers compute concurrently, each in its own task.
  local tasks = {}
  for i, n in ipairs(workers) do
    tasks[i] = hn.spawn(function()
      n:copy{ src = "w", dst = "update" }
      n:axpy{ y = "update", x = "noise", alpha = round }
      local r = n:norm{ x = "update" }
      rec:add{ round = round, node = n.name, norm = r.value, ms = r.ms }
      return r.value
    end)
  end
  local norms = hn.wait_all(tasks)
  -- The controller combines the scalars and tells the cloud what to apply.
  local mean = 0
  for _, v in ipairs(norms) do mean = mean + v / #norms end
  cloud:scale{ x = "w", alpha = mean / math.sqrt(size) }
  local cloud_norm = cloud:norm{ x = "w" }.value
  hn.progress{ round = round, mean_norm = string.format("%.3f", mean),
               cloud_norm = string.format("%.3f", cloud_norm) }
end

local first = cloud:read{ tensor = "w", range = { 0, 4 } }.values
local stats = cloud:stats()
print(string.format("quickstart: %d rounds on %d nodes; cloud w[0..3] = %.4f %.4f %.4f %.4f; "
                    .. "cloud holds %d tensors (%d bytes)", rounds, #net:nodes(),
                    first[1], first[2], first[3], first[4], stats.tensors, stats.tensor_bytes))
net:stop()
