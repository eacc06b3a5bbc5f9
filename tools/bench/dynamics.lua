-- dynamics.lua: the scenario of tools/bench/dynamics, one section a run
-- (--set section=...). Prints one line "dynamics {json}".
--
--   section=trace: replays `file` (format csv or mahimahi) on direction ab
--     of h1 - h2 and runs iperf3 TCP h1 -> h2 over `seconds`; the
--     receiver's goodput each second against the trace's rate over that
--     second (averaged over its steps; framing accounted: bw counts
--     1514-byte frames of 1448-byte segments, a Mahimahi opportunity one
--     1500-byte packet of 1448 bytes of payload). Every second counts,
--     those right after a change too: the error includes TCP's reaction.
--   section=cost: `links` links in a chain of switches (no peers), each
--     traced from `file` looped (linear, step `step`), for `seconds`; the
--     controller's and linkd's CPU (utime + stime in /proc) over that time,
--     and the same window without traces as the anchor.
local hn = require("hiernet")
local section = hn.param("section", "trace")
local backend = hn.param("backend", "user")
local file = hn.param("file", "scenarios/traces/cell-up-1.csv")
local format = hn.param("format", "csv")
local seconds = hn.param("seconds", 20)

local function sorted_quantile(list, q)
  table.sort(list)
  if #list == 0 then return 0 end
  return list[math.max(1, math.ceil(q * #list))]
end

-- The trace's rate (bit/s of frames) at each ms of its first `secs` seconds,
-- from the CSV steps or the Mahimahi opportunities, as goodput per second.
local function ideal_per_second(secs)
  local out = {}
  local f = assert(io.open(file))
  if format == "mahimahi" then
    local count = {}
    for line in f:lines() do
      local ms = tonumber(line)
      if ms and ms > 0 then
        local s = (ms - 1) // 1000 + 1
        count[s] = (count[s] or 0) + 1
      end
    end
    for s = 1, secs do out[s] = (count[s] or 0) * 1448 * 8 end
  else
    local rows = {}
    for line in f:lines() do
      local t, bw = line:match("^%s*([%d%.]+)%s*,%s*([%d%.]+)Kbit")
      if t then rows[#rows + 1] = { tonumber(t), tonumber(bw) * 1e3 } end
    end
    local function at(x)
      local r = rows[1][2]
      for _, row in ipairs(rows) do if row[1] <= x then r = row[2] end end
      return r
    end
    for s = 1, secs do
      local sum = 0
      for k = 0, 99 do sum = sum + at(s - 1 + (k + 0.5) / 100) end
      out[s] = sum / 100 * 1448 / 1514
    end
  end
  f:close()
  return out
end

local function trace_section()
  local net = hn.network{ name = "dyn", backend = backend, seed = 1 }
  local h1, h2 = net:node("h1"), net:node("h2")
  local l = net:link(h1, h2, { bw = "10Mbit" })
  net:start()
  local srv = h2:spawn({ "iperf3", "-s", "-1", "-B", h2.addr, "-J" })
  hn.sleep(0.3)
  l:trace{ file = file, format = format, dir = "ab" }
  local r = h1:run({ "iperf3", "-c", h2.addr, "-J", "-t", tostring(seconds) })
  local _, sout = srv:wait()
  assert(r.status == 0, "iperf3 failed: " .. r.err)
  local ideal, errors, per_s = ideal_per_second(seconds), {}, {}
  for s, bps in sout:gmatch('"sum"%s*:%s*{%s*"start"%s*:%s*([%d%.eE+-]+),.-"bits_per_second"%s*:%s*([%d%.eE+-]+)') do
    local k = math.floor(tonumber(s) + 0.5) + 1
    if ideal[k] and k <= seconds then
      local e = math.abs(tonumber(bps) / ideal[k] - 1)
      errors[#errors + 1] = e
      per_s[#per_s + 1] = string.format("%.2f", tonumber(bps) / 1e6)
    end
  end
  net:stop()
  io.write(string.format('dynamics {"seconds":%d,"error_median":%.4f,"error_p90":%.4f,"goodput_mbit":[%s]}\n',
                         #errors, sorted_quantile(errors, 0.5), sorted_quantile(errors, 0.9), table.concat(per_s, ",")))
end

local CLK_TCK = 100
-- /proc/PID/stat ("self" for this controller): its pid and the fields
-- after the command name (fields[12], fields[13]: utime, stime in ticks).
local function proc_stat(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local stat = f:read("a")
  f:close()
  local fields = {}
  for v in stat:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = v end
  return stat:match("^(%d+)"), fields
end

local function cpu_ticks(pid)
  local _, fields = proc_stat(pid)
  return fields and tonumber(fields[12]) + tonumber(fields[13]) or 0
end

-- The controller's children named hiernet-linkd.
local function linkd_pids(pid)
  local pids = {}
  local f = io.open("/proc/" .. pid .. "/task/" .. pid .. "/children")
  if not f then return pids end
  for child in f:read("a"):gmatch("%d+") do
    local c = io.open("/proc/" .. child .. "/comm")
    if c then
      if c:read("l") == "hiernet-linkd" then pids[#pids + 1] = child end
      c:close()
    end
  end
  f:close()
  return pids
end

local function cpu_share_over(window, pid, linkds)
  local c0, l0 = cpu_ticks(pid), 0
  for _, p in ipairs(linkds) do l0 = l0 + cpu_ticks(p) end
  local t0 = hn.now()
  hn.sleep(window)
  local real = hn.now() - t0 -- emulated = real: the bench runs at dilation 1
  local l1 = 0
  for _, p in ipairs(linkds) do l1 = l1 + cpu_ticks(p) end
  return (cpu_ticks(pid) - c0) / CLK_TCK / real, (l1 - l0) / CLK_TCK / real
end

local function cost_section()
  local n_links = hn.param("links", 100)
  local step = hn.param("step", "100ms")
  local net = hn.network{ name = "cost", backend = backend, seed = 1 }
  local switches, links = {}, {}
  for i = 0, n_links do switches[i] = net:switch("s" .. i) end
  for i = 1, n_links do links[i] = net:link(switches[i - 1], switches[i], { bw = "10Mbit" }) end
  net:start()
  local pid = proc_stat("self")
  local linkds = linkd_pids(pid)
  local idle_ctl, idle_linkd = cpu_share_over(seconds, pid, linkds)
  for i = 1, n_links do links[i]:trace{ file = file, loop = true, interp = "linear", step = step } end
  local ctl, linkd = cpu_share_over(seconds, pid, linkds)
  local changes = 0
  for i = 1, n_links do changes = changes + #links[i]:trace_changes("ab") end
  net:stop()
  io.write(string.format('dynamics {"links":%d,"changes":%d,"controller_cpu_share":%.4f,"linkd_cpu_share":%.4f,' ..
                         '"idle_controller_cpu_share":%.4f,"idle_linkd_cpu_share":%.4f,"linkd_processes":%d}\n',
                         n_links, changes, ctl, linkd, idle_ctl, idle_linkd, #linkds))
end

if section == "trace" then trace_section() else cost_section() end
