-- quickstart_net.lua — the quickstart's network (scenarios/quickstart.lua:
-- the same topo.hier, links, node speeds and seed), started and held so
-- that the test or bench measures its paths from outside: it prints one
-- line per node ("node NAME PEER_PID ADDR"), creates the file named by
-- ready= and stops the network when the file named by done= exists.
-- hosts= places it over a machines file (empty: this machine only).
local hn = require("hiernet")
local topo = require("hiernet.topo")
local hosts = hn.param("hosts", "")
local net = hn.network{ name = "qsnet", backend = hn.param("backend", "user"), seed = 1,
                        hosts = hosts ~= "" and hosts or nil }
topo.hier(net, {
  clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
  links = { cloud_edge = { bw = "1Gbit", delay = "5ms" },
            edge_terminal = { bw = "20Mbit", delay = "10ms", loss = "0.5%" } },
  nodes = { terminal = function(i) return { speed = (i % 3 == 0) and 0.05 or 0.1 } end },
})
net:start()
for _, n in ipairs(net:nodes()) do
  print(string.format("node %s %d %s", n.name, n:stats().pid, n.addr))
end
io.stdout:flush()
io.open(hn.param("ready", ""), "w"):close()
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end
local deadline = hn.now() + tonumber(hn.param("hold_s", 60))
while not exists(hn.param("done", "")) and hn.now() < deadline do hn.sleep(0.05) end
net:stop()
