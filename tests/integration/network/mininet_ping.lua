-- mininet_ping: the Topo classes of the mininet package's examples that
-- hiernet accepts (tests/lua/mininet_examples.lua loads every one, with the
-- arguments its file's run() passes) start on a real backend, and one ping
-- crosses each, between its first and its last host (ping -c1 -w5 repeats
-- until one answer comes: simpleperf's links lose 10%). Then the parallel
-- links of tests/lua/mininet/roles_topo.py (r1 = r2: 5 ms and 1 ms): the
-- route takes the 1 ms one, and l:set reaches each link on its own: 30 ms
-- on the routed link lifts h1 -> h2 to at least 60 ms, 40 ms on the other
-- lifts a ping of r2's address on that link to at least 80 ms (lower bounds
-- only: a busy machine only adds time). Mininet's TorusTopo (loops of
-- switches) is refused at the start.
-- Args: backend=kernel|user; owned=, regdir= from lib.sh.
local hn = require("hiernet")
local mininet = require("hiernet.mininet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local roles_file = dir .. "../../lua/mininet/roles_topo.py"

local p = assert(io.popen("/usr/bin/python3 -c 'import mininet.examples, os; "
                          .. "print(os.path.dirname(mininet.examples.__file__))' 2>/dev/null"))
local examples = p:read("l")
p:close()
H.check(examples, "no mininet.examples (mininet_ping.sh checks that the package is there)")

local ACCEPTED = {
  { "linearbandwidth.py", "LinearTestTopo", { 5 }, "h1", "h5" },
  { "simpleperf.py", "SingleSwitchTopo", { n = 4, lossy = true }, "h1", "h4" },
  { "multilink.py", "simpleMultiLinkTopo", { n = 2 }, "h1", "h2" },
  { "linuxrouter.py", "NetworkTopo", {}, "h1", "h3" },
  { "vlanhost.py", "VLANStarTopo", {}, "h1-100", "h2-101" },
}

local function ping(from, addr)
  local r = from:run({ "ping", "-n", "-c", "1", "-w", "5", addr })
  H.check(r.status == 0, "%s: ping %s failed: %s%s", from.name, addr, r.out, r.err)
  return tonumber(r.out:match("time=([%d%.]+) ms"))
end

for i, e in ipairs(ACCEPTED) do
  local file, class, args, a, b = examples .. "/" .. e[1], e[2], e[3], e[4], e[5]
  local net = hn.network{ name = "mn" .. i, backend = A.backend or "user" }
  local t = mininet.load(net, file, class, args)
  net:start()
  H.own(net)
  local ms = ping(t.nodes[a], t.nodes[b].addr)
  H.log("%s %s: %s -> %s answered in %.2f ms", e[1], class, a, b, ms)
  net:stop()
end

-- TorusTopo's switches close loops: the start refuses it, naming a link.
local torus = hn.network{ name = "mntorus", backend = A.backend or "user" }
mininet.load(torus, nil, "TorusTopo", { 3, 3 })
local ok, err = pcall(torus.start, torus)
H.check(not ok and tostring(err):find("closes a loop of switches", 1, true), "TorusTopo started: %s", tostring(err))

-- Parallel links: which one routes, and l:set on each.
local net = hn.network{ name = "mnpar", backend = A.backend or "user" }
local t = mininet.load(net, roles_file, "RouterTopo", nil, { roles = { StaticRouter = "router" } })
local first, second = t.links[2], t.links[3]
H.check(first.name == "r1-r2" and second.name == "r1-r2#2", "parallel links: %s, %s", first.name, second.name)
net:start()
H.own(net)
local h1, h2, r1, r2 = t.nodes.h1, t.nodes.h2, t.nodes.r1, t.nodes.r2
ping(h1, h2.addr)
second:set{ delay = "30ms" }
local ms = ping(h1, h2.addr)
H.check(ms and ms >= 60, "h1 -> h2 after 30 ms on r1-r2#2: %s ms (< 60: the route does not take r1-r2#2)", ms)
H.log("h1 -> h2 over r1-r2#2 at 30 ms: %.2f ms", ms)
-- r2's end of the first link: the interface hiernet named after r1.
local r = r2:run({ "ip", "-o", "-4", "addr", "show", "dev", "r1" })
local addr = r.out:match("inet ([%d.]+)/")
H.check(addr, "r2 has no address on its interface r1: %s%s", r.out, r.err)
first:set{ delay = "40ms" }
ms = ping(r1, addr)
H.check(ms and ms >= 80, "r1 -> %s (r2 on r1-r2) after 40 ms on r1-r2: %s ms (< 80)", addr, ms)
H.check(second:params().delay == 0.030 and first:params().delay == 0.040, "l:params after the two sets")
H.log("r1 -> r2 over r1-r2 at 40 ms: %.2f ms", ms)
net:stop()
