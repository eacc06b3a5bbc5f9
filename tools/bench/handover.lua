-- handover: the interruption a terminal's move (node:move) costs, against
-- the gap asked for. A terminal t1 under edge e1 or e2 (links 100 Mbit/s,
-- 1 ms on the user backend) pings the cloud every 2 ms while it moves from
-- one edge to the other; the interruption is the longest time between two
-- replies. Gap 0 is the anchor: the move's own cost (netlink, routes on
-- every host), measured in the same run. Each gap `reps` times; medians.
-- Prints one line per gap, then "JSON " and the figures (the handover
-- section of tools/bench/dynamics folds them into its last line).
local hn = require("hiernet")
local backend = hn.param("backend", "user")
local reps = hn.param("reps", 3)
local GAPS_MS = { 0, 20, 50, 100, 200 }

local net = hn.network{ name = "handover", backend = backend }
local link = { bw = "100Mbit" }
if backend ~= "kernel" then link.delay = "1ms" end
local cloud = net:node("cloud", { tier = "cloud" })
local e = { net:node("e1", { tier = "edge" }), net:node("e2", { tier = "edge" }) }
for _, edge in ipairs(e) do net:link(cloud, edge, link) end
local t1 = net:node("t1", { tier = "terminal" })
net:link(e[1], t1, link)
net:start()

-- The longest time between two ping replies around one move with this gap.
local at = 1
local function interruption(gap_s)
  local pinger = t1:spawn({ "ping", "-n", "-D", "-i", "0.002", "-W", "1", "-c",
                            tostring(math.floor((0.4 + gap_s) / 0.002)), cloud.addr })
  hn.sleep(0.15)
  at = 3 - at
  t1:move{ to = e[at], gap = gap_s }
  local _, out = pinger:wait()
  local stamps = {}
  for ts in out:gmatch("%[([%d.]+)%] %d+ bytes from") do stamps[#stamps + 1] = tonumber(ts) end
  local worst = 0
  for i = 2, #stamps do worst = math.max(worst, stamps[i] - stamps[i - 1]) end
  return worst
end

local function median(list)
  table.sort(list)
  return list[(#list + 1) // 2]
end

local fields = { string.format('"bench":"handover","backend":"%s","reps":%d', net.backend, reps) }
local anchor_ms
for _, gap_ms in ipairs(GAPS_MS) do
  local runs = {}
  for r = 1, reps do runs[r] = interruption(gap_ms / 1000) * 1000 end
  local ms = median(runs)
  if gap_ms == 0 then
    anchor_ms = ms
    print(string.format("gap   0 ms: interruption %7.1f ms (the move's own cost: the anchor)", ms))
    fields[#fields + 1] = string.format('"interruption_gap0_ms":%.2f', ms)
  else
    print(string.format("gap %3d ms: interruption %7.1f ms, %.2fx the gap, %+.1f ms over gap + anchor",
                        gap_ms, ms, ms / gap_ms, ms - gap_ms - anchor_ms))
    fields[#fields + 1] = string.format('"interruption_gap%d_ms":%.2f,"ratio_gap%d":%.3f,"over_anchor_gap%d_ms":%.2f',
      gap_ms, ms, gap_ms, ms / gap_ms, gap_ms, ms - gap_ms - anchor_ms)
  end
end
net:stop()
print("JSON {" .. table.concat(fields, ",") .. "}")
