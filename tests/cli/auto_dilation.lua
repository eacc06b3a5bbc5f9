-- auto_dilation: the workloads of test_auto_dilation.sh, on backend none.
--   load=light   one node at speed 0.05 (a device 20 times slower than this
--                host) computing 60 small gradients 20 ms apart: its budget
--                is 20 times its CPU time, so only a run-queue delay of 19
--                times that could starve it
--   load=starve  8 x the host's cores nodes at speed 1 computing 24 gradients
--                of 1024 samples (about 10 ms of CPU each) back to back
--                (on a quiet 2-core host 6 ended in 0.6 s, inside the
--                probe's 1 s, so the probe never judged):
--                each gets at most an eighth of a core, so most of their
--                commands are starved of CPU, by the run's own demand even
--                beside other programs' load; the rerun (at the probe's
--                dilation D > 1) computes 2 gradients each, as nothing of
--                its work is checked but its dilation (24 would cost D x
--                0.24 s of wall time and more)
--   from=cli     the network names no dilation, so only --dilation auto can
--                make it auto (from=scenario, the default: it names "auto")
-- Prints "dilation D" (the run's) at the end.
local hn = require("hiernet")

local load = hn.param("load", "light")
local from = hn.param("from", "scenario")
if from ~= "scenario" and from ~= "cli" then
  error(string.format("auto_dilation: from must be scenario or cli, got '%s'", from))
end
local net = hn.network{ name = "auto", backend = "none", dilation = from == "scenario" and "auto" or nil }
local nodes, batch, count = {}, 64, 60
if load == "light" then
  nodes[1] = net:node("light", { speed = 0.05 })
elseif load == "starve" then
  local cores = tonumber(io.popen("nproc"):read("l")) or 2
  for i = 1, 8 * cores do nodes[i] = net:node("w" .. i) end
  batch, count = 1024, 24
else
  error(string.format("auto_dilation: load must be light or starve, got '%s'", load))
end
net:start()
if net.dilation > 1 then count = 2 end
local tasks = {}
for i, w in ipairs(nodes) do
  tasks[i] = hn.spawn(function()
    w:dataset{ name = "synthetic", n = 4096, dim = 784, classes = 10, seed = i }
    w:model{ name = "m", arch = "mlp:784-256-128-10", seed = 1 }
    for _ = 1, count do
      w:grad{ model = "m", batch = batch }
      if load == "light" then hn.sleep(0.02) end
    end
  end)
end
hn.wait_all(tasks)
print(string.format("dilation %g", net.dilation))
net:stop()
