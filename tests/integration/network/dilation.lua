-- dilation: what a dilated link reports, for dilation.sh, which runs this at
-- --dilation 1 and 4 and compares (the undilated figures within 5%).
-- One link a-b; prints "result KEY VALUE" lines, every time emulated:
--   ping_ms      median RTT of system pings a->b: the tool measures real
--                time, so its figure is divided by the dilation (user
--                backend: the link's delay; the kernel backend has no
--                delay here, no sch_netem)
--   small_ms     median send{} of a 1-float tensor a->b (one round trip on
--                the kept connection)
--   transfer_ms  median send{} of mb MB a->b
--   dilation     the run's dilation (net.dilation)
-- Args: backend=user|kernel, mb=2, bw=100Mbit, delay=5ms (user backend only).
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local backend = A.backend or "user"
local mb = tonumber(A.mb or 2)
local params = { bw = A.bw or "100Mbit" }
if backend == "user" then params.delay = A.delay or "5ms" end

local net = hn.network{ name = "dil", backend = backend, seed = 3 }
local a, b = net:node("a"), net:node("b")
net:link(a, b, params)
net:start()
H.check(net.backend == backend, "backend is %s, asked for %s", net.backend, backend)
H.own(net)
local D = net.dilation

local function result(key, value) print(string.format("result %s %s", key, value)) end
local function median(list)
  table.sort(list)
  return H.median(list)
end

result("dilation", string.format("%g", D))
if backend == "user" then
  local rtts = H.rtts(a, b, 10, 0.05 * D)
  H.check(#rtts >= 9, "only %d of 10 pings a->b answered", #rtts)
  for i, v in ipairs(rtts) do rtts[i] = v / D end
  result("ping_ms", string.format("%.4f", median(rtts)))
end

a:tensor{ name = "one", size = 1, fill = 1 }
a:send{ tensor = "one", to = "b" } -- opens the connection
local small = {}
for i = 1, 7 do small[i] = a:send{ tensor = "one", to = "b" }.ms end
result("small_ms", string.format("%.4f", median(small)))

local bytes = mb * 1024 * 1024
a:tensor{ name = "x", size = bytes // 4, fill = 1 }
a:send{ tensor = "x", to = "b" } -- the receiver's tensor and its spare exist
local big = {}
for i = 1, 3 do
  local r = a:send{ tensor = "x", to = "b" }
  H.check(r.bytes == bytes, "send moved %d bytes, not %d", r.bytes, bytes)
  big[i] = r.ms
end
result("transfer_ms", string.format("%.3f", median(big)))
net:stop()
