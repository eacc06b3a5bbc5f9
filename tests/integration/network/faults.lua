-- faults: partitions, heals, kills and restarts as experiment features, and
-- how the algorithms react. Asserts:
--   * net:partition cuts the two groups apart (ping fails both ways) while
--     other traffic flows; partitions add up; net:heal restores every route;
--     net:reachable follows; the events reach net:on listeners in order;
--     misuse names the network and the value;
--   * a transfer a partition held up and an abort (either end's) cut never
--     lands after the heal (no arrival, the tensor unchanged);
--   * net:reachable turns true only once a heal's routes are back (a send
--     on a new connection gets through as soon as it says so);
--   * ASP goes on while a worker is cut off and while another is killed,
--     and takes both back (after the heal, after the restart);
--   * BSP with on_failure = "fail" stops with an error naming the cut-off
--     worker; with "drop" it goes on and takes it back;
--   * ring all-reduce training with "drop" ends with every worker holding
--     the same model; gossip and hierarchical averaging go on.
-- The faults during trainings are set off by the trainings' progress (step
-- counts through at_start's clock), not at fixed times.
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

-- A bound only, on every wait for progress: the schedules below stop the
-- trainings that go on.
local LIVENESS_S = 30

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

-- A transfer that a partition holds up and an abort cuts never lands: its
-- bytes stay in the sender's socket, and TCP would deliver them once the
-- heal comes (after its backoff), when an algorithm has cleared the
-- arrivals and gone on (the ring's stale rendezvous token made w2's model
-- differ from the others'). Either end's abort alone stops it: the
-- sender's resets its connection, the receiver's closes its end. An add of
-- ones into ones: b's tensor must stay all ones, and no arrival come.
local function held_up_send(abort_sender, abort_receiver, what)
  local a, b, size = w[1], w[2], 700
  a:tensor{ name = "held", size = size, fill = 1 }
  a:send{ tensor = "held", to = b } -- the connection a -> b is open
  b:wait{ tensor = "held", clear = true }
  net:partition({ a }, { b })
  local sent, t0 = a:stats().bytes_sent, hn.now()
  local send = hn.spawn(function() return pcall(a.send, a, { tensor = "held", to = b, add = true }) end)
  while a:stats().bytes_sent < sent + 4 * size do -- in a's socket, retransmitted into the cut
    H.check(hn.now() - t0 < LIVENESS_S, "%s: a did not write the send within %d s", what, LIVENESS_S)
    hn.sleep(0.01)
  end
  hn.sleep(0.05)
  if abort_sender then
    H.check(a:abort{ nodes = { b } }.connections_closed == 1, "%s: a's abort closes its connection", what)
  end
  if abort_receiver then
    H.check(b:abort{ nodes = { a } }.connections_closed == 1, "%s: b's abort closes a's connection", what)
  end
  net:heal()
  H.check(not send:wait(), "%s: the send held up by the partition fails", what)
  b:wait{ tensor = "held", clear = true }
  -- TCP's retransmissions come 0.2 and 0.6 s after the send (its minimum
  -- timeout, then doubled): one of them is within 1 s of the heal
  local landed = pcall(b.wait, b, { tensor = "held", timeout = 1 })
  H.check(not landed, "%s: the aborted transfer landed after the heal", what)
  local norm = b:norm{ x = "held" }.value
  H.check(math.abs(norm - math.sqrt(size)) < 1e-3, "%s: b's tensor changed after the abort: norm %g", what, norm)
end
held_up_send(false, true, "receiver's abort")
held_up_send(true, false, "sender's abort")

-- net:reachable says true only once a heal's routes are back: before, a
-- new connection across the cut fails at once (a blackhole route), and an
-- algorithm that reads two nodes as reachable must reach them (gossip
-- pushed to a neighbour as a heal began, and took the failure for a fault
-- of its own). w3 has never sent w4 a tensor: its send connects anew.
net:partition({ w[3] }, { w[4] })
w[3]:tensor{ name = "probe", size = 4 }
local probe = hn.spawn(function()
  while not net:reachable(w[3], w[4]) do hn.sleep(0.001) end
  return pcall(w[3].send, w[3], { tensor = "probe", to = w[4] })
end)
net:heal()
local reached, why = probe:wait()
H.check(reached, "a send as soon as net:reachable says so: %s", tostring(why))

