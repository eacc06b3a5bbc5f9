-- faults: partitions, heals, kills and restarts as experiment features, and
-- how the algorithms react. Asserts:
--   * net:partition cuts the two groups apart (ping fails both ways) while
--     other traffic flows; partitions add up; net:heal restores every route;
--     net:reachable follows; the events reach net:on listeners in order;
--     misuse names the network and the value;
--   * ASP goes on while a worker is cut off and while another is killed,
--     and takes both back (after the heal, after the restart);
--   * BSP with on_failure = "fail" stops with an error naming the cut-off
--     worker; with "drop" it goes on and takes it back;
--   * ring all-reduce training with "drop" ends with every worker holding
--     the same model; gossip and hierarchical averaging go on.
-- Args: backend=user|kernel; owned=, regdir= from lib.sh.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local dc = require("hiernet.algo.decentral")
local hier = require("hiernet.algo.hier")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local link = { bw = "100Mbit" }
if A.backend ~= "kernel" then link.delay = "1ms" end -- no netem here: the kernel backend shapes rate only
local net = hn.network{ name = "faults", backend = A.backend or "user", seed = 5 }
local sw = net:switch("sw")
local server = net:node("server", { tier = "cloud" })
net:link(sw, server, link)
local w = {}
for i = 1, 4 do
  w[i] = net:node("w" .. i, { tier = "terminal" })
  net:link(sw, w[i], link)
end
net:start()
H.own(net)

