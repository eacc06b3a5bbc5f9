-- concurrent_start: starting a network never stalls the run's other tasks.
-- Two networks start (and later stop) at once from two tasks while a third
-- task sleeps 50 ms at a time and records how late each wake-up is. Asserts
-- both networks start and stop, and that the worst lateness stays well
-- below a start's duration (a start that blocked the loop would make some
-- wake-up as late as the start took). Arguments: the backend (default
-- none) and a function called with each started network;
-- tests/integration/network/concurrent_start.lua runs it on kernel and user.
local hn = require("hiernet")
local backend, on_started = ...
backend = backend or "none"
local hosts = backend == "none" and 150 or 40

local function make(name)
  local net = hn.network{ name = name, backend = backend, seed = 1 }
  local sw = backend ~= "none" and net:switch("s") or nil
  for i = 1, hosts do
    local n = net:node(name .. i)
    if sw then net:link(n, sw, { bw = "1Gbit" }) end
  end
  return net
end

local running, lateness = true, { worst = 0, n = 0 }
local ticker = hn.spawn(function()
  while running do
    local t0 = hn.now()
    hn.sleep(0.05)
    local late = hn.now() - t0 - 0.05
    lateness.n = lateness.n + 1
    if late > lateness.worst then lateness.worst = late end
  end
end)

local a, b = make("ca"), make("cb")
local took = {}
local function start_stop(net)
  local t0 = hn.now()
  net:start()
  took[#took + 1] = hn.now() - t0
  assert(net:state() == "started", net.name .. " is " .. net:state())
  if on_started then on_started(net) end
  hn.sleep(0.1)
  net:stop()
  assert(net:state() == "stopped", net.name .. " is " .. net:state())
end
hn.sleep(0.06) -- the ticker's first sleep is under way
hn.wait_all({ hn.spawn(start_stop, a), hn.spawn(start_stop, b) })
running = false
ticker:wait()

local slowest = math.max(took[1], took[2])
print(string.format("concurrent_start(%s): starts %.3f s and %.3f s; %d ticks, worst lateness %.4f s",
                    backend, took[1], took[2], lateness.n, lateness.worst))
assert(lateness.n >= 3, "the ticker woke only " .. lateness.n .. " times")
assert(lateness.worst < math.max(0.4 * slowest, 0.02),
       string.format("a tick was %.4f s late while starts took %.3f s: the loop blocked",
                     lateness.worst, slowest))