-- ---- the algorithms' side ----
local data = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600 }
local function common(prefix, extra)
  local o = { workers = w, model = "mlp:16-32-4", dataset = data, batch = 32, seconds = 3 * LIVENESS_S,
              worker_opt = { lr = 0.2 }, eval_every = 10, prefix = prefix, progress = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Faults while a training runs, set off by its progress (at_start's clock:
-- steps.csv rows so far), never at fixed times, which 2 shared cores
-- stretch past the training's end: cut_from is cut off from cut_to after
-- w2's third step, w3 is killed once w1 has made 5 more; w2's and w3's
-- counts are taken after w1's next 5 (a step in flight at the cut or the
-- kill is in by then) and again after 5 more (`at`: they must not move);
-- then the heal, and the workers in `back` must make 3 steps each (w3
-- after its restart); then the schedule stops the training (`seconds` is
-- only a bound). A training that ends first (BSP failing at the cut)
-- ends the waits; the heal and the restart still come. sch.wait() returns
-- once the schedule has run; at.err is its error, if any.
local function wait_steps(clock, name, n, what)
  local from = clock.steps_of(name)
  return H.wait_until(clock, function() return clock.steps_of(name) >= from + n end, what, LIVENESS_S)
end

local function schedule(cut_from, cut_to, back)
  local at, sch = {}, {}
  local function run(clock)
    local on = wait_steps(clock, "w2", 3, "w2's first steps")
    net:partition(cut_from, cut_to)
    on = on and wait_steps(clock, "w1", 5, "w1 after the cut")
    w[3]:kill()
    on = on and wait_steps(clock, "w1", 5, "w1 while w2 is cut off and w3 is dead")
    at.w2, at.w3 = clock.steps_of("w2"), clock.steps_of("w3")
    on = on and wait_steps(clock, "w1", 5, "w1 while w2 is cut off and w3 is dead")
    at.w2_moved, at.w3_moved = clock.steps_of("w2") - at.w2, clock.steps_of("w3") - at.w3
    net:heal()
    for _, name in ipairs(back or {}) do
      if name == "w3" then w[3]:restart(); at.restarted = true end
      on = on and wait_steps(clock, name, 3, name .. " after the heal and the restart")
    end
    if not at.restarted then w[3]:restart(); at.restarted = true end
    at.went_on = on
  end
  function sch.start(clock)
    local ok, err = pcall(run, clock)
    if not ok then
      at.err = tostring(err)
      net:heal()
      if not at.restarted then pcall(w[3].restart, w[3]) end
    end
    at.done = true
    clock.stop("schedule done")
  end
  function sch.wait()
    local t0 = hn.now()
    while not at.done do
      H.check(hn.now() - t0 < 3 * LIVENESS_S, "the fault schedule did not run (the training never started?)")
      hn.sleep(0.05)
    end
    H.check(not at.err, "fault schedule: %s", tostring(at.err))
  end
  return sch, at
end

-- The schedule ran through (went_on), w3 made no step while dead and
-- (w2_stops: where a step needs the server) w2 none while cut off, exactly.
local function went_on(what, at, w2_stops)
  H.check(at.went_on, "%s: the training ended before the schedule did", what)
  H.check(not w2_stops or at.w2_moved == 0, "%s: w2 made %d steps while cut off", what, at.w2_moved)
  H.check(at.w3_moved == 0, "%s: w3 made %d steps while dead", what, at.w3_moved)
end

local f, at = schedule({ w[2] }, { server }, { "w2", "w3" })
local s = ps.train(common("asp_", { server = server, mode = "asp", at_start = f.start }))
f.wait()
went_on("asp", at, true)
H.check(s.stop_reason == "schedule done", "asp: stop reason %s", tostring(s.stop_reason))
H.check(s.workers_alive == 4 and s.final_loss < s.initial_loss, "asp: all back, learned")

