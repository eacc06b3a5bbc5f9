-- mininet_examples: the Topo classes that Debian's mininet package ships in
-- mininet/examples (each with the arguments its file's run() passes), the
-- classes of mininet.topo and mininet.topolib load as docs/lua-api.md's
-- Mininet table says, or are refused with the one-line reason it gives:
-- exact nodes, links, parallel link names, routes, parameters and log
-- lines (backend none, never started; tests/integration/network/
-- mininet_ping.lua pings them; tests/lua/mininet_roles.lua checks roles,
-- lenient and refusals on a file of its own). Needs Debian's mininet
-- package.
local mininet = require("hiernet.mininet")
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local M = dofile(here .. "/lib/mininet_check.lua")
local network, expect_eq, expect_error = M.network, M.expect_eq, M.expect_error
local names, link_names, route, load, expect_logged_once = M.names, M.link_names, M.route, M.load,
  M.expect_logged_once
M.skip_without_mininet()
local python = os.getenv("HIERNET_PYTHON") or "/usr/bin/python3"

local function python_line(code)
  local p = assert(io.popen(python .. " -c '" .. code .. "' 2>/dev/null"))
  local line = p:read("l")
  p:close()
  return line
end

local examples = python_line("import mininet.examples, os; print(os.path.dirname(mininet.examples.__file__))")
local library = python_line("import mininet.topo, os; print(os.path.dirname(mininet.topo.__file__))")
if not examples then
  print("SKIP: this mininet package ships no mininet.examples")
  os.exit(77)
end

-- ---- every Topo class of the examples is listed here ----

local EXAMPLES = {
  { "linearbandwidth.py", "LinearTestTopo", { 5 } }, -- sizes [1, 2, 3, 4]: hostCount = 5
  { "simpleperf.py", "SingleSwitchTopo", { n = 4, lossy = true } },
  { "multilink.py", "simpleMultiLinkTopo", { n = 2 } },
  { "linuxrouter.py", "NetworkTopo", {} },
  { "vlanhost.py", "VLANStarTopo", {} },
  { "natnet.py", "InternetTopo", {} },
  { "controlnet.py", "ControlNetwork", { n = 4 } },
}

local function topo_classes(dir, files, pattern)
  local found = {}
  for _, file in ipairs(files) do
    local f = io.open(dir .. "/" .. file)
    if f then
      for class in f:read("a"):gmatch(pattern) do found[#found + 1] = file .. ":" .. class end
      f:close()
    end
  end
  table.sort(found)
  return table.concat(found, " ")
end

do
  local p = assert(io.popen("ls " .. examples))
  local files = {}
  for file in p:lines() do if file:match("%.py$") then files[#files + 1] = file end end
  p:close()
  local listed = {}
  for i, e in ipairs(EXAMPLES) do listed[i] = e[1] .. ":" .. e[2] end
  table.sort(listed)
  expect_eq(topo_classes(examples, files, "\nclass%s+([%w_]+)%s*%(%s*Topo%s*%)"), table.concat(listed, " "),
            "the examples' Topo classes")
  expect_eq(topo_classes(library, { "topo.py", "topolib.py" }, "\nclass%s+([%w_]+Topo)%s*%("),
            "topo.py:LinearTopo topo.py:MinimalTopo topo.py:SingleSwitchReversedTopo topo.py:SingleSwitchTopo "
              .. "topolib.py:TorusTopo topolib.py:TreeTopo", "mininet.topo's and topolib's classes")
end

local function example(i)
  local e = EXAMPLES[i]
  return examples .. "/" .. e[1], e[2], e[3]
end

-- linearbandwidth.py: a chain of 4 switches, 5 hosts.
local t, net = load(example(1))
expect_eq(names(t.hosts), "h1 h2 h3 h4 h5", "LinearTestTopo hosts")
expect_eq(names(t.switches), "s1 s2 s3 s4", "LinearTestTopo switches")
expect_eq(route(net, "h1", "h5"), "h1 s1 s2 s3 s4 h5", "LinearTestTopo route")

-- simpleperf.py: use_htb is what hiernet does anyway; 10 Mbit/s, 5 ms, 10%.
local log
t, net, log = load(example(2))
expect_eq(names(t.hosts), "h1 h2 h3 h4", "simpleperf hosts")
expect_eq(link_names(t.links), "h1-s1 h2-s1 h3-s1 h4-s1", "simpleperf links")
for _, l in ipairs(t.links) do
  local p = l:params()
  expect_eq(p.bw, 10000000, l.name .. " bw")
  expect_eq(p.delay, 0.005, l.name .. " delay")
  expect_eq(p.loss, 0.1, l.name .. " loss")
end
expect_logged_once(log, "ignored use_htb (hiernet always shapes: HTB on the kernel backend, hiernet-linkd on the "
                   .. "user backend)", "simpleperf")

-- multilink.py: two links from s1 to each host, each a link of its own.
t, net, log = load(example(3))
expect_eq(names(t.hosts), "h1 h2", "multilink hosts")
expect_eq(link_names(t.links), "s1-h1 s1-h1#2 s1-h2 s1-h2#2", "multilink links")
expect_eq(route(net, "h1", "h2"), "h1 s1 h2", "multilink route")
expect_logged_once(log, "parallel links h1-s1 (2), h2-s1 (2): separate links", "multilink")

-- linuxrouter.py: r0 (LinuxRouter turns forwarding on) routes between three subnets.
t, net, log = load(example(4))
expect_eq(names(t.hosts), "h1 h2 h3", "linuxrouter hosts")
expect_eq(names(t.routers), "r0", "linuxrouter routers")
expect_eq(t.nodes.r0.tier, "router", "r0's tier")
expect_eq(route(net, "h1", "h3"), "h1 s1 r0 s3 h3", "linuxrouter route")
expect_logged_once(log, "r0 (LinuxRouter) routes as a hiernet node (every hiernet node forwards, on routes hiernet "
                   .. "computes); its subnets 10.0.0.0/8, 172.16.0.0/12, 192.168.1.0/24 become hiernet's own "
                   .. "addresses", "linuxrouter")
expect_logged_once(log, "ignored defaultRoute, ip, params2 (hiernet assigns its own addresses)", "linuxrouter")
expect_logged_once(log, "ignored intfName2 (hiernet names interfaces itself)", "linuxrouter")

-- vlanhost.py: the VLAN hosts without their VLANs, on one switch.
t, net, log = load(example(5))
expect_eq(names(t.hosts), "h1 h1-100 h1-101 h2 h2-100 h2-101", "VLANStarTopo hosts")
expect_eq(route(net, "h1-100", "h2-101"), "h1-100 s1 h2-101", "VLANStarTopo route")
expect_logged_once(log, "VLANHost without its VLAN: h1-100 (100), h1-101 (101), h2-100 (100), h2-101 (101) share "
                   .. "one network with the other hosts", "vlanhost")

-- natnet.py and controlnet.py stay refused, lenient or not.
local function refused(i, options)
  local file, class, args = example(i)
  return mininet.load(network("refused" .. i), file, class, args, options)
end
for _, options in ipairs({ {}, { lenient = true } }) do
  expect_error("natnet.py: host 'nat1': class NAT cannot be represented: it translates addresses (iptables "
               .. "MASQUERADE) to reach outside the emulated network", refused, 6, options)
  expect_error("controlnet.py: host 'c0': class DataController cannot be represented: it is an OpenFlow "
               .. "controller", refused, 7, options)
end

-- ---- mininet.topo and mininet.topolib ----

t, net = load(nil, "SingleSwitchReversedTopo", { k = 3 })
expect_eq(link_names(t.links), "h1-s1 h2-s1 h3-s1", "SingleSwitchReversedTopo links (ports dropped)")
t, net = load(nil, "LinearTopo", { k = 3, n = 2 })
expect_eq(names(t.hosts), "h1s1 h1s2 h1s3 h2s1 h2s2 h2s3", "LinearTopo(n=2) hosts")
expect_eq(route(net, "h1s1", "h2s3"), "h1s1 s1 s2 s3 h2s3", "LinearTopo(n=2) route")
t, net = load(nil, "TreeTopo", { depth = 2, fanout = 2 })
expect_eq(route(net, "h1", "h4"), "h1 s2 s1 s3 h4", "TreeTopo route")
t, net = load(nil, "MinimalTopo")
expect_eq(route(net, "h1", "h2"), "h1 s1 h2", "MinimalTopo route")
t, net = load(nil, "SingleSwitchTopo", { k = 3 })
expect_eq(route(net, "h1", "h3"), "h1 s1 h3", "SingleSwitchTopo route")
-- TorusTopo loads; its switches close loops, which a start on the kernel or
-- user backend refuses (mininet_ping.lua): Mininet itself needs STP there.
t, net = load(nil, "TorusTopo", { 3, 3 })
expect_eq(#t.hosts .. " hosts, " .. #t.switches .. " switches, " .. #t.links .. " links",
          "9 hosts, 9 switches, 27 links", "TorusTopo")

print("examples loaded: 5 of 7 (natnet.py: NAT, controlnet.py: an OpenFlow controller stay refused)")
