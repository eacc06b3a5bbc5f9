-- hiernet.topo: topology builders. Each takes a network (not yet started) and
-- an options table, adds nodes and links, and returns the nodes it made.
--
--   local topo = require("hiernet.topo")
--   local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
--                              links = { cloud_edge = { bw = "1Gbit", delay = "10ms" },
--                                        edge_terminal = { bw = "20Mbit", delay = "5ms" } } })
--   t.cloud[1], t.edge[2], t.terminal[6]
--
-- Common options: `link` (parameters of every link), `node` (options of
-- every node), `prefix` (name prefix).
local topo = {}

local function check_count(what, value, min)
  if math.type(value) ~= "integer" or value < min then
    error(string.format("topo.%s must be an integer >= %d, got %s", what, min, tostring(value)), 3)
  end
  return value
end

-- Options of one node: `base` is a table, or a function(i, tier) giving one
-- (per-node options, e.g. slower terminals); i numbers the nodes of a tier.
local function node_opts(base, tier, i)
  if type(base) == "function" then base = base(i, tier) end
  local o = {}
  for k, v in pairs(base or {}) do o[k] = v end
  if tier and o.tier == nil then o.tier = tier end
  return o
end

local function hosts(net, n, prefix, opts, tier)
  local list = {}
  for i = 1, n do list[i] = net:node(prefix .. i, node_opts(opts, tier, i)) end
  return list
end

-- star{n=, center="switch"|"host", center_name=, link=, node=, prefix="h"}
-- -> {center=, hosts={...}}: every host linked to one center.
function topo.star(net, o)
  o = o or {}
  local n = check_count("star: n", o.n, 1)
  local name = o.center_name or "center"
  local center
  if (o.center or "switch") == "switch" then
    center = net:switch(name)
  else
    center = net:node(name, node_opts(o.node))
  end
  local list = hosts(net, n, o.prefix or "h", o.node)
  for _, h in ipairs(list) do net:link(center, h, o.link) end
  return { center = center, hosts = list }
end

-- line{n=, link=, node=, prefix="h"} -> {hosts={...}}: h1 - h2 - ... - hn.
function topo.line(net, o)
  o = o or {}
  local list = hosts(net, check_count("line: n", o.n, 1), o.prefix or "h", o.node)
  for i = 2, #list do net:link(list[i - 1], list[i], o.link) end
  return { hosts = list }
end

-- ring{n=, link=, node=, prefix="h"} -> {hosts={...}}: a line closed by hn - h1.
function topo.ring(net, o)
  o = o or {}
  local t = topo.line(net, { n = check_count("ring: n", o.n, 3), link = o.link, node = o.node,
                             prefix = o.prefix })
  net:link(t.hosts[#t.hosts], t.hosts[1], o.link)
  return t
end

-- mesh{n=, link=, node=, prefix="h"} -> {hosts={...}}: every pair linked.
function topo.mesh(net, o)
  o = o or {}
  local list = hosts(net, check_count("mesh: n", o.n, 1), o.prefix or "h", o.node)
  for i = 1, #list do
    for j = i + 1, #list do net:link(list[i], list[j], o.link) end
  end
  return { hosts = list }
end

-- tree{fanout=, depth=, link=, node=, prefix="n"} -> {root=, levels={{root}, {...}, ...},
-- leaves={...}, hosts={...}}: depth levels below the root, fanout children each.
-- Names are prefix followed by the path from the root ("n", "n1", "n1.2", ...).
function topo.tree(net, o)
  o = o or {}
  local fanout = check_count("tree: fanout", o.fanout, 1)
  local depth = check_count("tree: depth", o.depth, 0)
  local prefix = o.prefix or "n"
  local root = net:node(prefix, node_opts(o.node))
  local levels, all = { { root } }, { root }
  for d = 1, depth do
    local level = {}
    for _, parent in ipairs(levels[d]) do
      for i = 1, fanout do
        local sep = (d == 1) and "" or "."
        local child = net:node(parent.name .. sep .. i, node_opts(o.node))
        net:link(parent, child, o.link)
        level[#level + 1] = child
        all[#all + 1] = child
      end
    end
    levels[d + 1] = level
  end
  return { root = root, levels = levels, leaves = levels[#levels], hosts = all }
end

-- hier{clouds=1, edges_per_cloud=, terminals_per_edge=, links={cloud_edge=, edge_terminal=,
-- cloud_cloud=}, nodes={cloud=, edge=, terminal=}} -> {cloud={...}, edge={...}, terminal={...}}
-- (each of nodes.* a table of node options, or a function(i, tier) returning one)
-- A terminal / edge / cloud hierarchy: clouds fully meshed (cloud_cloud, default cloud_edge),
-- each cloud with its edges, each edge with its terminals. Names: cloud1.., edge1.., t1..
-- numbered across the whole network; tiers set to "cloud", "edge", "terminal".
function topo.hier(net, o)
  o = o or {}
  local clouds = check_count("hier: clouds", o.clouds or 1, 1)
  local edges = check_count("hier: edges_per_cloud", o.edges_per_cloud, 1)
  local terminals = check_count("hier: terminals_per_edge", o.terminals_per_edge, 0)
  local links, nodes = o.links or {}, o.nodes or {}
  local by_tier = { cloud = {}, edge = {}, terminal = {} }
  for c = 1, clouds do
    local cloud = net:node("cloud" .. c, node_opts(nodes.cloud, "cloud", c))
    for _, other in ipairs(by_tier.cloud) do
      net:link(other, cloud, links.cloud_cloud or links.cloud_edge)
    end
    by_tier.cloud[c] = cloud
    for _ = 1, edges do
      local edge = net:node("edge" .. (#by_tier.edge + 1), node_opts(nodes.edge, "edge", #by_tier.edge + 1))
      by_tier.edge[#by_tier.edge + 1] = edge
      net:link(cloud, edge, links.cloud_edge)
      for _ = 1, terminals do
        local t = net:node("t" .. (#by_tier.terminal + 1),
                           node_opts(nodes.terminal, "terminal", #by_tier.terminal + 1))
        by_tier.terminal[#by_tier.terminal + 1] = t
        net:link(edge, t, links.edge_terminal)
      end
    end
  end
  return by_tier
end

return topo
