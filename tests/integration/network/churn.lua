-- churn: net:churn on an emulated backend. Asserts:
--   * how = "partition": while the churn holds a node down, it reaches no
--     host and no host reaches it (ping both ways), the others still talk;
--     its heal is its own (net:heal(a, b)): a partition the scenario made
--     stays in place through it, and the plain net:heal() removes that one;
--   * an SSP training goes on under a partition churn and under a kill
--     churn of two workers (exponential on/off, seeded), stops on its time
--     bound and reports availability (1 for the workers never churned,
--     below 1 where churn.csv shows the worker down within the training)
--     and updates lost (none under partitions, which lose no peer state).
-- The network checks wait on the handle's counters, not on fixed times.
-- Args: backend=user|kernel; owned=, regdir= from lib.sh.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local link = { bw = "100Mbit" }
if A.backend ~= "kernel" then link.delay = "1ms" end -- no netem: the kernel backend shapes rate only
local net = hn.network{ name = "churn", backend = A.backend or "user", seed = 3 }
local server, _, w = H.star(net, 4, link, link) -- server "ps", workers w1..w4 on switch "s"
net:start()
H.own(net)

local LIVENESS_S = 30
local function wait_for(what, cond)
  local t0 = hn.now()
  while not cond() do
    H.check(hn.now() - t0 < LIVENESS_S, "%s: not within %d s", what, LIVENESS_S)
    hn.sleep(0.01)
  end
end

-- ---- the network's side ----
net:partition({ w[4] }, { w[1] }) -- the scenario's own cut, which the churn must keep
local path = hn.results_dir() .. "/avail.csv"
local f = assert(io.open(path, "w"))
f:write("node,t_down,t_up\nw1,0.2,1.2\n")
f:close()
local h = net:churn{ nodes = { w[1] }, file = path, how = "partition" }
wait_for("w1 down", function() return h.downs == 1 end)
local t_down = hn.now() - h.t0
H.check(not H.ping_ok(w[1], server, 1), "w1 reaches the server while down")
H.check(not H.ping_ok(server, w[1], 1), "the server reaches w1 while down")
H.check(not net:reachable(w[2], w[1]), "net:reachable(w2, w1) while w1 is down")
H.check(H.ping_ok(w[2], server), "w2 cannot reach the server while w1 is down")
-- the pings above are quick (blackholes refuse at once): still within the down time
H.check(hn.now() - h.t0 < 1.2 and t_down >= 0.2, "the down checks ran at %.3f s of the schedule", hn.now() - h.t0)
wait_for("w1 up", function() return h.ups == 1 end)
H.check(H.ping_ok(w[1], server) and H.ping_ok(server, w[1]), "w1 is back")
H.check(not H.ping_ok(w[4], w[1], 1), "the scenario's cut w4 | w1 went with the churn's heal")
H.check(H.ping_ok(w[4], server), "w4 reaches the server")
h:stop()
H.check(net:heal() == 1, "net:heal() healed the scenario's cut")
H.check(H.ping_ok(w[4], w[1]), "w4 reaches w1 after net:heal()")

-- ---- the algorithms' side ----
local data = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600 }
local function train(how, seed)
  local prefix = how .. "_"
  local handle
  local s = ps.train{ server = server, mode = "ssp", staleness = 2, workers = w, model = "mlp:16-32-4",
    dataset = data, batch = 32, seconds = 3, worker_opt = { lr = 0.2 }, eval_every = 10,
    prefix = prefix, progress = false,
    at_start = function()
      handle = net:churn{ nodes = { w[2], w[3] }, how = how,
                          model = { up_mean_s = 0.5, down_mean_s = 0.3, seed = seed } }
    end }
  handle:stop()
  H.check(s.stop_reason == "seconds", "%s: stop reason %s", how, tostring(s.stop_reason))
  for _, i in ipairs{ 1, 4 } do
    H.check(s.availability_workers["w" .. i] == 1, "%s: w%d's availability %s", how, i,
            tostring(s.availability_workers["w" .. i]))
  end
  -- a worker churn.csv shows down early in the training was away (w1: the first churn)
  local early = {}
  for _, r in ipairs(require("hiernet.experiment").read_csv("churn")) do
    if r.how == how and r.event == "down" and tonumber(r.t_s) < 2 and r.node ~= "w1" then early[r.node] = true end
  end
  H.check(next(early) ~= nil, "%s: seed %d downs no worker within 2 s (pick another seed)", how, seed)
  for name in pairs(early) do
    H.check(s.availability_workers[name] < 1, "%s: %s was down, availability %s", how, name,
            tostring(s.availability_workers[name]))
  end
  H.check(s.availability < 1, "%s: mean availability %s", how, tostring(s.availability))
  if how == "partition" then H.check(s.updates_lost == 0, "partition: updates lost %d", s.updates_lost) end
  if how == "kill" then H.check(s.updates_lost >= 1, "kill: no update lost") end
  H.log("%s churn: availability %.3f, updates lost %d, downs %d", how, s.availability, s.updates_lost,
        handle.downs)
end
train("partition", 11)
train("kill", 12)
net:stop()
