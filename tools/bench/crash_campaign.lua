-- Scenario half of tools/bench/crash_campaign: a small parameter-server
-- run with everything a crash could leave behind: peers in namespaces
-- (kernel or user backend, so linkd too), a switch, cpu limits (cgroups),
-- a program in a node and a daemon it detaches (setsid), a CSV
-- written every step. It logs "phase train" once started, "phase stop" just
-- before net:stop() and "phase done" after it: the anchor run's log gives
-- the campaign the length of each phase.
local hn = require("hiernet")
local backend = hn.param("backend", "kernel")
local seconds = hn.param("seconds", 2.0)
local workers = hn.param("workers", 4)
-- The campaign's kill from inside the run: "train" (kill_delay s into
-- training) or "stop" (kill_delay s after net:stop() begins, which may land
-- in the process's own teardown after it), timed from here by a detached
-- shell; kills during net:start() come from outside (it holds the loop).
local kill_phase = hn.param("kill_phase", "none")
local kill_delay = hn.param("kill_delay", 0.0)

local function controller_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("*l"):match("^(%d+)")
  f:close()
  return pid
end

-- SIGKILL of this very controller kill_delay seconds after kill_fire(), by a
-- shell started beforehand (kill_arm), which waits on a FIFO: firing costs
-- one write, not a fork, so even a kill early in a 30 ms net:stop() lands
-- where it was aimed.
local fifo
local function kill_arm(phase)
  if kill_phase ~= phase then return end
  fifo = os.tmpname()
  os.remove(fifo)
  assert(os.execute("mkfifo -m 600 " .. fifo), "mkfifo " .. fifo)
  os.execute(string.format("(read go < %s; rm -f %s; sleep %.3f; kill -KILL %s) </dev/null >/dev/null 2>&1 &",
                           fifo, fifo, kill_delay, controller_pid()))
end

local function kill_fire()
  if not fifo then return end
  local f = assert(io.open(fifo, "w"))
  f:write("go\n")
  f:close()
end

local net = hn.network{ name = "crash", backend = backend }
local sw = net:switch("sw")
local server = net:node("ps", { tier = "cloud", cpu = 1.0 })
net:link(server, sw, { bw = "1Gbit" })
local w = {}
for i = 1, workers do
  w[i] = net:node("w" .. i, { tier = "terminal", cpu = 0.5 })
  net:link(w[i], sw, { bw = "100Mbit" })
end
net:start()
hn.log("phase train")
local t0 = hn.now()
kill_arm("train")
kill_fire()
kill_arm("stop")

-- A program that leaves a detached daemon (a new session) in its node.
local prog = server:spawn({ "sh", "-c", "setsid -f sleep 302 </dev/null >/dev/null 2>&1; exec sleep 300" })
local rec = hn.record("steps", { "time", "worker", "step", "loss" })
server:model{ name = "m", arch = "logreg:16-4" }
local tasks = {}
for i = 1, workers do
  tasks[i] = hn.spawn(function()
    local n = w[i]
    n:dataset{ name = "synthetic", n = 2000, dim = 16, classes = 4, shard = i, shards = workers }
    n:model{ name = "m", arch = "logreg:16-4" }
    local step = 0
    while hn.now() - t0 < seconds do
      step = step + 1
      local g = n:grad{ model = "m", batch = 32 }
      n:send{ tensor = "grad", to = server, as = "g" .. i }
      server:axpy{ y = "m", x = "g" .. i, alpha = -0.05 }
      server:send{ tensor = "m", to = n }
      rec:add{ time = hn.now(), worker = i, step = step, loss = g.loss }
    end
  end)
end
hn.wait_all(tasks)
hn.log("phase stop")
kill_fire()
net:stop() -- ends the program and its daemon too
hn.log("phase done")
