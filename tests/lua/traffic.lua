-- traffic: net:traffic{} on backend none (loopback, no emulation): the
-- counters exactly (a flow with `bytes` sends that many, in whole packets
-- for UDP, and the sink gets them all), stats() and stop(), traffic.csv,
-- net:stop() stopping what runs (also a flow whose receiver was killed),
-- and bad input: one error naming the network and the value.
local hn = require("hiernet")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "bgnet", backend = "none" }
local a, b, c = net:node("a"), net:node("b"), net:node("c")
local sw = net:switch("sw")
local other = hn.network{ name = "other", backend = "none" }
local o = other:node("o")

T.fails("network 'bgnet': traffic: the network is not started, not started", net.traffic, net,
        { from = a, to = b, rate = "1Mbit" })
net:start()

-- Bad input, each refused before any peer is asked.
local function bad(want, opts) T.fails("network 'bgnet': traffic: " .. want, net.traffic, net, opts) end
bad("unknown pattern 'bursty'", { from = a, to = b, rate = "1Mbit", pattern = "bursty" })
bad("unknown proto 'sctp'", { from = a, to = b, rate = "1Mbit", proto = "sctp" })
bad("rate: ", { from = a, to = b, rate = "-5Mbit" })
bad("rate -5 must be above 0 bit/s", { from = a, to = b, rate = -5 })
bad("rate: ", { from = a, to = b, rate = "5Mbps" })
bad("from and to are the same node 'a'", { from = a, to = "a", rate = "1Mbit" })
bad("to: no node named 'zz'", { from = a, to = "zz", rate = "1Mbit" })
bad("to: node 'o' belongs to network 'other'", { from = a, to = o, rate = "1Mbit" })
bad("from: 'sw' is a switch, not a host", { from = sw, to = b, rate = "1Mbit" })
bad("unknown option 'rte'", { from = a, to = b, rte = "1Mbit" })
bad("constant udp traffic needs a rate", { from = a, to = b })
bad("onoff needs on_s and off_s above 0", { from = a, to = b, rate = "1Mbit", pattern = "onoff", on_s = 1 })
bad("on_s and off_s go with pattern = \"onoff\" (pattern is constant)",
    { from = a, to = b, rate = "1Mbit", on_s = 1 })
bad("seed goes with pattern = \"poisson\" or \"onoff\" (pattern is constant)",
    { from = a, to = b, rate = "1Mbit", seed = 3 })
bad("off_s -1 is negative", { from = a, to = b, rate = "1Mbit", pattern = "onoff", on_s = 1, off_s = -1 })
bad("bytes must be a whole number >= 0, got 1.5", { from = a, to = b, rate = "1Mbit", bytes = 1.5 })
-- The peer command itself refuses what its pattern would ignore.
T.fails("params 'on_s' and 'off_s': only with pattern onoff", a.traffic_source, a,
        { id = "bg1", to = "127.0.0.1:9", rate = 1000000, on_s = 1 })
T.fails("no traffic flow 'bg1'", a.traffic_stats, a, { id = "bg1" }) -- bad input made no flow

-- Waits (emulated time, bounded) until the flow's source has sent its bytes.
local function sent_all(h)
  for _ = 1, 400 do
    local s = h:stats()
    if s.done then return s end
    hn.sleep(0.05)
  end
  error("traffic " .. h.name .. " did not finish")
end

-- UDP: 10500 bytes in 1000-byte packets is 11 whole packets.
local udp = net:traffic{ from = a, to = b, rate = "8Mbit", bytes = 10500, size = 1000 }
T.eq(udp.name, "bg1", "the first flow's name")
sent_all(udp)
local u = udp:stop()
T.eq(u.sent_packets, 11, "udp packets sent")
T.eq(u.sent_bytes, 11000, "udp bytes sent")
T.eq(u.received_packets, 11, "udp packets received")
T.eq(u.received_bytes, 11000, "udp bytes received")
T.eq(u.lost, 0, "udp lost on loopback")
T.eq(u.from .. ">" .. u.to .. " " .. u.proto .. " " .. u.pattern, "a>b udp constant", "what the counters name")
T.eq(udp:stats(), u, "stats() after stop() is the final count")
T.eq(udp:stop(), u, "a second stop()")
T.fails("no traffic flow 'bg1'", b.traffic_stats, b, { id = "bg1" }) -- the sink is closed

-- TCP as fast as it goes, exactly `bytes` through the stream.
local tcp = net:traffic{ from = b, to = c, proto = "tcp", bytes = 3000000 }
sent_all(tcp)
local t = tcp:stop()
T.eq(t.sent_bytes, 3000000, "tcp bytes sent")
T.eq(t.received_bytes, 3000000, "tcp bytes received")
T.eq(t.lost, nil, "tcp has no loss count")
T.eq(t.done, true, "tcp source done")

-- Poisson and onoff paced TCP and UDP run until net:stop(), which stops
-- them (their traffic.csv rows), also one whose receiver is dead.
local runs = {
  net:traffic{ from = c, to = a, pattern = "poisson", rate = "2Mbit", seed = 5 },
  net:traffic{ from = a, to = c, pattern = "onoff", rate = "2Mbit", on_s = "100ms", off_s = "100ms", proto = "tcp" },
}
local doomed = net:traffic{ from = a, to = b, rate = "1Mbit" }
hn.sleep(0.3)
b:kill()
local d = doomed.from:traffic_stats{ id = doomed.id }
T.eq(d.role .. " " .. tostring(d.error), "source nil", "a udp source to a killed node sends on")
net:stop()
for _, h in ipairs(runs) do
  local s = h:stats()
  T.eq(s.received_bytes > 0 and s.received_bytes <= s.sent_bytes, true, h.name .. " moved bytes")
end
T.fails("node 'a'", a.traffic_stats, a, { id = runs[1].id }) -- its peer is gone with the flows

local rows = require("hiernet.experiment").read_csv("traffic")
local names = {}
for _, r in ipairs(rows) do names[#names + 1] = r.name .. ":" .. tostring(r.received_bytes) end
T.eq(#rows, 5, "traffic.csv rows (" .. table.concat(names, " ") .. ")")
T.eq(rows[1].received_bytes, 11000, "traffic.csv udp row")
T.eq(rows[2].received_bytes, 3000000, "traffic.csv tcp row")
T.eq(rows[2].sent_packets, nil, "traffic.csv: tcp counts no packets")
T.eq(rows[3].name .. rows[4].name .. rows[5].name, runs[1].name .. runs[2].name .. doomed.name,
     "net:stop()'s rows, in order")
-- The flow whose receiver was killed: what its source sent, nothing received.
local f = doomed:stats()
T.eq(f.sent_bytes > 0 and f.received_bytes == nil and f.lost == nil, true, "a dead receiver's counts left out")
T.eq(rows[5].sent_bytes, f.sent_bytes, "traffic.csv: the dead receiver's row")
