-- hiernet.topo: topology builders. Each takes a network (not yet started) and
-- an options table, adds nodes and links, and returns the nodes it made.
--
--   local topo = require("hiernet.topo")
--   local t = topo.hier(net, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
--                              links = { cloud_edge = { bw = "1Gbit", delay = "10ms" },
--                                        edge_terminal = { bw = "20Mbit", delay = "5ms" } } })
--   t.cloud[1], t.edge[2], t.terminal[6]
--
-- Common options of every builder: `link` (parameters of every link, as
-- for net:link), `node` (options of every node: a table, or a
-- function(i, tier) returning one; i numbers the hosts of a tier, or of a
-- line, ring, mesh or star from 1, a star's host centre being 0, and a
-- tree's nodes in creation order, the root 1), `prefix` (the start of the
-- generated node names; a star's centre is named by center_name).
-- Options are checked before anything is made: an unknown one, or a value
-- of the wrong type, is a one-line error naming it.
local where = require("hiernet.where")

local topo = {}
local fail = where.fail

local COMMON = { "link", "node", "prefix" }

-- Checks builder `what`'s options o against the names it knows (its own
-- and COMMON); returns o (or {}). Errors point at the scenario's line.
local function check_options(what, o, own)
  if o == nil then return {} end
  if type(o) ~= "table" then
    fail("topo.%s: options must be a table, got %s", what, type(o))
  end
  local known, names = {}, {}
  for _, list in ipairs({ own, COMMON }) do
    for _, k in ipairs(list) do known[k], names[#names + 1] = true, k end
  end
  for k in pairs(o) do
    if not known[k] then
      fail("topo.%s: unknown option '%s' (options: %s)", what, tostring(k), table.concat(names, ", "))
    end
  end
  if o.link ~= nil and type(o.link) ~= "table" then
    fail("topo.%s: option 'link' must be a table of link parameters, got %s", what, type(o.link))
  end
  if o.node ~= nil and type(o.node) ~= "table" and type(o.node) ~= "function" then
    fail("topo.%s: option 'node' must be a table or a function(i, tier), got %s", what, type(o.node))
  end
  if o.prefix ~= nil and type(o.prefix) ~= "string" then
    fail("topo.%s: option 'prefix' must be a string, got %s", what, type(o.prefix))
  end
  return o
end

local function check_count(what, value, min)
  if math.type(value) ~= "integer" or value < min then
    fail("topo.%s must be an integer >= %d, got %s", what, min, tostring(value))
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
  o = check_options("star", o, { "n", "center", "center_name" })
  local n = check_count("star: n", o.n, 1)
  local name = o.center_name or "center"
  local kind = o.center or "switch"
  if kind ~= "switch" and kind ~= "host" then
    fail("topo.star: option 'center' must be \"switch\" or \"host\", got %s", tostring(kind))
  end
  local center
  if kind == "switch" then
    center = net:switch(name)
  else
    center = net:node(name, node_opts(o.node, nil, 0))
  end
  local list = hosts(net, n, o.prefix or "h", o.node)
  for _, h in ipairs(list) do net:link(center, h, o.link) end
  return { center = center, hosts = list }
end

-- line{n=, link=, node=, prefix="h"} -> {hosts={...}}: h1 - h2 - ... - hn.
function topo.line(net, o)
  o = check_options("line", o, { "n" })
  local list = hosts(net, check_count("line: n", o.n, 1), o.prefix or "h", o.node)
  for i = 2, #list do net:link(list[i - 1], list[i], o.link) end
  return { hosts = list }
end

-- ring{n=, link=, node=, prefix="h"} -> {hosts={...}}: a line closed by hn - h1.
function topo.ring(net, o)
  o = check_options("ring", o, { "n" })
  local t = topo.line(net, { n = check_count("ring: n", o.n, 3), link = o.link, node = o.node,
                             prefix = o.prefix })
  net:link(t.hosts[#t.hosts], t.hosts[1], o.link)
  return t
end

-- mesh{n=, link=, node=, prefix="h"} -> {hosts={...}}: every pair linked.
function topo.mesh(net, o)
  o = check_options("mesh", o, { "n" })
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
  o = check_options("tree", o, { "fanout", "depth" })
  local fanout = check_count("tree: fanout", o.fanout, 1)
  local depth = check_count("tree: depth", o.depth, 0)
  local prefix = o.prefix or "n"
  local root = net:node(prefix, node_opts(o.node, nil, 1))
  local levels, all = { { root } }, { root }
  for d = 1, depth do
    local level = {}
    for _, parent in ipairs(levels[d]) do
      for i = 1, fanout do
        local sep = (d == 1) and "" or "."
        local child = net:node(parent.name .. sep .. i, node_opts(o.node, nil, #all + 1))
        net:link(parent, child, o.link)
        level[#level + 1] = child
        all[#all + 1] = child
      end
    end
    levels[d + 1] = level
  end
  return { root = root, levels = levels, leaves = levels[#levels], hosts = all }
end

-- A table of per-tier entries (hier's links / nodes): only the given keys.
local function check_tiers(what, t, keys, kinds)
  if t == nil then return {} end
  if type(t) ~= "table" then
    fail("topo.hier: option '%s' must be a table, got %s", what, type(t))
  end
  local known = {}
  for _, k in ipairs(keys) do known[k] = true end
  for k, v in pairs(t) do
    if not known[k] then
      fail("topo.hier: unknown key '%s' in option '%s' (keys: %s)", tostring(k), what, table.concat(keys, ", "))
    end
    if not kinds[type(v)] then
      fail("topo.hier: %s.%s must be a table%s, got %s", what, k,
           kinds["function"] and " or a function(i, tier)" or "", type(v))
    end
  end
  return t
end

-- hier{clouds=1, edges_per_cloud=, terminals_per_edge=, links={cloud_edge=, edge_terminal=,
-- cloud_cloud=}, nodes={cloud=, edge=, terminal=}, link=, node=, prefix=""}
-- -> {cloud={...}, edge={...}, terminal={...}}
-- A terminal / edge / cloud hierarchy: clouds fully meshed, each cloud with
-- its edges, each edge with its terminals. Names: prefix .. cloud1..,
-- edge1.., t1.. numbered across the whole network; tiers set to "cloud",
-- "edge", "terminal". A tier's links are links.<tier pair>, else `link`
-- (cloud_cloud falls back to cloud_edge first); a tier's node options are
-- nodes.<tier>, else `node` (each a table, or a function(i, tier) returning
-- one).
function topo.hier(net, o)
  o = check_options("hier", o, { "clouds", "edges_per_cloud", "terminals_per_edge", "links", "nodes" })
  local clouds = check_count("hier: clouds", o.clouds or 1, 1)
  local edges = check_count("hier: edges_per_cloud", o.edges_per_cloud, 1)
  local terminals = check_count("hier: terminals_per_edge", o.terminals_per_edge, 0)
  local links = check_tiers("links", o.links, { "cloud_edge", "edge_terminal", "cloud_cloud" }, { table = true })
  local nodes = check_tiers("nodes", o.nodes, { "cloud", "edge", "terminal" }, { table = true, ["function"] = true })
  local prefix = o.prefix or ""
  local cloud_edge = links.cloud_edge or o.link
  local edge_terminal = links.edge_terminal or o.link
  local cloud_cloud = links.cloud_cloud or cloud_edge
  local function opts(tier, i) return node_opts(nodes[tier] or o.node, tier, i) end
  local by_tier = { cloud = {}, edge = {}, terminal = {} }
  for c = 1, clouds do
    local cloud = net:node(prefix .. "cloud" .. c, opts("cloud", c))
    for _, other in ipairs(by_tier.cloud) do net:link(other, cloud, cloud_cloud) end
    by_tier.cloud[c] = cloud
    for _ = 1, edges do
      local e = #by_tier.edge + 1
      local edge = net:node(prefix .. "edge" .. e, opts("edge", e))
      by_tier.edge[e] = edge
      net:link(cloud, edge, cloud_edge)
      for _ = 1, terminals do
        local i = #by_tier.terminal + 1
        local t = net:node(prefix .. "t" .. i, opts("terminal", i))
        by_tier.terminal[i] = t
        net:link(edge, t, edge_terminal)
      end
    end
  end
  return by_tier
end

-- Every builder's errors name the scenario's line: its own checks (fail),
-- and net:node / net:link refusing a value the scenario gave (a bad rate in
-- `link`, say), which would otherwise name this file's line.
for name, build in pairs(topo) do
  topo[name] = function(...) return where.call(build, ...) end
end

return topo
