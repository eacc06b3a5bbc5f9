-- fidelity.lua — what a run's emulated times are worth, for
-- tools/bench/fidelity, which runs it at dilation 1 and 4 (user backend:
-- hiernet-linkd, the one with delay and loss here). Prints "result KEY
-- VALUE" lines, every time emulated (ms):
--   rtt_ms        median system ping RTT over a 5 ms link (real / dilation)
--   floor_rtt_ms  the same over a link without delay: the host's own latency
--   small_ms      median send{} of one float over the 5 ms link (one round trip)
--   transfer_ms   median send{} of mb MB over the 100 Mbit / 5 ms link
--   ideal_ms      bytes/bw * 1514/1448 + delay, the framing-aware ideal
--   lossy_ms      median send{} of mb MB over a 100 Mbit / 5 ms / 1% loss link
--   outage_ms     one send{} of mb MB during which the link is down for
--                 outage_ms emulated ms: TCP's retransmission timer (at least
--                 200 ms of real time, whatever the dilation) sets how long
--                 the send takes after the link is back
-- Args: mb=4, reps=3, outage=100 (ms).
local hn = require("hiernet")
local A = {}
for _, w in ipairs({ ... }) do
  local k, v = w:match("^(%w+)=(.*)$")
  if k then A[k] = v end
end
local mb, reps, outage = tonumber(A.mb or 4), tonumber(A.reps or 3), tonumber(A.outage or 100)

local net = hn.network{ name = "fid", backend = "user", seed = 11 }
local a, b, c, d, e = net:node("a"), net:node("b"), net:node("c"), net:node("d"), net:node("e")
net:link(a, b, { bw = "100Mbit", delay = "5ms" })
net:link(a, c, { bw = "100Mbit" })
net:link(a, d, { bw = "100Mbit", delay = "5ms", loss = "1%" })
local flaky = net:link(a, e, { bw = "100Mbit", delay = "5ms" })
net:start()
local D = net.dilation

local function result(k, v) print(string.format("result %s %s", k, v)) end
local function median(t)
  table.sort(t)
  return #t % 2 == 1 and t[(#t + 1) // 2] or (t[#t // 2] + t[#t // 2 + 1]) / 2
end
local function ping(to)
  a:run({ "ping", "-n", "-c", "1", "-W", "2", to.addr })
  local r = a:run({ "ping", "-n", "-c", "10", "-i", tostring(0.05 * D), "-W", "2", to.addr })
  local t = {}
  for ms in r.out:gmatch("time=([%d%.]+) ms") do t[#t + 1] = tonumber(ms) / D end
  assert(#t >= 9, "pings to " .. to.name .. " lost: " .. r.out)
  return median(t)
end
local function sends(to, name, n)
  a:send{ tensor = name, to = to } -- connection and receiver buffers
  local t = {}
  for i = 1, n do t[i] = a:send{ tensor = name, to = to }.ms end
  return median(t)
end

result("dilation", string.format("%g", D))
result("rtt_ms", string.format("%.4f", ping(b)))
result("floor_rtt_ms", string.format("%.4f", ping(c)))
a:tensor{ name = "one", size = 1, fill = 1 }
result("small_ms", string.format("%.4f", sends(b, "one", 7)))
local bytes = mb * 1024 * 1024
a:tensor{ name = "x", size = bytes // 4, fill = 1 }
result("transfer_ms", string.format("%.3f", sends(b, "x", reps)))
result("ideal_ms", string.format("%.3f", bytes * 8 / 100e6 * 1514 / 1448 * 1e3 + 5))
result("lossy_ms", string.format("%.3f", sends(d, "x", reps)))
a:send{ tensor = "x", to = e }
local cut = hn.spawn(function()
  hn.sleep(0.05)
  flaky:down()
  hn.sleep(outage / 1e3)
  flaky:up()
end)
result("outage_ms", string.format("%.3f", a:send{ tensor = "x", to = e }.ms))
cut:wait()
net:stop()