-- ---- the network's side ----
local events = {}
for _, e in ipairs{ "partition", "heal", "kill", "restart" } do
  net:on(e, function(_, a, b)
    events[#events + 1] = e .. (type(a) == "table" and ("," .. #a .. "," .. #b) or (a and ("," .. a.name) or ""))
  end)
end
H.check(H.ping_ok(w[1], w[2]) and H.ping_ok(w[2], server), "pings before the partition")
net:partition({ w[1], w[2] }, { server })
H.check(not H.ping_ok(w[1], server, 1) and not H.ping_ok(server, w[2], 1), "the groups are cut apart")
H.check(H.ping_ok(w[1], w[2]) and H.ping_ok(w[3], server), "other traffic flows")
net:partition({ w[3] }, { w[4] })
net:partition({ w[1] }, { server }) -- overlaps the first: the heal removes that cut once
H.check(not H.ping_ok(w[3], w[4], 1) and not H.ping_ok(w[1], server, 1), "partitions add up")
H.check(not net:reachable(w[1], server) and not net:reachable(w[4], "w3") and net:reachable(w[1], w[3]),
        "reachable follows the partitions")
net:heal()
H.check(H.ping_ok(w[1], server) and H.ping_ok(w[3], w[4]), "heal restores every route")
w[4]:kill()
H.check(not net:reachable(w[4], w[1]), "a killed node is unreachable")
w[4]:restart()
H.check(net:reachable(w[4], w[1]), "a restarted node is reachable")
hn.sleep(0.05)
H.check(table.concat(events, " ") == "partition,2,1 partition,1,1 partition,1,1 heal kill,w4 restart,w4",
        "events in order: %s", table.concat(events, " "))
local ok, err = pcall(net.partition, net, { w[1] }, { "sw" })
H.check(not ok and err:find("entry 1 (sw) is not a host", 1, true), "a switch in a group: %s", tostring(err))
ok, err = pcall(net.partition, net, { w[1] }, { w[1] })
H.check(not ok and err:find("node 'w1' is in both groups", 1, true), "one node in both: %s", tostring(err))
ok, err = pcall(net.on, net, "reboot", print)
H.check(not ok and err:find("invalid option 'reboot'", 1, true), "unknown event: %s", tostring(err))

-- ---- the algorithms' side ----
local data = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600 }
local function common(prefix, extra)
  local o = { workers = w, model = "mlp:16-32-4", dataset = data, batch = 32, seconds = 4,
              worker_opt = { lr = 0.2 }, eval_every = 10, prefix = prefix, progress = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Faults while a training runs: a partition 1 s in, a kill 0.5 s later, the
-- heal 1 s later, the restart 0.5 s after that, timed from the start of the
-- training (its at_start option), not of its set-up. The times of each (on
-- the run's clock) go into `at`, to be set against steps.csv's training
-- times. sch.wait() returns once the schedule has run (at most 10 s).
local function schedule(cut_from, cut_to)
  local at = {}
  local sch = {}
  function sch.start()
    hn.sleep(1.0); net:partition(cut_from, cut_to); at.cut = hn.now()
    hn.sleep(0.5); w[3]:kill(); at.kill = hn.now()
    hn.sleep(1.0); net:heal(); at.heal = hn.now()
    hn.sleep(0.5); w[3]:restart(); at.restart = hn.now()
    at.done = true
  end
  function sch.wait()
    local t0 = hn.now()
    while not at.done do
      assert(hn.now() - t0 < 10, "the fault schedule did not run (the training never started?)")
      hn.sleep(0.05)
    end
  end
  return sch, at
end

-- The fault times on a training's clock (steps.csv's time column).
local function on_clock(at, s)
  local c = {}
  for k, v in pairs(at) do if type(v) == "number" then c[k] = v - s.start_s end end
  return c
end

-- Rows of steps.csv by worker: {times}.
local function rows_by_worker(prefix)
  local by = {}
  for _, r in ipairs(require("hiernet.experiment").read_csv(prefix .. "steps")) do
    by[r.worker] = by[r.worker] or {}
    table.insert(by[r.worker], r.time)
  end
  return by
end

local function count_between(times, a, b)
  local n = 0
  for _, t in ipairs(times or {}) do if t > a and t < b then n = n + 1 end end
  return n
end

local f, at = schedule({ w[2] }, { server })
local s = ps.train(common("asp_", { server = server, mode = "asp", at_start = f.start }))
f.wait()
local c = on_clock(at, s)
local by = rows_by_worker("asp_")
-- A row is written when a step's push is taken: allow the step in flight.
H.check(count_between(by.w1, c.kill + 0.1, c.heal) > 5, "asp: w1 trains while w2 is cut off and w3 is dead")
H.check(count_between(by.w2, c.cut + 0.3, c.heal) == 0, "asp: w2 makes no step while cut off")
H.check(count_between(by.w2, c.heal + 0.2, 4) > 0, "asp: w2 is back after the heal")
H.check(count_between(by.w3, c.kill + 0.3, c.restart) == 0 and count_between(by.w3, c.restart + 0.2, 4) > 0,
        "asp: w3 is back after its restart")
H.check(s.workers_alive == 4 and s.final_loss < s.initial_loss, "asp: all back, learned")

f = schedule({ w[2] }, { server })
ok, err = pcall(ps.train, common("bsp_fail_", { server = server, mode = "bsp", at_start = f.start }))
f.wait()
H.check(not ok and tostring(err):find("worker w2 is cut off from server (partition)", 1, true),
        "bsp fails naming the node: %s", tostring(err))

f, at = schedule({ w[2] }, { server })
s = ps.train(common("bsp_drop_", { server = server, mode = "bsp", on_failure = "drop", at_start = f.start }))
f.wait()
c = on_clock(at, s)
by = rows_by_worker("bsp_drop_")
H.check(count_between(by.w1, c.kill + 0.1, c.heal) > 3 and count_between(by.w2, c.heal + 0.2, 4) > 0,
        "bsp drop: goes on without w2, takes it back")

f = schedule({ w[2] }, { w[1], w[3], w[4], server })
s = ar.train(common("ring_", { algo = "ring", on_failure = "drop", at_start = f.start }))
f.wait()
local ref = w[1]:norm{ x = "w" }.value
for i = 2, 4 do
  H.check(math.abs(w[i]:norm{ x = "w" }.value - ref) < 1e-4, "ring drop: worker %d holds the same model", i)
end
H.check(s.steps > 20, "ring drop: trains through the faults (%d steps)", s.steps)

f, at = schedule({ w[2] }, { w[1], w[3], w[4], server })
s = dc.train(common("gossip_", { algo = "gossip", graph = "complete", at_start = f.start }))
f.wait()
c = on_clock(at, s)
by = rows_by_worker("gossip_")
H.check(count_between(by.w1, c.kill + 0.1, c.heal) > 5 and s.final_loss < s.initial_loss, "gossip goes on")

net:stop()
H.log("faults ok")

-- Hierarchical averaging on a 3-tier network of its own.
local net2 = hn.network{ name = "faults2", backend = A.backend or "user", seed = 6 }
local t = topo.hier(net2, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2,
                            links = { cloud_edge = link, edge_terminal = link } })
net2:start()
H.own(net2)
local hat = {}
local function hier_faults() -- on the training's clock (at_start)
  hn.sleep(1.3); net2:partition({ t.terminal[2] }, { t.edge[1] }); hat.cut = hn.now()
  hn.sleep(1.0); net2:heal(); hat.heal = hn.now()
end
s = hier.train{ cloud = t.cloud[1], workers = t.terminal, tau1 = 2, tau2 = 2, model = "mlp:16-32-4",
                dataset = data, batch = 32, seconds = 4, worker_opt = { lr = 0.2 }, prefix = "hier_",
                progress = false, at_start = hier_faults }
H.check(hat.heal ~= nil, "hier: the fault schedule ran within the training")
c = on_clock(hat, s)
by = rows_by_worker("hier_")
H.check(count_between(by.t1, c.cut + 0.1, c.heal) > 3 and count_between(by.t2, c.cut + 0.2, c.heal) == 0 and
        count_between(by.t2, c.heal + 0.2, 4) > 0, "hier: goes on without the cut-off terminal, takes it back")
net2:stop()
H.log("hier faults ok")
