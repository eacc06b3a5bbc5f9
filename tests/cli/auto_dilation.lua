-- auto_dilation: the workloads of test_auto_dilation.sh, on backend none.
--   load=light   one node at speed 0.05 (a device 20 times slower than this
--                host) computing 60 norms 20 ms apart: its budget is 20
--                times its CPU time, so only a run-queue delay of 19 times
--                that could starve it
--   load=starve  4 x the host's cores nodes at speed 1 computing norms back
--                to back: each gets about a quarter of a core, so most of
--                their commands are starved of CPU
-- Prints "dilation D" (the run's) at the end; the network names "auto".
local hn = require("hiernet")

local load = hn.param("load", "light")
local net = hn.network{ name = "auto", backend = "none", dilation = "auto" }
local nodes = {}
if load == "light" then
  nodes[1] = net:node("light", { speed = 0.05 })
elseif load == "starve" then
  local cores = tonumber(io.popen("nproc"):read("l")) or 2
  for i = 1, 4 * cores do nodes[i] = net:node("w" .. i) end
else
  error(string.format("auto_dilation: load must be light or starve, got '%s'", load))
end
net:start()
local tasks = {}
for i, w in ipairs(nodes) do
  w:tensor{ name = "x", size = 4000000, fill = 1 }
  tasks[i] = hn.spawn(function()
    for _ = 1, (load == "light" and 60 or 40) do
      w:norm{ x = "x" }
      if load == "light" then hn.sleep(0.02) end
    end
  end)
end
for _, t in ipairs(tasks) do t:wait() end
print(string.format("dilation %g", net.dilation))
net:stop()
