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

-- Every builder takes link, node and prefix, and refuses an unknown option
-- naming it, before it makes anything.
local function fails(fn, want)
  local ok, msg = pcall(fn)
  assert(not ok and tostring(msg):find(want, 1, true), "want an error with " .. want .. ", got " .. tostring(msg))
  assert(not tostring(msg):find("\n"), "a one-line error: " .. tostring(msg))
  return msg
end
local REQUIRED = { star = { n = 3 }, line = { n = 3 }, ring = { n = 3 }, mesh = { n = 3 },
                   tree = { fanout = 2, depth = 1 }, hier = { edges_per_cloud = 1, terminals_per_edge = 1 } }
local function with(name, extra)
  local o = {}
  for k, v in pairs(REQUIRED[name]) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end
for _, name in ipairs{ "star", "line", "ring", "mesh", "tree", "hier" } do
  local n = hn.network{ name = "opt" .. name, backend = "none" }
  local msg = fails(function() topo[name](n, with(name, { lnk = {} })) end,
                    "topo." .. name .. ": unknown option 'lnk'")
  assert(msg:find("link, node, prefix", 1, true), msg)
  assert(msg:find("topo_builders.lua:", 1, true), "the error names the caller's line: " .. msg)
  assert(#n:nodes() == 0, name .. ": nothing made before the options were checked")
  fails(function() topo[name](n, with(name, { link = "10Mbit" })) end,
        "topo." .. name .. ": option 'link' must be a table")
  topo[name](n, with(name, { link = { delay = "3ms" }, node = { speed = 0.5 }, prefix = "p" }))
  assert(#n:nodes() > 0, name)
  for _, node in ipairs(n:nodes()) do
    if node.kind ~= "switch" then
      assert(node.name:sub(1, 1) == "p", name .. ": prefix: " .. node.name)
      assert(node.speed == 0.5, name .. ": node option on " .. node.name)
    end
  end
end
fails(function() topo.star(hn.network{ name = "c", backend = "none" }, { n = 2, center = "hub" }) end,
      "option 'center' must be \"switch\" or \"host\"")
fails(function() topo.hier(hn.network{ name = "k", backend = "none" },
                           { edges_per_cloud = 1, terminals_per_edge = 1, links = { edge_terminals = {} } }) end,
      "unknown key 'edge_terminals' in option 'links'")
fails(function() topo.hier(hn.network{ name = "k2", backend = "none" },
                           { edges_per_cloud = 1, terminals_per_edge = 1, nodes = { edges = {} } }) end,
      "unknown key 'edges' in option 'nodes'")

-- hier: `link` and `node` apply to every tier its links / nodes leave out
-- (they were ignored), links.* and nodes.* win; the prefix names every node.
local hnet = hn.network{ name = "hl", backend = "none" }
local ht = topo.hier(hnet, { clouds = 2, edges_per_cloud = 1, terminals_per_edge = 2, prefix = "x",
                             link = { bw = "7Mbit", delay = "4ms" }, links = { cloud_edge = { bw = "1Gbit" } },
                             node = { speed = 0.25 }, nodes = { cloud = { speed = 2 } } })
assert(ht.cloud[2].name == "xcloud2" and ht.edge[1].name == "xedge1" and ht.terminal[4].name == "xt4")
assert(ht.cloud[1].speed == 2 and ht.edge[2].speed == 0.25 and ht.terminal[3].speed == 0.25)
hnet:start()
local core = require("hiernet.core")
local f = assert(io.open(hn.results_dir() .. "/run.json"))
local info = assert(core._json_decode(f:read("a")))
f:close()
local bw = {}
for _, net in ipairs(info.topology) do
  if net.name == "hl" then
    for _, l in ipairs(net.links) do bw[l.a .. "-" .. l.b] = l.bw_bps end
  end
end
assert(bw["xedge1-xt1"] == 7e6, "edge_terminal from link: " .. tostring(bw["xedge1-xt1"]))
assert(bw["xcloud1-xedge1"] == 1e9, "cloud_edge from links: " .. tostring(bw["xcloud1-xedge1"]))
assert(bw["xcloud1-xcloud2"] == 1e9, "cloud_cloud falls back to cloud_edge: " .. tostring(bw["xcloud1-xcloud2"]))
hnet:stop()

-- node as a function(i, tier): every builder hands it the node's number.
local fnet = hn.network{ name = "fn", backend = "none" }
local seen = {}
local function speed_of(i, tier)
  seen[#seen + 1] = (tier or "-") .. ":" .. tostring(i)
  return { speed = 1 / (i + 1) }
end
local fs = topo.star(fnet, { n = 2, center = "host", center_name = "c", node = speed_of, prefix = "s" })
assert(fs.center.speed == 1 and fs.hosts[2].speed == 1 / 3, "star: speeds by number")
local ft = topo.tree(fnet, { fanout = 2, depth = 1, node = speed_of, prefix = "r" })
assert(ft.root.speed == 1 / 2 and ft.leaves[2].speed == 1 / 4, "tree: speeds by number")
assert(table.concat(seen, " ") == "-:0 -:1 -:2 -:1 -:2 -:3", "node(i, tier) calls: " .. table.concat(seen, " "))
