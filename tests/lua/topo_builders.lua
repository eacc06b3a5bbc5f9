-- Topology builders and routes on the model (backend none records links
-- without emulating them): node counts, tiers, names, paths by delay.
local hn = require("hiernet")
local topo = require("hiernet.topo")

local function path(net, a, b) return table.concat(net:route(a, b), ",") end

local net = hn.network{ name = "h", backend = "none" }
local t = topo.hier(net, { clouds = 2, edges_per_cloud = 2, terminals_per_edge = 3,
                           links = { cloud_edge = { bw = "1Gbit", delay = "10ms" },
                                     edge_terminal = { bw = "20Mbit", delay = "5ms" },
                                     cloud_cloud = { bw = "10Gbit", delay = "20ms" } } })
assert(#t.cloud == 2 and #t.edge == 4 and #t.terminal == 12, "hier counts")
assert(t.terminal[12].tier == "terminal" and t.edge[1].tier == "edge" and t.cloud[2].tier == "cloud")
assert(path(net, "t1", "t12") == "t1,edge1,cloud1,cloud2,edge4,t12", path(net, "t1", "t12"))
assert(path(net, t.terminal[1], t.terminal[2]) == "t1,edge1,t2")
assert(#net:nodes() == 18)

local s = topo.star(hn.network{ name = "s", backend = "none" }, { n = 5, link = { delay = "1ms" } })
assert(#s.hosts == 5 and s.center.kind == "switch")
assert(path(s.center.network, "h1", "h5") == "h1,center,h5")

local line = hn.network{ name = "l", backend = "none" }
topo.line(line, { n = 4 })
assert(path(line, "h1", "h4") == "h1,h2,h3,h4")

local ring = hn.network{ name = "r", backend = "none" }
topo.ring(ring, { n = 6, link = { delay = "1ms" } })
assert(path(ring, "h1", "h5") == "h1,h6,h5", "ring goes the short way: " .. path(ring, "h1", "h5"))

local tree = topo.tree(hn.network{ name = "t", backend = "none" }, { fanout = 3, depth = 2 })
assert(#tree.leaves == 9 and #tree.hosts == 13 and tree.root.name == "n")
assert(path(tree.root.network, "n1.1", "n3.3") == "n1.1,n1,n,n3,n3.3")

local mesh = hn.network{ name = "m", backend = "none" }
topo.mesh(mesh, { n = 4, link = { delay = "2ms" } })
assert(path(mesh, "h1", "h4") == "h1,h4")

-- Link parameters are validated with the value quoted.
local bad = hn.network{ name = "bad", backend = "none" }
local a, b = bad:node("a"), bad:node("b")
local ok, err = pcall(bad.link, bad, a, b, { delay = "-5ms" })
assert(not ok and err:find("link a-b: delay", 1, true) and err:find("-5ms", 1, true), tostring(err))
ok, err = pcall(bad.link, bad, a, b, { bw = "10Mbps" })
assert(not ok and err:find("10Mbps", 1, true), tostring(err))
ok, err = pcall(bad.link, bad, a, a, {})
assert(not ok and err:find("linked to itself"), tostring(err))
ok, err = pcall(bad.link, bad, a, "nobody", {})
assert(not ok and err:find("no node named 'nobody'"), tostring(err))
ok, err = pcall(bad.route, bad, a, b)
assert(not ok and err:find("no path from 'a' to 'b'"), tostring(err))
local l = bad:link(a, b, { bw = 1e6, delay = 0.005, loss = "1%", queue = 50 })
assert(l.name == "a-b" and l.a == a and l.b == b)
