-- multihost.lua — the networks of tools/bench/multihost, on this machine or
-- placed over the machines file named by hosts= (empty: this machine).
--   what=tree n=999: n nodes in a complete 4-ary tree (node i's parent is
--     (i-2)//4+1), 1 Gbit/s links (kernel backend: no netem needed); prints
--     "tree N UP_S STOP_S": net:start() until every peer answered, and
--     net:stop() until every part is gone.
--   what=pair: h1 on m1 and h2 on m2, one unshaped link between them (a
--     VXLAN device on the kernel backend), held like quickstart_net.lua:
--     "node NAME PEER_PID ADDR" lines, the file ready= made, stopped when
--     the file done= exists.
local hn = require("hiernet")
local what = hn.param("what", "tree")
local hosts = hn.param("hosts", "")
hosts = hosts ~= "" and hosts or nil
local net = hn.network{ name = "mh" .. what, backend = "kernel", hosts = hosts }

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

if what == "tree" then
  local n = tonumber(hn.param("n", 999))
  local nodes = {}
  for i = 1, n do
    nodes[i] = net:node("n" .. i)
    if i > 1 then net:link(nodes[(i - 2) // 4 + 1], nodes[i], { bw = "1Gbit" }) end
  end
  local t0 = hn.now()
  net:start()
  local t1 = hn.now()
  net:stop()
  print(string.format("tree %d %.4f %.4f", n, t1 - t0, hn.now() - t1))
elseif what == "pair" then
  local h1 = net:node("h1", { host = hosts and "m1" or nil })
  local h2 = net:node("h2", { host = hosts and "m2" or nil })
  net:link(h1, h2, {})
  net:start()
  for _, n in ipairs{ h1, h2 } do print(string.format("node %s %d %s", n.name, n:stats().pid, n.addr)) end
  io.stdout:flush()
  io.open(hn.param("ready", ""), "w"):close()
  local deadline = hn.now() + 60
  while not exists(hn.param("done", "")) and hn.now() < deadline do hn.sleep(0.05) end
  net:stop()
else
  error("what must be tree or pair, got " .. tostring(what))
end
