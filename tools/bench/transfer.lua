-- Scenario half of tools/bench/transfer: peer-to-peer send{} between two
-- nodes on one link, next to iperf3 moving the same bytes (one stream, one
-- run per send, alternating) on the same link in the same run. Prints
-- "result KEY VALUE" lines for the script.
--   --set mode=unshaped   link without limits (backend kernel: a veth pair)
--   --set mode=shaped     bw/delay link (backend auto: kernel with netem,
--                         else the user backend)
--   --set mb=N reps=N bw=... delay=... backend=...
--   --set cc=NAME         TCP congestion control in both nodes (their own
--                         namespaces; the host's default otherwise)
-- Sends name the node (to = "b"): the controller hands every peer the
-- address book at start.
local hn = require("hiernet")
local mode = hn.param("mode", "unshaped")
local shaped = mode == "shaped"
local mb = tonumber(hn.param("mb", shaped and 64 or 256))
local reps = tonumber(hn.param("reps", shaped and 3 or 5))
local bw, delay = hn.param("bw", "100Mbit"), hn.param("delay", "10ms")
local backend = hn.param("backend", shaped and "auto" or "kernel")
local cc = hn.param("cc", "") -- e.g. cubic: set in both nodes' own namespaces

local net = hn.network{ name = "xfer", backend = backend }
local a, b = net:node("a"), net:node("b")
local link = net:link(a, b, shaped and { bw = bw, delay = delay } or {})
net:start()
if cc ~= "" then
  for _, n in ipairs({ a, b }) do
    local r = n:run("sysctl -qw net.ipv4.tcp_congestion_control=" .. cc)
    assert(r.status == 0, "cannot select " .. cc .. ": " .. r.err)
  end
end

local function result(key, value) print(string.format("result %s %s", key, tostring(value))) end

-- iperf3 from a to b, `bytes` in one stream; returns the receiver's bit/s.
local function iperf3(bytes)
  local server = b:spawn({ "iperf3", "-s", "-1", "-B", b.addr })
  local out
  for _ = 1, 50 do -- until the server listens
    hn.sleep(0.05)
    local r = a:run(string.format("iperf3 -c %s -n %d -J", b.addr, bytes))
    if r.status == 0 then out = r.out break end
  end
  -- A server no client reached never exits by itself (-1 ends it after one
  -- test): end it, or the bench waits for it forever.
  if not out then server:kill() end
  server:wait()
  assert(out, "iperf3 client failed: no client run reached the server in 50 tries")
  local bps = out:match('"sum_received"%s*:%s*{.-"bits_per_second"%s*:%s*([%d%.eE%+%-]+)')
  return assert(tonumber(bps), "no sum_received in iperf3 output")
end

local bytes = mb * 1024 * 1024
a:tensor{ name = "x", size = bytes // 4, fill = 1 }
-- Warm-up: the connection opens, the receiver's tensor and its spare exist.
a:send{ tensor = "x", to = "b" }
-- Sends and iperf3 runs alternate, so that load from elsewhere on the host
-- hits both alike; medians of each.
local ms, iperf_ms = {}, {}
for i = 1, reps do
  local r = a:send{ tensor = "x", to = "b" }
  assert(r.bytes == bytes, "send moved " .. r.bytes .. " bytes")
  ms[i] = r.ms
  iperf_ms[i] = bytes * 8 / iperf3(bytes) * 1e3
end
assert(b:norm{ x = "x" }.value == math.sqrt(bytes // 4), "the tensor arrived damaged")
table.sort(ms)
table.sort(iperf_ms)
local med, imed = ms[reps // 2 + 1], iperf_ms[reps // 2 + 1]
result("backend", net.backend or backend)
result("cc", (a:run("sysctl -n net.ipv4.tcp_congestion_control").out:gsub("%s", "")))
result("bytes", bytes)
result("send_ms_median", string.format("%.3f", med))
result("send_ms_min", string.format("%.3f", ms[1]))
result("send_ms_max", string.format("%.3f", ms[reps]))
result("send_gbps", string.format("%.4f", bytes * 8 / med / 1e6))
result("iperf3_ms_median", string.format("%.3f", imed))
result("iperf3_gbps", string.format("%.4f", bytes * 8 / imed / 1e6))
if shaped then
  local st = link:stats()
  if st and st.ab then
    result("link_drops_queue", st.ab.drops_queue)
    result("link_queue_peak", st.ab.queue_peak)
  end
end
net:stop()
