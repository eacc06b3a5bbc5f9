-- move: handovers (node:move) and mobility (net:mobility) on an emulated
-- backend. Asserts:
--   * before a move t1 reaches the cloud and t2 through e1; t1:move{ to =
--     e2, gap } puts its link on e2: e1 holds no route through t1 any more,
--     e2 and the cloud route to t1 through e2, pings both ways and a tensor
--     transfer (its values read back exactly) work after it, the link has
--     its new bw (l:params());
--   * a transfer in flight during the move completes, its values exact
--     (TCP retries across the gap);
--   * the interruption a 2 ms ping train sees (the longest time between two
--     replies) is the gap at least (no connectivity during it; 10% of slack
--     for the ping clock) and at most the gap + 150 ms (the move's own
--     netlink work and the route replay on a loaded 2-core host; measured
--     about 15 ms idle);
--   * net:mobility with a file moves as written; random waypoint gives
--     the moves the test draws itself from hn.rng(seed, k) (the edge among
--     the others, the dwell time), in moves.csv, the same twice.
-- Args: backend=user|kernel; owned=, regdir= from lib.sh.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local net = hn.network{ name = "move", backend = A.backend or "user", seed = 4 }
local cloud = net:node("cloud", { tier = "cloud" })
local e = {}
for i = 1, 3 do
  e[i] = net:node("e" .. i, { tier = "edge" })
  net:link(cloud, e[i], { bw = "200Mbit" })
end
local t1 = net:node("t1", { tier = "terminal" })
local t2 = net:node("t2", { tier = "terminal" })
local t3 = net:node("t3", { tier = "terminal" })
net:link(e[1], t1, { bw = "100Mbit" })
net:link(e[1], t2, { bw = "100Mbit" })
net:link(e[2], t3, { bw = "100Mbit" })
net:start()
H.own(net)

local function routes(n) return n:run({ "ip", "route" }).out end
-- Every node's next hop towards t1 runs over e2 after the move: the route
-- to t1's address leaves cloud towards e2 (ip route get).
local function next_hop(from, to)
  return from:run({ "ip", "route", "get", to.addr }).out:match("dev (%S+)")
end

local SIZE = 250000
local function transfer(name, from, to)
  from:tensor{ name = name, size = SIZE, fill = 1 }
  from:send{ tensor = name, to = to.name }
  local got = to:norm{ x = name }.value
  H.check(math.abs(got - math.sqrt(SIZE)) < 1e-3, "%s: norm %s, want %s", name, got, math.sqrt(SIZE))
end

-- ---- before ----
H.check(H.ping_ok(t1, cloud) and H.ping_ok(t1, t2) and H.ping_ok(cloud, t1), "pings before the move")
H.check(next_hop(cloud, t1) == "e1", "cloud reaches t1 via %s before", tostring(next_hop(cloud, t1)))
transfer("before", t1, cloud)

