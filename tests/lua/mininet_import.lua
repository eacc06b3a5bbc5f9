-- hiernet.mininet: Mininet's own LinearTopo, TreeTopo and SingleSwitchTopo
-- and a custom file with TCLink parameters (tests/lua/mininet/) become the
-- same nodes, links, parameters and routes in hiernet networks (backend
-- none, never started); unsupported parameters, unrepresentable values,
-- bad names, Python errors and a missing class are one-line errors naming
-- the file, line, node, link or parameter. Needs Debian's mininet package.
local mininet = require("hiernet.mininet")

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local files = here .. "/mininet/"

local M = dofile(here .. "/lib/mininet_check.lua")
local network, expect_eq, expect_error, names, route = M.network, M.expect_eq, M.expect_error, M.names, M.route
M.skip_without_mininet()

local function link_set(links)
  local out = {}
  for _, l in ipairs(links) do out[#out + 1] = l.a.name .. "-" .. l.b.name end
  table.sort(out)
  return table.concat(out, " ")
end

-- ---- Mininet's own topologies ----

local net = network("linear")
local t = mininet.load(net, nil, "LinearTopo", { k = 4 })
expect_eq(names(t.hosts), "h1 h2 h3 h4", "LinearTopo hosts")
expect_eq(names(t.switches), "s1 s2 s3 s4", "LinearTopo switches")
expect_eq(link_set(t.links), "h1-s1 h2-s2 h3-s3 h4-s4 s2-s1 s3-s2 s4-s3", "LinearTopo links")
expect_eq(route(net, "h1", "h4"), "h1 s1 s2 s3 s4 h4", "LinearTopo route")
expect_eq(t.nodes.s3.kind, "switch", "s3 is a switch")
expect_eq(t.nodes.h3.kind, "host", "h3 is a host")
expect_eq(t.links[1]:params().bw, 0, "LinearTopo links are not shaped")

net = network("tree")
t = mininet.load(net, nil, "TreeTopo", { depth = 2, fanout = 3 })
expect_eq(names(t.hosts), "h1 h2 h3 h4 h5 h6 h7 h8 h9", "TreeTopo hosts")
expect_eq(names(t.switches), "s1 s2 s3 s4", "TreeTopo switches")
expect_eq(#t.links, 12, "TreeTopo links")
expect_eq(link_set(t.links), "s1-s2 s1-s3 s1-s4 s2-h1 s2-h2 s2-h3 s3-h4 s3-h5 s3-h6 s4-h7 s4-h8 s4-h9",
          "TreeTopo links")
expect_eq(route(net, "h1", "h2"), "h1 s2 h2", "TreeTopo route in one subtree")
expect_eq(route(net, "h1", "h9"), "h1 s2 s1 s4 h9", "TreeTopo route across the root")

net = network("single")
t = mininet.load(net, nil, "SingleSwitchTopo", { 5 }) -- k positional
expect_eq(names(t.hosts), "h1 h2 h3 h4 h5", "SingleSwitchTopo hosts")
expect_eq(names(t.switches), "s1", "SingleSwitchTopo switch")
expect_eq(link_set(t.links), "h1-s1 h2-s1 h3-s1 h4-s1 h5-s1", "SingleSwitchTopo links")
expect_eq(route(net, "h2", "h5"), "h2 s1 h5", "SingleSwitchTopo route")

-- ---- a custom file with TCLink parameters ----

local cores = 0
for line in io.lines("/proc/cpuinfo") do
  if line:match("^processor%s*:") then cores = cores + 1 end
end

local function check_edge(net, t, what)
  expect_eq(names(t.hosts), "h11 h12 h21 h22", what .. " hosts")
  expect_eq(names(t.switches), "core s1 s2", what .. " switches")
  expect_eq(link_set(t.links), "h11-h21 h11-s1 h12-s1 h21-s2 h22-s2 s1-core s2-core", what .. " links")
  local by_name = {}
  for _, l in ipairs(t.links) do by_name[l.a.name .. "-" .. l.b.name] = l:params() end
  local core_link, access, bare = by_name["s1-core"], by_name["h12-s1"], by_name["h11-h21"]
  expect_eq(core_link.bw, 100000000, "core bw (100 Mbit/s)")
  expect_eq(core_link.delay, 0.010, "core delay")
  expect_eq(core_link.jitter, 0.001, "core jitter")
  expect_eq(core_link.loss, 0.005, "core loss (0.5%)")
  expect_eq(core_link.queue, 200, "core max_queue_size")
  expect_eq(access.bw, 10500000, "access bw (10.5 Mbit/s)")
  expect_eq(access.delay, 0.0025, "access delay (2.5msec)")
  expect_eq(access.queue, 50, "access queue")
  expect_eq(access.loss, 0, "access loss")
  expect_eq(bare.delay, 0.00025, "a bare delay is microseconds, as tc reads it")
  expect_eq(bare.bw, 0, "no bw given: not limited")
  assert(math.abs(t.nodes.h11.cpu - 0.25 * cores) < 1e-9,
         string.format("cpu 0.25 of %d cores: got %s", cores, t.nodes.h11.cpu))
  -- Routes go by delay: the 0.25 ms h11-h21 link beats the core (2 x 10 ms).
  expect_eq(route(net, "h11", "h22"), "h11 h21 s2 h22", what .. " route by delay")
  expect_eq(route(net, "h12", "h22"), "h12 s1 h11 h21 s2 h22", what .. " route around the core")
end

net = network("edge")
check_edge(net, mininet.load(net, files .. "edge_topo.py", "EdgeTopo"), "EdgeTopo")
net = network("edge2")
check_edge(net, mininet.load(net, files .. "edge_topo.py", "edge", { 2, hosts_per_site = 2 }), "topos['edge']")
net = network("edge3")
t = mininet.load(net, files .. "edge_topo.py", "EdgeTopo", { sites = 3, hosts_per_site = 1, core_bw = 0.5 })
expect_eq(names(t.hosts), "h11 h21 h31", "EdgeTopo(sites=3) hosts")
for _, l in ipairs(t.links) do
  if l.b.name == "core" then expect_eq(l:params().bw, 500000, "float argument core_bw=0.5") end
end

-- ---- errors ----

local bad = files .. "bad_param.py"
expect_error("link h1-s1: unsupported parameter use_tbf=true", mininet.load, network("e1"), bad, "HtbTopo")
expect_error("link h1-s1: loss=150 cannot be represented in hiernet", mininet.load, network("e2"), bad, "LossyTopo")
local err = expect_error("host 'host one': ", mininet.load, network("e3"), bad, "BadNameTopo")
assert(err:find("is invalid", 1, true), err)
err = expect_error("bad_param.py:22: RaisingTopo(...): ValueError: no topology for n=7", mininet.load,
                   network("e4"), bad, "RaisingTopo", { n = 7 })
err = expect_error("no class 'NoSuchTopo' (topology classes there: BadNameTopo, HtbTopo, LossyTopo, RaisingTopo)",
                   mininet.load, network("e5"), bad, "NoSuchTopo")
assert(err:find(bad, 1, true), "the missing class error names the file: " .. err)
err = expect_error("syntax_error.py:4: loading the file: SyntaxError:", mininet.load, network("e6"),
                   files .. "syntax_error.py", "Broken")
expect_error("mininet has no topology class 'NoTopo'", mininet.load, network("e7"), nil, "NoTopo")
expect_error("LinearTopo(...): TypeError:", mininet.load, network("e8"), nil, "LinearTopo", { 1, 2, 3, 4 })
expect_error("no_such_file.py: no such file", mininet.load, network("e9"), files .. "no_such_file.py", "X")
local started = network("started")
started:node("x")
started:start()
expect_error("network 'started' is already started", mininet.load, started, nil, "LinearTopo")
started:stop()
expect_error("args: key true is neither", mininet.load, network("e10"), nil, "LinearTopo", { [true] = 1 })
