-- hiernet.algo.graphs: the neighbour graphs of decentralized training, as
-- adjacency sets over worker indices, with their Metropolis-Hastings mixing
-- weights. Plain data: "links" reads the topology's routes, nothing else
-- touches the network. Reachable from decentral as dc.graph, dc.connected,
-- dc.metropolis.
local job = require("hiernet.algo.job")

local graphs = {}
local fail = job.fail

local function add_edge(adj, i, j)
  if i == j then return end
  adj[i][j], adj[j][i] = true, true
end

-- The name a graph entry gives (a node, or a node's name), else nil.
local function entry_name(v)
  if type(v) == "string" then return v end
  if job.check.is_node(v) then return v.name end
end

-- A graph entry in an error: a node by its name, not its address.
local function shown(v)
  local name = entry_name(v)
  return name and ("'" .. name .. "'") or job.check.describe(v)
end

-- Adjacency sets over worker indices: graph is "ring", "complete", "links"
-- (the workers one link apart) or a table { [worker or its name] = { its
-- neighbours, nodes or names } } (edges go both ways).
function graphs.graph(workers, graph)
  local n, adj = #workers, {}
  for i = 1, n do adj[i] = {} end
  if graph == "ring" then
    for i = 1, n do add_edge(adj, i, i % n + 1) end
  elseif graph == "complete" then
    for i = 1, n do for j = i + 1, n do add_edge(adj, i, j) end end
  elseif graph == "links" then
    local net = workers[1].network
    for i = 1, n do
      for j = i + 1, n do
        if #net:route(workers[i], workers[j]) == 2 then add_edge(adj, i, j) end
      end
    end
  elseif type(graph) == "table" then
    local index = {}
    for i, w in ipairs(workers) do index[w.name] = i end
    for key, list in pairs(graph) do
      local i = index[entry_name(key)]
      if not i then fail("decentral.train: option 'graph': key %s is not a worker", shown(key)) end
      if type(list) ~= "table" then
        fail("decentral.train: option 'graph': %s: expected a list of workers, got %s", shown(key), shown(list))
      end
      for _, other in ipairs(list) do
        local j = index[entry_name(other)]
        if not j then fail("decentral.train: option 'graph': %s's neighbour %s is not a worker", shown(key), shown(other)) end
        add_edge(adj, i, j)
      end
    end
  else
    fail("decentral.train: option 'graph': expected \"ring\", \"complete\", \"links\" or a table, got %s",
         tostring(graph))
  end
  return adj
end

-- True when every worker reaches worker 1; else false and the index of the
-- first worker that does not (for the error message).
function graphs.connected(adj)
  local seen, stack, count = { [1] = true }, { 1 }, 1
  while #stack > 0 do
    local i = table.remove(stack)
    for j in pairs(adj[i]) do
      if not seen[j] then seen[j], count = true, count + 1; stack[#stack + 1] = j end
    end
  end
  if count == #adj then return true end
  for i = 1, #adj do if not seen[i] then return false, i end end
end

-- The neighbours of i in increasing order (a deterministic order of sends).
function graphs.neighbours(adj, i)
  local list = {}
  for j in pairs(adj[i]) do list[#list + 1] = j end
  table.sort(list)
  return list
end

local function degree(adj, i)
  local d = 0
  for _ in pairs(adj[i]) do d = d + 1 end
  return d
end

-- Metropolis-Hastings mixing weights: W[i][j] for neighbours and W[i][i];
-- symmetric and doubly stochastic, so the models' average is kept.
function graphs.metropolis(adj)
  local W = {}
  for i = 1, #adj do
    W[i] = {}
    local self_weight = 1
    for j in pairs(adj[i]) do
      W[i][j] = 1 / (1 + math.max(degree(adj, i), degree(adj, j)))
      self_weight = self_weight - W[i][j]
    end
    W[i][i] = self_weight
  end
  return W
end

return graphs