-- ---- the move, a transfer and a ping train across it ----
local GAP = 0.1
local BIG = 1000000 -- 4 MB at 100 Mbit/s: about 0.3 s, the move in its middle
t1:tensor{ name = "big", size = BIG, fill = 2 }
t1:tensor{ name = "one", size = 1, fill = 1 }
t1:send{ tensor = "one", to = "cloud" } -- the connection exists before the move
local pinger = t1:spawn({ "ping", "-n", "-D", "-i", "0.002", "-W", "1", "-c", "600", cloud.addr })
hn.sleep(0.3)
local sending = hn.spawn(function() return t1:send{ tensor = "big", to = "cloud" } end)
local took = t1:move{ to = e[2], link = { bw = "50Mbit" }, gap = GAP }
sending:wait()
H.check(math.abs(cloud:norm{ x = "big" }.value - 2 * math.sqrt(BIG)) < 1e-2, "the transfer across the move is exact")
local pst, out, perr = pinger:wait()
local stamps = {}
for ts in out:gmatch("%[([%d.]+)%] %d+ bytes from") do stamps[#stamps + 1] = tonumber(ts) end
H.check(#stamps > 100, "the ping train got %d replies (status %s): %s %s", #stamps, tostring(pst), tostring(out):sub(1, 200), tostring(perr):sub(1, 200))
local worst = 0
for i = 2, #stamps do worst = math.max(worst, stamps[i] - stamps[i - 1]) end
H.log("move: gap %.3f s, interruption seen by pings %.3f s, move call %.3f s", GAP, worst, took)
H.check(worst >= 0.9 * GAP, "interruption %.3f s shorter than the gap %.3f s", worst, GAP)
H.check(worst <= GAP + 0.15, "interruption %.3f s longer than the gap %.3f s + 0.15 s", worst, GAP)

-- ---- after ----
H.check(H.ping_ok(t1, cloud) and H.ping_ok(cloud, t1) and H.ping_ok(t1, t2) and H.ping_ok(t3, t1),
        "pings after the move")
H.check(next_hop(cloud, t1) == "e2", "cloud reaches t1 via %s after", tostring(next_hop(cloud, t1)))
H.check(next_hop(e[2], t1) ~= nil and not routes(e[1]):find("dev t1", 1, true),
        "e1 still routes through t1's old link:\n%s", routes(e[1]))
H.check(next_hop(e[1], t1) == "cloud", "e1 reaches t1 via %s", tostring(next_hop(e[1], t1)))
transfer("after", t1, cloud)
local link = net:_move_link(t1, nil, false)
H.check(link.a == e[2] or link.b == e[2], "the link's ends are %s and %s", link.a.name, link.b.name)
H.check(link:params().bw == 50e6, "the link's bw after the move: %s", tostring(link:params().bw))

-- ---- mobility ----
local path = hn.results_dir() .. "/moves_in.csv"
local f = assert(io.open(path, "w"))
f:write("t,node,edge\n0.1,t2,e3\n0.3,t2,e1\n")
f:close()
local hf = net:mobility{ nodes = { t2 }, edges = e, file = path, gap = "10ms" }
local SEED, DWELL = 9, { 0.1, 0.3 }
local hw = net:mobility{ nodes = { t1, t3 }, edges = e, model = "random-waypoint", seed = SEED, dwell_s = DWELL }
local RUN_S = 1.5
hn.sleep(RUN_S)
hf:stop()
hw:stop()
-- a move under way at the stop ends first (its task checks the stop after)
hn.sleep(0.3)
H.check(hf.moves == 2, "file mobility: %d moves", hf.moves)

-- The reference: node k of { t1, t3 } from its edge then, hn.rng(SEED, k).
local HORIZON = 0.8 -- moves planned later may be late on a loaded host
local function reference(k, at)
  local rng, t, list = hn.rng(SEED, k), 0, {}
  while true do
    t = t + DWELL[1] + (DWELL[2] - DWELL[1]) * rng:uniform()
    local others = {}
    for _, edge in ipairs(e) do if edge.name ~= at then others[#others + 1] = edge.name end end
    at = others[rng:pick(#others)]
    if t >= HORIZON then return list end
    list[#list + 1] = string.format("%.6f,%s", t, at)
  end
end
local got = { t1 = {}, t2 = {}, t3 = {} }
for _, r in ipairs(require("hiernet.experiment").read_csv("moves")) do
  if r.t_s and tonumber(r.t_s) < HORIZON then
    local list = got[r.node]
    list[#list + 1] = string.format("%.6f,%s", tonumber(r.t_s), r.to)
  end
end
local function same(a, b, what)
  H.check(#a == #b, "%s: %d moves, want %d", what, #a, #b)
  for i = 1, #b do H.check(a[i] == b[i], "%s: move %d is %s, want %s", what, i, a[i], b[i]) end
end
same(got.t2, { "0.100000,e3", "0.300000,e1" }, "t2 (file)")
same(got.t1, reference(1, "e2"), "t1 (random waypoint)")
same(got.t3, reference(2, "e2"), "t3 (random waypoint)")
H.check(#got.t1 >= 2, "t1 moved %d times before %.1f s", #got.t1, HORIZON)
-- wherever they are now, everybody reaches everybody
for _, a in ipairs{ t1, t2, t3 } do
  H.check(H.ping_ok(a, cloud) and H.ping_ok(cloud, a), "%s after the mobility", a.name)
end
net:stop()
