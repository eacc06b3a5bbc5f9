-- Scenario half of tools/bench/soak: asynchronous parameter-server training
-- with many workers for a long time, so that a leak anywhere (controller,
-- peers, linkd) shows as growing memory. tools/bench/soak samples the RSS
-- of every process of the run from outside while this runs.
--
-- load = "ps" (default): the algorithm library's asynchronous parameter server,
--   require("hiernet.algo.ps").train{mode = "asp", ...}.
-- load = "loop": the same
--   traffic by hand: every worker in a loop computes a gradient on its
--   shard, sends it to the server, the server applies it and sends the
--   model back; every worker also makes and drops a scratch tensor, so the
--   stores' replace and free paths run too.
-- Logs "soak started" once the network is up and "soak steps N" at the end.
local hn = require("hiernet")
local backend = hn.param("backend", "user")
local workers = hn.param("workers", 16)
local seconds = hn.param("seconds", 1800.0)
local load = hn.param("load", "ps")
local model = hn.param("model", "logreg:16-4")

local net = hn.network{ name = "soak", backend = backend }
local sw = net:switch("sw")
local server = net:node("ps", { tier = "cloud" })
local w = {}
if backend ~= "none" then net:link(server, sw, { bw = "1Gbit", delay = "1ms" }) end
for i = 1, workers do
  w[i] = net:node("w" .. i, { tier = "terminal" })
  if backend ~= "none" then net:link(w[i], sw, { bw = "100Mbit", delay = "2ms" }) end
end
net:start()
hn.log("soak started")

local dataset = { name = "synthetic", n = 4000, dim = 16, classes = 4 }

local function run_ps()
  local ok, ps = pcall(require, "hiernet.algo.ps")
  assert(ok, "load=ps needs the algorithm library (hiernet.algo.ps): " .. tostring(ps))
  local summary = ps.train{ server = server, workers = w, mode = "asp", model = model,
                            dataset = dataset, batch = 32, seconds = seconds, progress = false }
  return summary.steps or summary.updates or 0
end

local function worker_loop(i, t0)
  local n = w[i]
  n:dataset{ name = dataset.name, n = dataset.n, dim = dataset.dim, classes = dataset.classes,
             shard = i, shards = workers, seed = i }
  n:model{ name = "m", arch = model }
  local steps = 0
  while hn.now() - t0 < seconds do
    steps = steps + 1
    n:grad{ model = "m", batch = 32 }
    n:send{ tensor = "grad", to = server, as = "g" .. i }
    -- Claim the arrivals as the algorithms do: unclaimed ones are kept up
    -- to a cap (65536), which would read as growth here.
    server:wait{ tensor = "g" .. i }
    server:axpy{ y = "m", x = "g" .. i, alpha = -0.01 }
    server:send{ tensor = "m", to = n }
    n:wait{ tensor = "m" }
    n:tensor{ name = "scratch", size = 1000 + steps % 1000, fill = 1 }
    n:drop{ name = "scratch" }
  end
  return steps
end

local function run_loop()
  server:model{ name = "m", arch = model }
  local t0, tasks = hn.now(), {}
  for i = 1, workers do tasks[i] = hn.spawn(worker_loop, i, t0) end
  local total = 0
  for _, s in ipairs(hn.wait_all(tasks)) do total = total + s end
  return total
end

local steps = load == "ps" and run_ps() or run_loop()
hn.log("soak steps " .. steps)
net:stop()
