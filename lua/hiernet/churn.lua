-- hiernet.churn: nodes that come and go (net:churn, lua/l_faults.c calls
-- churn.churn here).
--
-- A churn is a schedule of down and up times per node, in emulated seconds
-- from the net:churn call: read from a file (`node,t_down,t_up` lines) or
-- drawn from an exponential on/off process (hn.rng, one stream per node, so
-- the same seed gives the same schedule whatever the host's timing). Each
-- node gets a task that waits for its next time and applies it through the
-- engine's fault operations: node:kill / node:restart (how = "kill") or
-- net:partition / net:heal of the node against every other host (how =
-- "partition"); the algorithms hear of both through net:on. Every change is
-- a row of churn.csv: t_s (the schedule's time), node, event (down, up),
-- how, at_s (hn.now() when it was applied).
--
-- Mobility: node:move{ to =, link =, gap = } is a handover (the node's
-- link down, the gap slept, the engine moves the link's far end to `to`
-- and every route follows, the new parameters, the link up), and
-- net:mobility{...} a schedule of moves (random waypoint from hn.rng, or a
-- `t,node,edge` file), one task per node. Each move is a row of moves.csv.
local hn = require("hiernet")
local core = require("hiernet.core")
local where = require("hiernet.where")

local churn = {}

local OPTIONS = { nodes = true, file = true, model = true, how = true }
local MODEL_OPTIONS = { up_mean_s = true, down_mean_s = true, seed = true }
local HOW = { kill = true, partition = true }
local COLUMNS = { "t_s", "node", "event", "how", "at_s" }

-- Bad input (an option, a file's line): exit 2, at the scenario's line.
local function bad(fmt, ...)
  core._bad_input()
  where.fail(fmt, ...)
end

local function check_keys(t, allowed, what)
  for k in pairs(t) do
    if not allowed[k] then bad("%s: unknown option '%s'", what, tostring(k)) end
  end
end

-- The run's churn.csv, made at the first churn (a record name is used once
-- per run; every churn of the run writes to it).
local record
local function churn_record()
  record = record or hn.record("churn", COLUMNS)
  return record
end

-- The churn's nodes as handles of net (names or handles), hosts only.
local function read_nodes(net, nodes)
  if type(nodes) ~= "table" or #nodes == 0 then
    bad("net:churn: 'nodes' must be a non-empty list of nodes, got %s", tostring(nodes))
  end
  local list, seen = {}, {}
  for k, n in ipairs(nodes) do
    local node = type(n) == "string" and net:find(n) or n
    local ok = type(node) == "userdata" and pcall(function() return node.kind end)
    if not ok or node.network ~= net or node.kind ~= "host" then
      bad("net:churn: nodes[%d] (%s) is not a host of network '%s'", k, tostring(n), net.name)
    end
    if seen[node.name] then bad("net:churn: node '%s' is listed twice", node.name) end
    seen[node.name] = true
    list[#list + 1] = node
  end
  return list, seen
end

-- A number of a file's field, or nil for an empty field when may_be_empty.
local function field_number(text, file, line, what, may_be_empty)
  if text == "" and may_be_empty then return nil end
  local v = tonumber(text)
  if not v or v ~= v or v < 0 or v == math.huge then
    bad("%s:%d: %s '%s' is not a time in seconds (0 or more)", file, line, what, text)
  end
  return v
end

-- The three-field lines of a schedule file as { {line_no, f1, f2, f3}, ... }
-- (blank lines, `#` comments and the header line skipped); `who` names the
-- call in the error for a file that cannot be read.
local function read_rows(file, header, who)
  local f, err = io.open(file, "r")
  if not f then bad("%s: cannot read file %s", who, err) end
  local rows, line_no, bad_line = {}, 0, nil
  for line in f:lines() do
    line_no = line_no + 1
    line = line:gsub("\r$", "")
    if not (line:match("^%s*$") or line:match("^%s*#") or line:match("^" .. header .. "%s*$")) then
      local a, b, c = line:match("^%s*([^,]-)%s*,%s*([^,]-)%s*,%s*([^,]-)%s*$")
      if not a then bad_line = bad_line or { line_no, line } end
      rows[#rows + 1] = { line_no, a, b, c }
    end
  end
  f:close()
  if bad_line then bad("%s:%d: expected %s, got '%s'", file, bad_line[1], header, bad_line[2]) end
  return rows
end

-- Parses `node,t_down,t_up` lines (an empty t_up: down until the churn
-- stops) into intervals[name] = { {down, up}, ... } in time order.
local function read_file(file, names)
  local intervals = {}
  for _, row in ipairs(read_rows(file, "node,t_down,t_up", "net:churn")) do
    local line_no, name, down, up = table.unpack(row)
    if not names[name] then bad("%s:%d: node '%s' is not among the churn's nodes", file, line_no, name) end
    local t_down = field_number(down, file, line_no, "t_down")
    local t_up = field_number(up, file, line_no, "t_up", true)
    local list = intervals[name] or {}
    local last = list[#list]
    if t_up and t_up <= t_down then
      bad("%s:%d: node '%s': t_up %s is not after t_down %s", file, line_no, name, up, down)
    end
    if last and (last[2] == nil or t_down < last[2]) then
      bad("%s:%d: node '%s': t_down %s is before its previous t_up %s", file, line_no, name,
          down, tostring(last[2] or "(none: down for good)"))
    end
    list[#list + 1] = { t_down, t_up }
    intervals[name] = list
  end
  return intervals
end

local function positive(model, key)
  local v = model[key]
  if type(v) ~= "number" or not (v > 0) or v == math.huge then
    bad("net:churn: model.%s must be a number of seconds above 0, got %s", key, tostring(v))
  end
  return v
end

-- Per node, a function that gives its next (down, up) offsets, nil at the end.
local function file_schedule(intervals, node)
  local list, i = intervals[node.name] or {}, 0
  return function()
    i = i + 1
    if list[i] then return list[i][1], list[i][2] end
  end
end

-- The exponential on/off process of stream k: up first, then down.
local function model_schedule(model, k)
  local rng = hn.rng(model.seed, k)
  local t = 0
  return function()
    local down = t + rng:exponential(model.up_mean_s)
    t = down + rng:exponential(model.down_mean_s)
    return down, t
  end
end

local Churn = {}
Churn.__index = Churn

function Churn:log(k, t_s, event)
  self.record:add{ t_s = string.format("%.6f", t_s), node = self.nodes[k].name, event = event,
                   how = self.how, at_s = string.format("%.6f", hn.now()) }
end

-- Whether the network still runs, so that a change may be applied.
function Churn:live()
  return self.net:state() == "started"
end

-- Applies one change to node k (down or up) at schedule time t_s; an error
-- of a network that stops meanwhile ends the churn quietly, others are raised.
function Churn:apply(k, down, t_s)
  local node = self.nodes[k]
  self.busy[k] = true
  local ok, err = pcall(function()
    if self.how == "kill" then
      if down then node:kill() else node:restart() end
    elseif down then
      self.net:partition({ node }, self.others[k])
    else
      self.net:heal({ node }, self.others[k])
    end
  end)
  self.busy[k] = nil
  if not ok then
    if self:live() then error(err, 0) end
    return false
  end
  self.down[k] = down or nil
  if down then
    self.downs, self.down_since[k] = self.downs + 1, t_s
  else
    self.ups = self.ups + 1
    self.down_s[k] = self.down_s[k] + (t_s - self.down_since[k])
    self.down_since[k] = nil
  end
  self:log(k, t_s, down and "down" or "up")
  return true
end

-- Sleeps until schedule time t_s; false when the churn stopped meanwhile.
function Churn:wait_until(t_s)
  local wait = self.t0 + t_s - hn.now()
  if wait > 0 then hn.sleep(wait) end
  return not self.stopped and self:live()
end

-- Node k's task: its schedule, one change after the other. A change under
-- way is the task's alone (busy): h:stop() leaves that node to it.
function Churn:drive(k, next_interval)
  while true do
    local down_at, up_at = next_interval()
    if not down_at or not self:wait_until(down_at) then return end
    if not self:apply(k, true, down_at) then return end
    local go_on = not self.stopped and up_at ~= nil and self:wait_until(up_at)
    if not go_on and not self.stopped then return end -- no t_up: down until h:stop()
    if self.down[k] and not self.busy[k] and self:live() then
      self:apply(k, false, go_on and up_at or (hn.now() - self.t0))
    end
    if not go_on then return end
  end
end

-- h:stop(): no more changes; every node the churn holds down comes back.
function Churn:stop()
  self.stopped = true
  for k = 1, #self.nodes do
    if self.down[k] and not self.busy[k] and self:live() then
      self:apply(k, false, hn.now() - self.t0)
    end
  end
end

-- h:availability() -> { nodes = { name = share }, mean = }: the share of
-- the schedule's time (from the churn's start to now) each node was up.
function Churn:availability()
  local t = hn.now() - self.t0
  local shares, sum = {}, 0
  for k, node in ipairs(self.nodes) do
    local down = self.down_s[k] + (self.down_since[k] and math.max(0, t - self.down_since[k]) or 0)
    local share = t > 0 and math.max(0, 1 - down / t) or 1
    shares[node.name], sum = share, sum + share
  end
  return { nodes = shares, mean = sum / #self.nodes }
end

-- Every other host of the network: the far side of node k's partition.
local function other_hosts(net, node)
  local list = {}
  for _, n in ipairs(net:nodes()) do
    if n.kind == "host" and n ~= node then list[#list + 1] = n end
  end
  return list
end

local function read_options(net, opts)
  if type(opts) ~= "table" then bad("net:churn: expected an option table, got %s", type(opts)) end
  check_keys(opts, OPTIONS, "net:churn")
  local how = opts.how or "kill"
  if not HOW[how] then bad("net:churn: how must be \"kill\" or \"partition\", got '%s'", tostring(how)) end
  if (opts.file == nil) == (opts.model == nil) then
    bad("net:churn: give a file or a model (one of them)")
  end
  local nodes, names = read_nodes(net, opts.nodes)
  local model
  if opts.model ~= nil then
    if type(opts.model) ~= "table" then bad("net:churn: model must be a table, got %s", type(opts.model)) end
    check_keys(opts.model, MODEL_OPTIONS, "net:churn: model")
    local seed = opts.model.seed == nil and net.seed or opts.model.seed
    if math.type(seed) ~= "integer" or seed < 0 then
      bad("net:churn: model.seed must be an integer, 0 or more, got %s", tostring(seed))
    end
    model = { up_mean_s = positive(opts.model, "up_mean_s"),
              down_mean_s = positive(opts.model, "down_mean_s"), seed = seed }
  elseif type(opts.file) ~= "string" then
    bad("net:churn: file must be a path, got %s", type(opts.file))
  end
  return how, nodes, names, model
end

-- net:churn{ nodes =, file = | model = { up_mean_s =, down_mean_s =, seed = },
-- how = "kill" | "partition" } -> a handle (see docs/lua-api.md).
local function start_churn(net, opts)
  local how, nodes, names, model = read_options(net, opts)
  local intervals = opts.file and read_file(core._find_file(opts.file), names)
  if net:state() ~= "started" then
    bad("net:churn: network '%s' is %s (start it first)", net.name, net:state())
  end
  if how == "partition" and net.backend == "none" then
    bad("net:churn: how = \"partition\" needs an emulated backend (kernel or user), network '%s' is on none", net.name)
  end
  local h = setmetatable({ net = net, how = how, nodes = nodes, t0 = hn.now(), record = churn_record(),
    downs = 0, ups = 0, stopped = false, down = {}, busy = {}, down_since = {}, down_s = {},
    others = {}, tasks = {} }, Churn)
  for k, node in ipairs(nodes) do
    h.down_s[k] = 0
    if how == "partition" then h.others[k] = other_hosts(net, node) end
    local schedule = model and model_schedule(model, k) or file_schedule(intervals, node)
    h.tasks[k] = hn.spawn(Churn.drive, h, k, schedule)
  end
  hn.log(string.format("network '%s': churn of %d nodes (%s, %s)", net.name, #nodes, how,
                       model and string.format("exponential up %g s, down %g s, seed %d",
                         model.up_mean_s, model.down_mean_s, model.seed) or opts.file))
  return h
end

-- ---- mobility ----

local MOVE_OPTIONS = { to = true, link = true, gap = true }
local MOBILITY_OPTIONS = { nodes = true, edges = true, model = true, file = true, seed = true,
                           dwell_s = true, gap = true, link = true }
local MOVE_COLUMNS = { "t_s", "node", "from", "to", "gap_s", "cut_s", "back_s" }
local UNITS = { s = 1, ms = 1e-3, us = 1e-6 }

-- A duration: seconds, or a string with s, ms or us ("50ms").
local function seconds(v, what)
  if type(v) == "number" and v >= 0 and v < math.huge then return v end
  local num, unit = tostring(v):match("^%s*([%d.]+)%s*(%a*)%s*$")
  local n, scale = tonumber(num), UNITS[unit ~= "" and unit or "s"]
  if not n or not scale then bad("%s: '%s' is not a duration (seconds, or a number with s, ms, us)", what, tostring(v)) end
  return n * scale
end

local move_record
local function moves_record()
  move_record = move_record or hn.record("moves", MOVE_COLUMNS)
  return move_record
end

-- The network's move lock: a queue holding one token.
local move_locks = setmetatable({}, { __mode = "k" })
local function move_lock(net)
  local q = move_locks[net]
  if not q then
    q = hn.queue()
    q:push(true)
    move_locks[net] = q
  end
  return q
end

-- The node at the other end of node's link (its edge now).
local function edge_of(link, node)
  return link.a == node and link.b or link.a
end

-- node:move{ to =, link = { bw =, delay =, ... }, gap = "50ms" } -> the
-- seconds the node had no link (from the cut to the link back up).
local function move(node, opts, t_s)
  if type(opts) ~= "table" then bad("node '%s': move: expected an option table, got %s", node.name, type(opts)) end
  check_keys(opts, MOVE_OPTIONS, "node '" .. node.name .. "': move")
  local net = node.network
  if opts.to == nil then bad("node '%s': move: 'to' (the edge to attach to) is missing", node.name) end
  local gap = seconds(opts.gap or 0, "node '" .. node.name .. "': move: gap")
  if opts.link ~= nil and type(opts.link) ~= "table" then
    bad("node '%s': move: link must be a table of link parameters, got %s", node.name, type(opts.link))
  end
  local link = net:_move_link(node, opts.to, false) -- refuses what cannot move, before any change
  -- One handover at a time in a network: a move replays every host's
  -- routes, which must not meet another move's link half done.
  local lock = move_lock(net)
  lock:pop()
  local from = edge_of(link, node)
  local cut = hn.now()
  local ok, err = pcall(function()
    link:down()
    local left = gap - (hn.now() - cut)
    if left > 0 then hn.sleep(left) end
    net:_move_link(node, opts.to, true)
    if opts.link then link:set(opts.link) end
  end)
  local up_ok, up_err = pcall(link.up, link)
  lock:push(true)
  if not ok then error(err, 0) end
  if not up_ok then error(up_err, 0) end
  local back = hn.now()
  moves_record():add{ t_s = t_s and string.format("%.6f", t_s) or nil, node = node.name, from = from.name,
                      to = edge_of(link, node).name, gap_s = gap, cut_s = string.format("%.6f", cut),
                      back_s = string.format("%.6f", back) }
  return back - cut
end

-- (errors raised by the engine's checks name the scenario's line)
function churn.move(node, opts, t_s)
  return where.call_at(where.user(), move, node, opts, t_s)
end

-- Parses `t,node,edge` lines into moves[name] = { {t, edge name}, ... } in time order.
local function read_moves(file, names, edges)
  local moves = {}
  for _, row in ipairs(read_rows(file, "t,node,edge", "net:mobility")) do
    local line_no, t, name, edge = table.unpack(row)
    if not names[name] then bad("%s:%d: node '%s' is not among the mobility's nodes", file, line_no, name) end
    if not edges[edge] then
      bad("%s:%d: node '%s': edge '%s' is not among the mobility's edges", file, line_no, name, edge)
    end
    local list = moves[name] or {}
    local v = field_number(t, file, line_no, "t")
    if list[#list] and v < list[#list][1] then
      bad("%s:%d: node '%s': t %s is before its previous move at %s", file, line_no, name, t, list[#list][1])
    end
    list[#list + 1] = { v, edge }
    moves[name] = list
  end
  return moves
end

-- Random waypoint over the edges: dwell uniform in dwell_s, then a move to
-- an edge picked uniformly among the others; node k draws from hn.rng(seed, k).
local function waypoint_schedule(edges, first_edge, dwell, seed, k)
  local rng, t, at = hn.rng(seed, k), 0, first_edge
  return function()
    t = t + dwell[1] + (dwell[2] - dwell[1]) * rng:uniform()
    local others = {}
    for _, e in ipairs(edges) do if e ~= at then others[#others + 1] = e end end
    at = others[rng:pick(#others)]
    return t, at
  end
end

local function list_schedule(list)
  local i = 0
  return function()
    i = i + 1
    if list and list[i] then return list[i][1], list[i][2] end
  end
end

local Mobility = {}
Mobility.__index = Mobility

function Mobility:drive(node, next_move)
  while true do
    local t, edge = next_move()
    if not t then return end
    local wait = self.t0 + t - hn.now()
    if wait > 0 then hn.sleep(wait) end
    if self.stopped or self.net:state() ~= "started" then return end
    local ok, err = pcall(churn.move, node, { to = edge, gap = self.gap, link = self.link }, t)
    if not ok then
      if self.net:state() == "started" and not self.stopped then error(err, 0) end
      return
    end
    self.moves = self.moves + 1
  end
end

function Mobility:stop()
  self.stopped = true
end

local function read_edges(net, edges)
  if type(edges) ~= "table" or #edges < 2 then
    bad("net:mobility: 'edges' must list two nodes or more, got %s", tostring(edges))
  end
  local list, set = {}, {}
  for k, e in ipairs(edges) do
    local node = type(e) == "string" and net:find(e) or e
    if type(node) ~= "userdata" or node.network ~= net or node.kind ~= "host" then
      bad("net:mobility: edges[%d] (%s) is not a host of network '%s'", k, tostring(e), net.name)
    end
    list[#list + 1], set[node.name] = node, node
  end
  return list, set
end

-- net:mobility{ nodes =, edges =, model = "random-waypoint" | file =, seed =,
-- dwell_s = { min, max }, gap =, link = } -> a handle (docs/lua-api.md).
local function mobility(net, opts)
  if type(opts) ~= "table" then bad("net:mobility: expected an option table, got %s", type(opts)) end
  check_keys(opts, MOBILITY_OPTIONS, "net:mobility")
  local nodes, names = read_nodes(net, opts.nodes)
  local edges, edge_set = read_edges(net, opts.edges)
  if (opts.file == nil) == (opts.model == nil) then bad("net:mobility: give a file or a model (one of them)") end
  -- a file's moves are as written: these would be ignored
  for _, k in ipairs{ "seed", "dwell_s" } do
    if opts.file and opts[k] ~= nil then bad("net:mobility: %s goes with model = \"random-waypoint\", not file", k) end
  end
  if opts.model ~= nil and opts.model ~= "random-waypoint" then
    bad("net:mobility: model must be \"random-waypoint\", got '%s'", tostring(opts.model))
  end
  local seed = opts.seed == nil and net.seed or opts.seed
  if math.type(seed) ~= "integer" or seed < 0 then bad("net:mobility: seed must be an integer, 0 or more, got %s", tostring(seed)) end
  local dwell = opts.dwell_s or { 1, 5 }
  if type(dwell) ~= "table" or type(dwell[1]) ~= "number" or type(dwell[2]) ~= "number"
     or dwell[1] <= 0 or dwell[2] < dwell[1] then
    bad("net:mobility: dwell_s must be { min, max } seconds, 0 < min <= max")
  end
  local gap = seconds(opts.gap or 0, "net:mobility: gap")
  local moves = opts.file and read_moves(core._find_file(opts.file), names, edge_set)
  local h = setmetatable({ net = net, t0 = hn.now(), moves = 0, stopped = false, gap = gap,
                           link = opts.link, tasks = {} }, Mobility)
  for k, node in ipairs(nodes) do
    -- a node that cannot move is refused now, not at its first move
    local link = net:_move_link(node, nil, false)
    local first = edge_of(link, node)
    if not edge_set[first.name] then
      bad("net:mobility: node '%s' is attached to '%s', which is not among the edges", node.name, first.name)
    end
    local schedule = moves and list_schedule(moves[node.name])
      or waypoint_schedule(edges, edge_set[first.name], dwell, seed, k)
    h.tasks[k] = hn.spawn(Mobility.drive, h, node, schedule)
  end
  return h
end

function churn.mobility(net, opts)
  return where.call_at(where.user(), mobility, net, opts)
end

function churn.churn(net, opts)
  return where.call_at(where.user(), start_churn, net, opts)
end

return churn
