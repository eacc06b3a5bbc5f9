-- Time dilation on backend none: the run's clock, sleeps, hn.at, compute
-- commands and the overload account, at dilation 4. Real time is read from
-- `date` run in a node (backend none: the host), which no dilation touches.
local hn = require("hiernet")

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

-- Bad values are errors naming the network and the value.
local ok, err = pcall(hn.network, { name = "bad", backend = "none", dilation = 0.5 })
check(not ok and err:find("network 'bad': dilation must be a number from 1 to", 1, true),
      "dilation 0.5: %s", tostring(err))
ok, err = pcall(hn.network, { name = "bad2", backend = "none", dilation = "x" })
check(not ok and err:find("option 'dilation' must be a number", 1, true), "dilation 'x': %s", tostring(err))
-- (dilation_max before a fixed dilation: tests/lua/dilation_max.lua)

local net = hn.network{ name = "dil", backend = "none", dilation = 4 }
check(net.dilation == 4, "net.dilation is %s", tostring(net.dilation))
-- Every network of a run shares the clock.
ok, err = pcall(hn.network, { name = "other", backend = "none", dilation = 2 })
check(not ok and err:find("differs from the run's 4", 1, true), "second dilation: %s", tostring(err))
local same = hn.network{ name = "same", backend = "none", dilation = 4 }
-- dilation_max bounds "auto": beside a fixed dilation it is refused, not ignored.
ok, err = pcall(hn.network, { name = "fixedmax", backend = "none", dilation_max = 8 })
check(not ok and err:find([[network 'fixedmax': dilation_max bounds dilation "auto", but the run's dilation is fixed at 4]], 1, true),
      "dilation_max beside a fixed dilation: %s", tostring(err))
check(same.dilation == 4, "same.dilation is %s", tostring(same.dilation))

local w = net:node("w")
net:start()

local function real_now()
  local r = w:run({ "date", "+%s.%N" })
  return tonumber(r.out)
end

-- hn.sleep(s) waits s emulated seconds, 4 s real each.
local e0, r0 = hn.now(), real_now()
hn.sleep(0.2)
local e1, r1 = hn.now(), real_now()
check(math.abs((e1 - e0) - 0.2) < 0.02, "slept %.3f emulated s, wanted 0.2", e1 - e0)
check((r1 - r0) > 0.78 and (r1 - r0) < 0.95, "slept %.3f real s, wanted 0.8", r1 - r0)

-- hn.at runs at an emulated time; a time already past runs at once.
local target = hn.now() + 0.1
local at = hn.at(target, function(x) return hn.now(), x end)
local when, x = at:wait()
check(x == nil and when >= target and when - target < 0.02, "hn.at(%.3f) ran at %.3f", target, when)
local late = hn.at(hn.now() - 5, function(v) return hn.now(), v end, "arg")
local t_late, v = late:wait()
check(v == "arg" and t_late - hn.now() < 0.01, "a past hn.at ran at %.3f (now %.3f)", t_late, hn.now())
ok, err = pcall(hn.at, "soon", function() end)
check(not ok and err:find("hn.at: the time must be a number", 1, true), "hn.at('soon'): %s", tostring(err))

-- A compute command completes at start + 4 * cpu (speed 1): its ms, in
-- emulated time, is its CPU time again; its real duration four times that.
w:tensor{ name = "a", size = 4000000, fill = 1 }
r0 = real_now()
local r = w:norm{ x = "a" }
local real = real_now() - r0
check(r.overrun == false, "norm overran at dilation 4 on an idle host: ms %.3f cpu_ms %.3f", r.ms, r.cpu_ms)
check(r.ms >= r.cpu_ms * 0.98 and r.ms <= r.cpu_ms * 1.3 + 0.2,
      "norm ms %.3f (emulated) vs cpu_ms %.3f", r.ms, r.cpu_ms)
check(real * 1e3 >= 4 * r.cpu_ms * 0.98, "norm took %.1f real ms for %.2f cpu ms at D=4", real * 1e3, r.cpu_ms)
local p = w:ping()
check(p.ms >= 0 and p.ms < 5, "ping ms %.3f", p.ms)

-- The overload account counts the compute commands of every node.
local o = hn.overload()
check(o.commands == 2 and o.overruns == 0 and o.overrun_share == 0,
      "overload: %d commands, %d overruns, share %s", o.commands, o.overruns, tostring(o.overrun_share))
check(o.dilation == 4 and o.suggested_dilation == 4 and o.limited == false,
      "overload: dilation %s, suggested %s, limited %s", tostring(o.dilation),
      tostring(o.suggested_dilation), tostring(o.limited))
check(type(o.host_cpu_saturation) == "number" and o.host_cpu_saturation >= 0 and o.host_cpu_saturation <= 1,
      "host_cpu_saturation %s", tostring(o.host_cpu_saturation))
check(o.host_cores >= 1 and o.worst_node == nil and o.stretch_p95 == 1,
      "host_cores %s, worst_node %s, stretch_p95 %s", tostring(o.host_cores), tostring(o.worst_node),
      tostring(o.stretch_p95))
net:stop()
-- After stop, the account still answers (the peers are gone).
check(hn.overload().commands == 2, "overload after stop: %d commands", hn.overload().commands)
-- A dilation cannot change once a network has started.
ok, err = pcall(hn.network, { name = "late", backend = "none", dilation = 1 })
check(not ok and err:find("differs from the run's 4", 1, true), "late dilation: %s", tostring(err))
