-- Scenario of the traffic section of tools/bench/dynamics: net:traffic{} flows a -> b on one
-- link (bw 1 Gbit/s by default, so the link never limits them), one after
-- the other: for each pattern and rate, the delivered payload rate
-- (received bytes x 8 / the source's elapsed emulated time) and the CPU
-- time the sending and the receiving peer used meanwhile (their
-- /proc/PID/stat utime + stime; the peers run in the host's PID namespace).
-- Prints "result KEY VALUE" lines for the script.
--   --set seconds=3 rates=10,50 patterns=constant,poisson bw=1Gbit backend=user
local hn = require("hiernet")
local seconds = hn.param("seconds", 3)
local rates = hn.param("rates", "10,50")
local patterns = hn.param("patterns", "constant,poisson")
local backend = hn.param("backend", "user")

local net = hn.network{ name = "bgbench", backend = backend }
local a, b = net:node("a"), net:node("b")
net:link(a, b, { bw = hn.param("bw", "1Gbit") })
net:start()

local function result(key, value) print(string.format("result %s %s", key, tostring(value))) end

local ticks = tonumber(io.popen("getconf CLK_TCK"):read("l")) or 100
local function cpu_s(node)
  local f = assert(io.open("/proc/" .. node:stats().pid .. "/stat"))
  local text = f:read("a")
  f:close()
  local fields = {}
  for w in text:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = w end
  return (tonumber(fields[12]) + tonumber(fields[13])) / ticks -- utime, stime (fields 14, 15)
end

result("backend", net.backend)
for pattern in patterns:gmatch("[^,]+") do
  for rate in rates:gmatch("[^,]+") do
    local key = pattern .. "_" .. rate
    local ca, cb = cpu_s(a), cpu_s(b)
    local h = net:traffic{ from = a, to = b, rate = rate .. "Mbit", pattern = pattern,
                        seed = pattern ~= "constant" and 1 or nil }
    hn.sleep(seconds)
    local s = h:stop()
    local da, db = cpu_s(a) - ca, cpu_s(b) - cb
    local delivered = s.received_bytes * 8 / s.elapsed_s / 1e6
    result(key .. "_delivered_mbps", ("%.3f"):format(delivered))
    result(key .. "_lost", s.lost)
    result(key .. "_skipped", s.skipped)
    -- CPU seconds per second of flow (real: the peers' clock), per Mbit/s.
    local real_s = s.elapsed_s * net.dilation
    result(key .. "_source_cpu_ms_per_s_per_mbps", ("%.4f"):format(da / real_s * 1000 / delivered))
    result(key .. "_sink_cpu_ms_per_s_per_mbps", ("%.4f"):format(db / real_s * 1000 / delivered))
  end
end
net:stop()
