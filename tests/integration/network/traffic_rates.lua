-- traffic_rates: net:traffic{} on an emulated link (docs/lua-api.md
-- "Background traffic"). Three flows at once, each on a 20 Mbit/s link of
-- its own, no delay (the kernel backend has no netem here): a - b, c - d,
-- e - f, joined by 1 Gbit/s links no flow takes (b - c, d - e). One after
-- the other on one link they took 12 s of the test's 12.4. Checks, in
-- emulated time (run it with --dilation D too: the rates must not change):
--   constant UDP at 10 Mbit/s for 3 s: delivered payload rate within 5% of
--     10 Mbit/s, nothing lost, as many packets received as sent;
--   UDP at 30 Mbit/s: the link's UDP payload rate (within 5%), the rest
--     counted lost (sent - received packets, above 0; on the kernel
--     backend the sender's qdisc refuses it at the socket: skipped);
--   greedy TCP (no rate) alone on the link: its payload rate, measured
--     between two stats() after a second of warm-up, within 10% of the
--     link's payload capacity, 20 Mbit/s x 1448/1514 (docs/lua-api.md: bw
--     counts Ethernet frames);
--   links.csv: each flow's link, in the flow's direction, carried at least
--     every payload byte its receiver got, and at most that plus 15% for
--     headers;
--   traffic.csv: one row per flow with the handle's final counters.
-- Args: backend=kernel|user.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local backend = A.backend or "user"
local BW, UDP_RATE = 20e6, 10e6
local TCP_CAPACITY = BW * 1448 / 1514

local net = hn.network{ name = "trate", backend = backend, seed = 3 }
local a, b, c, d, e, f = net:node("a"), net:node("b"), net:node("c"), net:node("d"), net:node("e"),
  net:node("f")
net:link(a, b, { bw = BW })
net:link(c, d, { bw = BW })
net:link(e, f, { bw = BW })
net:link(b, c, { bw = "1Gbit" }) -- a network is connected; no flow takes these two
net:link(d, e, { bw = "1Gbit" })
net:start()
H.check(net.backend == backend, "backend is %s, asked for %s", net.backend, backend)
H.own(net)

-- The three flows, each then measured by a task of its own.
local udp = net:traffic{ from = a, to = b, rate = "10Mbit", proto = "udp" }
local over = net:traffic{ from = c, to = d, rate = "30Mbit", proto = "udp" }
local tcp = net:traffic{ from = e, to = f, proto = "tcp" }

local function below_rate()
  hn.sleep(3)
  return { final = udp:stop() }
end

-- A rate between two stats() so that the queue's fill and drain stay out.
local function rate_between(flow, warm_up, seconds)
  hn.sleep(warm_up)
  local s1, t1 = flow:stats(), hn.now()
  hn.sleep(seconds)
  local s2, t2 = flow:stats(), hn.now()
  return { final = flow:stop(), rate = (s2.received_bytes - s1.received_bytes) * 8 / (t2 - t1) }
end

local done = hn.wait_all({ hn.spawn(below_rate), hn.spawn(rate_between, over, 0.5, 2),
                           hn.spawn(rate_between, tcp, 1, 3) })
local u = done[1].final
local udp_rate = u.received_bytes * 8 / u.elapsed_s
H.log("udp: %d packets sent, %d received, %.3f Mbit/s delivered in %.2f s (asked %.1f), dilation %g",
      u.sent_packets, u.received_packets, udp_rate / 1e6, u.elapsed_s, UDP_RATE / 1e6, net.dilation)
H.check(math.abs(udp_rate / UDP_RATE - 1) < 0.05, "udp delivered %.3f Mbit/s, asked 10", udp_rate / 1e6)
H.check(u.lost == 0 and u.received_packets == u.sent_packets and u.sent_packets > 0,
        "udp below the link's rate lost %d of %d packets", u.lost, u.sent_packets)

-- Above the link's rate: UDP gets the link's payload rate (1400-byte
-- datagrams in 1442-byte frames) and the rest is lost, counted; on the
-- kernel backend the sender's own qdisc is the link's and refuses the
-- excess at the socket (skipped) instead.
local ov, over_rate = done[2].final, done[2].rate
local udp_capacity = BW * 1400 / 1442
H.log("udp at 30 Mbit/s: %.3f Mbit/s delivered (link payload %.3f), %d of %d packets lost, %d skipped",
      over_rate / 1e6, udp_capacity / 1e6, ov.lost, ov.sent_packets, ov.skipped)
H.check(math.abs(over_rate / udp_capacity - 1) < 0.05, "udp above the link's rate delivered %.3f Mbit/s",
        over_rate / 1e6)
H.check(ov.lost == ov.sent_packets - ov.received_packets,
        "udp: lost %d, sent %d, received %d", ov.lost, ov.sent_packets, ov.received_packets)
if backend == "kernel" then
  H.check(ov.lost + ov.skipped > 0, "udp above the link's rate: nothing lost or skipped")
else
  H.check(ov.lost > 0, "udp above the link's rate lost nothing of %d packets", ov.sent_packets)
end

local t, tcp_rate = done[3].final, done[3].rate
H.log("tcp: %.3f Mbit/s of payload (capacity %.3f Mbit/s), %d bytes in all", tcp_rate / 1e6,
      TCP_CAPACITY / 1e6, t.received_bytes)
H.check(math.abs(tcp_rate / TCP_CAPACITY - 1) < 0.10, "tcp got %.3f Mbit/s on a 20 Mbit/s link", tcp_rate / 1e6)
H.check(t.received_bytes == t.sent_bytes, "tcp: %d bytes sent, %d received", t.sent_bytes, t.received_bytes)

-- A links.csv sample after the flows (waited for, not slept: 2 s were 4 of
-- the test's 13 at --dilation 2).
local after = H.links_rows_after(hn.now(), { "a-b", "c-d", "e-f" }, 5)
net:stop()

local carried = {}
for _, row in ipairs(after) do
  if row.dir == "ab" then carried[row.link] = row.delivered_bytes end
end
for _, flow in ipairs({ { "a-b", u.received_bytes }, { "c-d", ov.received_bytes }, { "e-f", t.received_bytes } }) do
  local link, payload = flow[1], flow[2]
  local got = carried[link]
  H.log("links.csv %s ab: %d bytes for %d bytes of payload", link, got or -1, payload)
  H.check(got and got >= payload and got <= payload * 1.15, "links.csv %s carried %s bytes for %d of payload",
          link, tostring(got), payload)
end

-- One row per flow as it stops (the 30 Mbit/s one first), found by sender.
local rows, by_sender = require("hiernet.experiment").read_csv("traffic"), {}
for _, row in ipairs(rows) do by_sender[row.from] = row end
H.check(#rows == 3, "traffic.csv has %d rows, not 3", #rows)
local ra, rc, re = by_sender.a or {}, by_sender.c or {}, by_sender.e or {}
H.check(ra.proto == "udp" and ra.received_bytes == u.received_bytes and ra.lost == 0
        and rc.lost == ov.lost and re.proto == "tcp" and re.sent_bytes == t.sent_bytes,
        "traffic.csv rows differ from the handles' counters")
