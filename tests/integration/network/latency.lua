-- latency: delay, loss, jitter order and link down/up on the user backend
-- (hiernet-linkd). Asserts:
--   * ping RTT over a 3-hop path with 5 ms per hop is 30 ms +- 1 ms (median
--     and minimum of 10 pings after a warm-up ping for ARP); after
--     link:set{delay="10ms"} on one hop it is 40 ms +- 1 ms;
--   * loss="1%" drops 1% +- 0.3% of 20,000 UDP datagrams (iperf3 -u -k 20000),
--     as counted by linkd (drops_loss / packets) and by iperf3, and the two
--     agree: linkd saw iperf3's datagrams to within 1%, its loss drops equal
--     iperf3's lost datagrams to within 0.1% of those sent;
--   * jitter without reorder keeps order (iperf3 counts no datagram out of
--     order), while reorder=true on the same jitter does reorder (the
--     measurement is not blind);
--   * link:down() stops traffic (pings fail, linkd counts drops_down, stats
--     say up=false) and link:up() restores it.
-- Args: none besides owned=/regdir= from lib.sh.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
H.args(...)

local net = hn.network{ name = "lat", backend = "user", seed = 7 }
local h = {}
for i = 1, 4 do h[i] = net:node("h" .. i) end
local hop = {}
for i = 1, 3 do hop[i] = net:link(h[i], h[i + 1], { delay = "5ms" }) end
local lossy_end, jit_end, reo_end = net:node("lossy"), net:node("jit"), net:node("reo")
local lossy = net:link(h[1], lossy_end, { bw = "100Mbit", loss = "1%" })
net:link(h[1], jit_end, { bw = "100Mbit", delay = "5ms", jitter = "2ms" })
net:link(h[1], reo_end, { bw = "100Mbit", delay = "5ms", jitter = "2ms", reorder = true })
net:start()
H.check(net.backend == "user", "backend is %s", net.backend)
H.own(net)
local failures = {}
local function expect(cond, fmt, ...)
  local msg = string.format(fmt, ...)
  H.log("%s %s", cond and "ok:  " or "FAIL:", msg)
  if not cond then failures[#failures + 1] = msg end
end

-- RTT over three hops.
local function rtt_check(want)
  local list, r = H.rtts(h[1], h[4], 10, 0.05)
  H.check(#list >= 9, "only %d of 10 pings h1->h4 answered:\n%s", #list, r.out)
  local med = H.median(list)
  expect(math.abs(med - want) <= 1 and math.abs(list[1] - want) <= 1,
         "RTT h1->h4 median %.2f ms, min %.2f, max %.2f (want %d +- 1)", med, list[1], list[#list], want)
end
rtt_check(30)
hop[2]:set{ delay = "10ms" }
rtt_check(40)

-- Loss: 20,000 small UDP datagrams at 8 Mbit/s (about 1.3 s).
local s0 = lossy:stats()
local out, sout = H.iperf(lossy_end, h[1], { "-u", "-l", "64", "-b", "8M", "-k", "20000" }, 5202)
local s1 = lossy:stats()
local sent = H.json_number(out, { "end", "sum" }, "packets")
local lost = H.json_number(out, { "end", "sum" }, "lost_packets")
H.check(sent and lost, "iperf3 UDP JSON lacks end.sum packets/lost_packets")
local d_packets = s1.ab.packets - s0.ab.packets
local d_loss = s1.ab.drops_loss - s0.ab.drops_loss
expect(sent == 20000, "iperf3 sent %d datagrams (want 20000)", sent)
expect(math.abs(d_loss / d_packets - 0.01) <= 0.003, "linkd dropped %d of %d packets to loss: %.3f%% (want 1 +- 0.3%%)",
       d_loss, d_packets, 100 * d_loss / d_packets)
expect(math.abs(lost / sent - 0.01) <= 0.003, "iperf3 lost %d of %d datagrams: %.3f%% (want 1 +- 0.3%%)",
       lost, sent, 100 * lost / sent)
expect(math.abs(d_packets - sent) <= 0.01 * sent, "linkd counted %d packets h1->lossy, iperf3 sent %d datagrams (within 1%%)",
       d_packets, sent)
expect(math.abs(d_loss - lost) <= 0.001 * sent, "linkd loss drops %d vs iperf3 lost %d (within 0.1%% of sent)", d_loss, lost)

-- Jitter keeps order unless reorder=true.
local function out_of_order(peer, port)
  local _, srv = H.iperf(peer, h[1], { "-u", "-l", "100", "-b", "1.6M", "-k", "2000" }, port)
  return H.json_number(srv, { "end", "streams", "udp" }, "out_of_order"),
         H.json_number(srv, { "end", "streams", "udp" }, "packets")
end
local ooo, got = out_of_order(jit_end, 5203)
expect(ooo == 0, "jitter 2 ms without reorder: %s of %s datagrams out of order (want 0)", tostring(ooo), tostring(got))
ooo, got = out_of_order(reo_end, 5204)
expect(ooo and ooo > 0, "jitter 2 ms with reorder=true: %s of %s datagrams out of order (want > 0)", tostring(ooo), tostring(got))

-- Down stops traffic, up restores it.
hop[3]:down()
local st = hop[3]:stats()
local r = h[1]:run({ "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", h[4].addr })
local st2 = hop[3]:stats()
expect(st.up == false, "stats().up is %s after down()", tostring(st.up))
expect(r.status ~= 0 and r.out:find(" 0 received", 1, true) ~= nil, "pings h1->h4 with hop 3 down: %s",
       (r.out:match("(%d+ packets transmitted[^\n]*)") or r.out))
expect(st2.ab.drops_down - st.ab.drops_down >= 3, "linkd counted %d drops_down for 3 pings",
       st2.ab.drops_down - st.ab.drops_down)
hop[3]:up()
local back = false
for _ = 1, 20 do
  if H.ping_ok(h[1], h[4], 1) then back = true break end
end
expect(back and hop[3]:stats().up == true, "pings h1->h4 pass again after up()")

net:stop()
H.check(#failures == 0, "%d latency check(s) failed:\n%s", #failures, table.concat(failures, "\n"))
H.log("PASS latency")
