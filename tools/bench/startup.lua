-- startup.lua — one start-up measurement for tools/bench/startup.
-- Args (key=value): topo=star|direct|tree, n= (host nodes), backend=kernel|user|auto.
--   star: n hosts on one switch (Mininet's "single switch" topology);
--   direct: one host linked to n others (a parameter server and n workers:
--     n + 1 hosts, n point-to-point links);
--   tree: n hosts in a complete 4-ary tree (host i's parent is (i-2)//4+1).
-- Every link is bw = "1Gbit" only, so the kernel backend needs no sch_netem.
-- Prints one line: "startup <topo> <n> <backend> <build_s> <up_s> <down_s> <ping> <end_s>"
-- where build = the network model (nodes, links), up = net:start() until
-- every peer answered, down = net:stop() until every peer exited, and ping =
-- "ok" when the first host reached the last one (a sanity check, not timed)
-- and end = seconds since the run started when net:stop() returned (the
-- shell subtracts it from the process's lifetime to see what teardown is
-- left after net:stop(): linkd's exit, TAP devices, process exit).
local hn = require("hiernet")
local a = {}
for _, w in ipairs({ ... }) do
  local k, v = w:match("^(%w+)=(.*)$")
  if k then a[k] = v end
end
local kind, n, backend = a.topo or "star", tonumber(a.n or 10), a.backend or "kernel"
local link = { bw = "1Gbit" }

local t0 = hn.now()
local net = hn.network{ name = kind, backend = backend }
local hosts = {}
if kind == "star" then
  local sw = net:switch("sw")
  for i = 1, n do
    hosts[i] = net:node("h" .. i)
    net:link(sw, hosts[i], link)
  end
elseif kind == "direct" then
  local ps = net:node("ps")
  for i = 1, n do
    hosts[i] = net:node("w" .. i)
    net:link(ps, hosts[i], link)
  end
elseif kind == "tree" then
  for i = 1, n do
    hosts[i] = net:node("n" .. i)
    if i > 1 then net:link(hosts[(i - 2) // 4 + 1], hosts[i], link) end
  end
else
  error("topo must be star, direct or tree, got " .. tostring(kind))
end
local t1 = hn.now()
net:start()
local t2 = hn.now()
local ping = "skipped"
if n > 1 then
  local r = hosts[1]:run({ "ping", "-n", "-c", "1", "-W", "2", hosts[n].addr })
  ping = r.status == 0 and "ok" or "FAILED"
end
local t3 = hn.now()
net:stop()
local t4 = hn.now()
print(string.format("startup %s %d %s %.4f %.4f %.4f %s %.4f", kind, n, net.backend, t1 - t0, t2 - t1,
                    t4 - t3, ping, t4))
