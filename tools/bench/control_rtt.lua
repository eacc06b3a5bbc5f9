-- Scenario half of tools/bench/control_rtt: times N Lua n:ping() round trips
-- (controller -> peer -> controller) and prints "median_us p99_us".
local hn = require("hiernet")
local n = hn.param("calls", 100000)
local net = hn.network{ name = "rtt", backend = "none" }
local peer = net:node("peer")
net:start()
for _ = 1, 1000 do peer:ping() end -- warm up caches and the allocator
local rtt, now = {}, hn.now
for i = 1, n do
  local t0 = now()
  peer:ping()
  rtt[i] = (now() - t0) * 1e6
end
table.sort(rtt)
print(string.format("%.3f %.3f", rtt[n // 2 + 1], rtt[math.floor(n * 0.99) + 1]))
net:stop()