-- BSP with "fail": the cut after w2's third step must end the training
-- (nothing else happens meanwhile: no kill that could end it instead).
local failed = {}
local function cut_until_failed(clock)
  failed.ok, failed.err = pcall(function()
    wait_steps(clock, "w2", 3, "w2's first steps")
    net:partition({ w[2] }, { server })
    local t0 = hn.now()
    while not clock.done() do
      if hn.now() - t0 > LIVENESS_S then error("the training went on with w2 cut off", 0) end
      hn.sleep(0.01)
    end
  end)
  net:heal()
  failed.done = true
end
ok, err = pcall(ps.train, common("bsp_fail_", { server = server, mode = "bsp", at_start = cut_until_failed }))
local t0 = hn.now()
while not failed.done do
  H.check(hn.now() - t0 < 3 * LIVENESS_S, "bsp fail: the fault schedule did not run: %s", tostring(err))
  hn.sleep(0.01)
end
H.check(failed.ok, "bsp fail: the schedule: %s", tostring(failed.err))
H.check(not ok and tostring(err):find("worker w2 is cut off from server (partition)", 1, true),
        "bsp fails naming the node: %s", tostring(err))

f, at = schedule({ w[2] }, { server }, { "w2" })
s = ps.train(common("bsp_drop_", { server = server, mode = "bsp", on_failure = "drop", at_start = f.start }))
f.wait()
went_on("bsp drop", at, true)

-- (w3 must train again before the end: a restarted worker gets the model
-- at the step it rejoins, and only then may the copies be compared)
f, at = schedule({ w[2] }, { w[1], w[3], w[4], server }, { "w3" })
s = ar.train(common("ring_", { algo = "ring", on_failure = "drop", at_start = f.start }))
f.wait()
went_on("ring drop", at, true) -- trains through the faults
local ref = w[1]:norm{ x = "w" }.value
for i = 2, 4 do
  H.check(math.abs(w[i]:norm{ x = "w" }.value - ref) < 1e-4, "ring drop: worker %d holds the same model", i)
end

f, at = schedule({ w[2] }, { w[1], w[3], w[4], server }, { "w3" })
s = dc.train(common("gossip_", { algo = "gossip", graph = "complete", at_start = f.start }))
f.wait()
went_on("gossip", at)
H.check(s.final_loss < s.initial_loss, "gossip goes on")

net:stop()
H.log("faults ok")

-- Hierarchical averaging on a 3-tier network of its own.
local net2 = hn.network{ name = "faults2", backend = A.backend or "user", seed = 6 }
local t = topo.hier(net2, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2,
                            links = { cloud_edge = link, edge_terminal = link } })
net2:start()
H.own(net2)
-- On the training's progress too: t2 is cut off from its edge after its
-- third step; t2's count is taken after t1's next 5 steps and again after
-- 5 more (it must not move), then the heal, and t2 must make 3 steps.
local hat = {}
local function hier_faults(clock)
  local ok, err = pcall(function()
    local t2, on = t.terminal[2].name, wait_steps(clock, t.terminal[2].name, 3, "t2's first steps")
    net2:partition({ t.terminal[2] }, { t.edge[1] })
    on = on and wait_steps(clock, "t1", 5, "t1 while t2 is cut off")
    hat.t2 = clock.steps_of(t2)
    on = on and wait_steps(clock, "t1", 5, "t1 while t2 is cut off")
    hat.t2_moved = clock.steps_of(t2) - hat.t2
    net2:heal()
    hat.went_on = on and wait_steps(clock, t2, 3, "t2 after the heal")
  end)
  if not ok then hat.err = tostring(err); net2:heal() end
  hat.done = true
  clock.stop("schedule done")
end
s = hier.train{ cloud = t.cloud[1], workers = t.terminal, tau1 = 2, tau2 = 2, model = "mlp:16-32-4",
                dataset = data, batch = 32, seconds = 3 * LIVENESS_S, worker_opt = { lr = 0.2 }, prefix = "hier_",
                progress = false, at_start = hier_faults }
H.check(hat.done and not hat.err, "hier: the fault schedule: %s", tostring(hat.err))
H.check(hat.went_on and hat.t2_moved == 0,
        "hier: goes on without the cut-off terminal (%s steps of it while cut off), takes it back",
        tostring(hat.t2_moved))
net2:stop()
H.log("hier faults ok")
