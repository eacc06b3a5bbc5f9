-- Run-level calls of the Lua API, each against what docs/lua-api.md says:
--   hn.progress{...}  one log line "progress k=v ...", keys sorted
--   hn.status(text)   logged at once, then at most every 5 s (not a
--                     terminal)
--   hn.version        the version string (tests/cli/test_features.sh checks
--                     it against `hiernet version`)
--   hn.emulation()    "kernel", "user" or "none" and a reason (the CLI test
--                     checks it against `hiernet doctor`)
--   net:stop() during net:start(): waits for the build, stops it, and the
--                     start fails with "stopped while starting"
--   p:kill(N)         p:wait()'s status is 128 + N (SIGKILL 137, the
--                     default SIGTERM 143); n:run of a shell killed by
--                     SIGUSR1 is 138
--   p:kill(0)         the liveness probe: true while the program runs (and
--                     it runs on: a later SIGTERM ends it with 143), false
--                     once it ended, by a signal or its network's stop,
--                     never an error; a signal out of 0..64 is an error
local hn = require("hiernet")

local function log_lines()
  local lines = {}
  for line in io.lines(hn.results_dir() .. "/log.txt") do lines[#lines + 1] = line end
  return lines
end

local function count(pattern)
  local n = 0
  for _, line in ipairs(log_lines()) do if line:find(pattern) then n = n + 1 end end
  return n
end

local function eq(got, want, what)
  if got ~= want then error(string.format("%s: got %s, want %s", what, tostring(got), tostring(want)), 2) end
end

-- hn.progress: keys sorted, values as tostring gives them.
hn.progress{ zeta = 2.5, alpha = 1, mid = "x" }
eq(count("%] progress alpha=1 mid=x zeta=2%.5$"), 1, "hn.progress line")

-- hn.status: the first line is logged, a second within 5 s is not, one
-- after 5 s is.
hn.status("status-one")
hn.status("status-two")
eq(count("%] status%-one$"), 1, "first status line logged")
eq(count("status%-two"), 0, "a status line 0 s after the last logged one")
hn.sleep(5.05)
hn.status("status-three")
eq(count("%] status%-three$"), 1, "status line 5 s after the last logged one")

-- hn.version, hn.emulation().
assert(type(hn.version) == "string" and hn.version:match("^%d+%.%d+"), "hn.version: " .. tostring(hn.version))
local backend, why = hn.emulation()
assert(backend == "kernel" or backend == "user" or backend == "none", "hn.emulation(): " .. tostring(backend))
assert(type(why) == "string" and #why > 0, "hn.emulation() gives no reason")
print("emulation=" .. backend)
print("version=" .. hn.version)

-- net:stop() while net:start() runs in another task.
local net = hn.network{ name = "fapi", backend = "none" }
local a = net:node("a")
local nodes = { a }
for i = 1, 5 do
  nodes[#nodes + 1] = net:node("n" .. i)
  net:link(a, nodes[#nodes])
end
-- The start task catches its own error: one nobody waits for would fail the run.
local start = hn.spawn(function() return pcall(net.start, net) end)
hn.yield() -- the start task runs up to its first wait
eq(net:state(), "starting", "state while starting")
local ok, err = pcall(a.ping, a)
assert(not ok, "a node answered a call while its network was starting")
net:stop()
ok, err = start:wait()
assert(not ok and tostring(err):find("stopped while starting", 1, true),
       "net:start() under a net:stop(): " .. tostring(err))
eq(net:state(), "stopped", "state after the stop")

-- p:kill and 128 + N.
local net2 = hn.network{ name = "fkill", backend = "none" }
local h = net2:node("h")
net2:start()
local p = h:spawn{ "sleep", "30" }
assert(math.type(p.pid) == "integer" and p.pid > 0, "p.pid: " .. tostring(p.pid))
assert(not p.done, "a sleeping program is done")
p:kill(9)
eq(p:wait(), 137, "status after p:kill(9)")
assert(p.done, "p.done after wait")
p = h:spawn{ "sleep", "30" }
eq(p:kill(0), true, "p:kill(0) while it runs")
eq(p:kill(0), true, "p:kill(0) again: signal 0 ends nothing")
p:kill()
eq(p:wait(), 143, "status after p:kill() (SIGTERM)")
eq(p:kill(0), false, "p:kill(0) once it ended")
for _, bad in ipairs({ -1, 65 }) do
  local ok, e = pcall(p.kill, p, bad)
  assert(not ok and tostring(e):find("kill: bad signal number " .. bad, 1, true),
         "p:kill(" .. bad .. "): " .. tostring(e))
end
local left = h:spawn{ "sleep", "30" } -- net2:stop() ends it
eq(h:run("kill -USR1 $$").status, 138, "n:run of a shell killed by SIGUSR1")
eq(h:run("exit 7").status, 7, "n:run exit status")
net2:stop()
eq(left:wait(), 143, "a program the network's stop ended (SIGTERM)")
eq(left:kill(0), false, "p:kill(0) of a program the network's stop ended")

-- l:trace options that go with one kind of trace only are refused elsewhere
-- (they would be ignored): step without interp = "linear", bin without
-- format = "mahimahi".
do
  local tnet = hn.network{ name = "ftrace", backend = "none" }
  local l = tnet:link(tnet:node("x"), tnet:node("y"))
  tnet:start()
  local csv = os.tmpname()
  local f = assert(io.open(csv, "w"))
  f:write("t,bw\n0,5Mbit\n1,10Mbit\n")
  f:close()
  for _, c in ipairs({ { { file = csv, step = "50ms" }, "step goes with interp = \"linear\"" },
                       { { file = csv, bin = "50ms" }, "bin goes with format = \"mahimahi\"" } }) do
    local ok, e = pcall(l.trace, l, c[1])
    assert(not ok and tostring(e):find("link x-y: trace: " .. c[2], 1, true), "l:trace: " .. tostring(e))
  end
  os.remove(csv)
  tnet:stop()
end

-- net:mobility's random-waypoint options are refused with a file (its
-- moves are as written: they would be ignored).
do
  local mnet = hn.network{ name = "fmob", backend = "none" }
  local t, e1, e2 = mnet:node("t"), mnet:node("e1"), mnet:node("e2")
  mnet:link(t, e1)
  mnet:link(e1, e2)
  for _, k in ipairs({ "seed", "dwell_s" }) do
    local o = { nodes = { t }, edges = { e1, e2 }, file = "moves.csv" }
    o[k] = k == "seed" and 1 or { 1, 2 }
    local ok, e = pcall(mnet.mobility, mnet, o)
    assert(not ok and tostring(e):find("net:mobility: " .. k .. " goes with model = \"random-waypoint\", not file", 1, true),
           "net:mobility with file and " .. k .. ": " .. tostring(e))
  end
end
