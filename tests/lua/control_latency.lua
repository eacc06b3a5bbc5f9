-- The control channel's latency is not network time (issue 20 item 6): a
-- fake relay that holds one node's replies for DELAY_MS (as an agent across
-- machines does; backend none) leaves steps.csv's comm_ms of all-reduce,
-- hierarchical averaging and the parameter server where it was, and the
-- control_ms column carries the delay; for all-reduce compute + comm +
-- wait + control is the step's time on the controller, so w1's wait for
-- w2's reply is wait_ms.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local ps = require("hiernet.algo.ps")
local hier = require("hiernet.algo.hier")
local topo = require("hiernet.topo")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local DELAY_MS = 100
local STEPS = 6

local function mean(rows, col, worker)
  local s, n = 0, 0
  for _, r in ipairs(rows) do
    if r.worker == worker then s, n = s + r[col], n + 1 end
  end
  assert(n > 0, "no steps.csv rows of " .. worker)
  return s / n
end

-- Every node's batch goes through this: replies of the `delayed` node come
-- back DELAY_MS late, as through a slow relay (the peer's own time, the
-- reply's ms, is untouched). Nodes share one metatable.
local delayed
local _, _, workers = T.network("ctl_ar", 2, { no_server = true })
local mt = getmetatable(workers[1])
local index = mt.__index
local function slow_batch(node, ...)
  local reply = index(node, "batch")(node, ...)
  if node.name == delayed then hn.sleep(DELAY_MS / 1000) end
  return reply
end
mt.__index = function(node, key)
  if key == "batch" then return slow_batch end
  return index(node, key)
end

-- The steps.csv rows of train(options) run twice: plainly, then with
-- node's replies delayed. options: the common ones, with prefix name_plain_
-- and name_slow_.
local function plain_and_slow(name, node, train)
  local function run(kind)
    local prefix = name .. "_" .. kind .. "_"
    train{ model = T.model, dataset = T.dataset, batch = 32, steps = STEPS, worker_opt = { lr = 0.2 },
           prefix = prefix, eval_limit = 100, progress = false }
    return T.csv(prefix .. "steps")
  end
  local plain = run("plain")
  delayed = node
  local slow = run("slow")
  delayed = nil
  return plain, slow
end

-- ---- all-reduce (ring) ----
local plain, slow = plain_and_slow("ar", "w2", function(o)
  ar.train(T.with(o, { workers = workers, algo = "ring" }))
end)
T.le(mean(plain, "control_ms", "w2"), DELAY_MS / 2, "ar: control_ms of w2 without the delay")
T.le(DELAY_MS, mean(slow, "control_ms", "w2"), "ar: control_ms of w2 holds the relay's delay")
T.le(mean(slow, "control_ms", "w1"), DELAY_MS / 2, "ar: control_ms of w1 (not delayed)")
for _, w in ipairs({ "w1", "w2" }) do
  T.le(mean(slow, "comm_ms", w), mean(plain, "comm_ms", w) + DELAY_MS / 2, "ar: comm_ms of " .. w .. " with the delay")
end
-- w1 waits for w2's late reply: that is wait, not comm
T.le(DELAY_MS / 2, mean(slow, "wait_ms", "w1"), "ar: wait_ms of w1")

-- ---- hierarchical averaging ----
local net = hn.network{ name = "ctl_hier", backend = "none" }
local t = topo.hier(net, { clouds = 1, edges_per_cloud = 1, terminals_per_edge = 2 })
net:start()
local term = t.terminal[1].name
local hplain, hslow = plain_and_slow("hier", term, function(o)
  hier.train(T.with(o, { workers = t.terminal, edges = t.edge, cloud = t.cloud[1], tau1 = 1, tau2 = 2 }))
end)
T.le(DELAY_MS, mean(hslow, "control_ms", term), "hier: control_ms of the delayed terminal")
T.le(mean(hslow, "comm_ms", term), mean(hplain, "comm_ms", term) + DELAY_MS / 2, "hier: comm_ms with the delay")
T.le(mean(hslow, "wait_ms", term), mean(hplain, "wait_ms", term) + DELAY_MS / 2, "hier: wait_ms with the delay")

-- ---- parameter server (BSP) ----
local _, server, pworkers = T.network("ctl_ps", 2)
local pplain, pslow = plain_and_slow("ps", "w2", function(o)
  ps.train(T.with(o, { server = server, workers = pworkers, mode = "bsp" }))
end)
T.le(DELAY_MS, mean(pslow, "control_ms", "w2"), "ps: control_ms of w2 holds the relay's delay")
T.le(mean(pslow, "comm_ms", "w2"), mean(pplain, "comm_ms", "w2") + DELAY_MS / 2, "ps: comm_ms of w2 with the delay")
print("control_latency: ok")
