-- hiernet.traffic: background traffic between two hosts of a started
-- network, net:traffic{} (docs/lua-api.md "Background traffic"). The binding
-- (lua/l_traffic.c) has checked the option names and converted rate and
-- times; this module checks the rest, asks the receiving peer for a sink and
-- the sending peer for a source (peer/commands_traffic.h), and keeps the
-- handles: h:stats(), h:stop(). Each stopped flow is one row of traffic.csv.
-- The flows' bytes are the peers' own counters, never the data plane's, so a
-- training's bytes (send results, steps.csv, summary.json) do not change.
local hn = require("hiernet")
local where = require("hiernet.where")

local M = {}

local PATTERNS = { constant = true, poisson = true, onoff = true }
local PROTOS = { udp = true, tcp = true }
-- Stopping a UDP flow waits for what is still on its way: until the sink
-- has every packet the source sent, or nothing arrived for DRAIN_QUIET_S, at
-- most DRAIN_MAX_S (emulated seconds). A TCP sink waits for the stream's end.
local DRAIN_POLL_S, DRAIN_QUIET_S, DRAIN_MAX_S = 0.05, 0.2, 5

local flows = setmetatable({}, { __mode = "k" }) -- network -> {handle, ...} still running
local made = setmetatable({}, { __mode = "k" }) -- network -> {handle, ...} in the order made
local count = 0
local csv -- the run's traffic.csv writer, made with the first stop

local Flow = {}
Flow.__index = Flow

-- Bad input: one error at the scenario's line naming the network and value.
local function fail(net, fmt, ...)
  where.fail("network '%s': traffic: " .. fmt, net.name, ...)
end

-- A host of net, from a handle or a name.
local function host_of(net, key, v)
  if type(v) == "string" then
    local n = net:find(v)
    if not n then fail(net, "%s: no node named '%s'", key, v) end
    v = n
  end
  if type(v) ~= "userdata" or not pcall(function() return v.kind end) then
    fail(net, "%s must be a node or a node name, got %s", key, type(v))
  end
  if v.network ~= net then
    fail(net, "%s: node '%s' belongs to network '%s'", key, v.name, v.network.name)
  end
  if v.kind ~= "host" then fail(net, "%s: '%s' is a switch, not a host", key, v.name) end
  return v
end

local function check(net, o)
  local from, to = host_of(net, "from", o.from), host_of(net, "to", o.to)
  if from == to then fail(net, "from and to are the same node '%s'", from.name) end
  o.pattern, o.proto = o.pattern or "constant", o.proto or "udp"
  if not PATTERNS[o.pattern] then
    fail(net, "unknown pattern '%s' (constant, poisson or onoff)", tostring(o.pattern))
  end
  if not PROTOS[o.proto] then fail(net, "unknown proto '%s' (udp or tcp)", tostring(o.proto)) end
  if not o.rate and (o.proto == "udp" or o.pattern ~= "constant") then
    fail(net, "%s %s traffic needs a rate", o.pattern, o.proto)
  end
  if o.pattern == "onoff" and not ((o.on_s or 0) > 0 and (o.off_s or 0) > 0) then
    fail(net, "onoff needs on_s and off_s above 0 (got %s, %s)", tostring(o.on_s), tostring(o.off_s))
  end
  if o.pattern ~= "onoff" and (o.on_s or o.off_s) then
    fail(net, "on_s and off_s go with pattern = \"onoff\" (pattern is %s)", o.pattern)
  end
  if o.pattern == "constant" and o.seed ~= nil then
    -- a constant schedule draws nothing: a seed there would be silently ignored
    fail(net, "seed goes with pattern = \"poisson\" or \"onoff\" (pattern is constant)")
  end
  for _, k in ipairs({ "seed", "bytes", "size" }) do
    local v = o[k]
    if v ~= nil and (math.type(v) ~= "integer" or v < 0) then
      fail(net, "%s must be a whole number >= 0, got %s", k, tostring(v))
    end
  end
  if net:state() ~= "started" then fail(net, "the network is %s, not started", net:state()) end
  return from, to
end

local function start(net, o, methods)
  M.install(methods)
  local from, to = check(net, o)
  count = count + 1
  local id = ("bg%d"):format(count)
  local sink = to:traffic_sink{ id = id, proto = o.proto }
  local ok, err = pcall(from.traffic_source, from, {
    id = id, to = ("%s:%d"):format(to.addr, sink.port), proto = o.proto, pattern = o.pattern,
    rate = o.rate, on_s = o.on_s, off_s = o.off_s, seed = o.seed, bytes = o.bytes, size = o.size })
  if not ok then
    pcall(to.traffic_stop, to, { id = id })
    error(err, 0)
  end
  local h = setmetatable({ net = net, from = from, to = to, id = id, name = id, proto = o.proto,
                           pattern = o.pattern, rate = o.rate or 0, start_s = hn.now() }, Flow)
  flows[net] = flows[net] or {}
  flows[net][h] = true
  made[net] = made[net] or {}
  table.insert(made[net], h)
  hn.log(("traffic %s: %s -> %s, %s %s %s"):format(id, from.name, to.name, o.pattern, o.proto,
                                                o.rate and ("at %.6g bit/s"):format(o.rate) or "as fast as TCP goes"))
  return h
end

-- net:traffic{...} (through lua/l_traffic.c, which passes the network's
-- methods so that net:stop() stops the flows first). Errors, the peers'
-- included, point at the scenario's line.
function M.start(net, o, methods)
  return where.call(start, net, o, methods)
end

-- The counters of both ends as one table; an end whose peer could not
-- answer (killed, or the network stopped) leaves its counts out.
local function merge(h, src, dst)
  local s = { name = h.name, from = h.from.name, to = h.to.name, proto = h.proto, pattern = h.pattern,
              rate_bps = h.rate }
  local udp = h.proto == "udp"
  if src then
    s.sent_bytes, s.skipped, s.elapsed_s, s.done, s.error = src.bytes, src.skipped, src.elapsed_s, src.done, src.error
    s.sent_packets = udp and src.packets or nil
  end
  if dst then
    s.received_bytes, s.received_packets = dst.bytes, udp and dst.packets or nil
  end
  if udp and src and dst then s.lost = math.max(0, src.packets - dst.packets) end
  if src and dst then s.received_bps = s.elapsed_s > 0 and s.received_bytes * 8 / s.elapsed_s or 0 end
  return s
end

function Flow:stats()
  if self.final then return self.final end
  return merge(self, self.from:traffic_stats{ id = self.id }, self.to:traffic_stats{ id = self.id })
end

-- Waits for the sink to hold what the stopped source sent (see DRAIN_*).
local function drain(h, src)
  local last, quiet, waited = -1, 0, 0
  while waited < DRAIN_MAX_S do
    local dst = h.to:traffic_stats{ id = h.id }
    if h.proto == "tcp" and (dst.done or dst.bytes >= src.bytes) then return end
    if h.proto == "udp" and dst.packets >= src.packets then return end
    quiet = dst.bytes == last and quiet + DRAIN_POLL_S or 0
    if quiet >= DRAIN_QUIET_S then return end
    last = dst.bytes
    hn.sleep(DRAIN_POLL_S)
    waited = waited + DRAIN_POLL_S
  end
end

local function record(s, net, start_s)
  csv = csv or hn.record("traffic", { "network", "name", "from", "to", "proto", "pattern", "rate_bps",
                                      "start_s", "stop_s", "sent_bytes", "received_bytes", "sent_packets",
                                      "received_packets", "lost", "skipped" })
  csv:add{ network = net.name, name = s.name, from = s.from, to = s.to, proto = s.proto,
           pattern = s.pattern, rate_bps = s.rate_bps, start_s = start_s, stop_s = hn.now(),
           sent_bytes = s.sent_bytes, received_bytes = s.received_bytes, sent_packets = s.sent_packets,
           received_packets = s.received_packets, lost = s.lost, skipped = s.skipped }
end

-- Stops the source, lets what is on its way arrive, closes the sink; the
-- final counters (also what stats() returns from then on). An end that
-- cannot answer (its node killed) is logged and its counts left out.
function Flow:stop()
  if self.final then return self.final end
  flows[self.net][self] = nil
  local ok_src, src = pcall(self.from.traffic_stop, self.from, { id = self.id })
  local ok_drain, why = true, nil
  if ok_src then ok_drain, why = pcall(drain, self, src) end
  local ok_dst, dst = pcall(self.to.traffic_stop, self.to, { id = self.id })
  if not ok_src then hn.log(("traffic %s: %s"):format(self.id, tostring(src))) end
  if not ok_drain then hn.log(("traffic %s: %s"):format(self.id, tostring(why))) end
  if not ok_dst then hn.log(("traffic %s: %s"):format(self.id, tostring(dst))) end
  self.final = merge(self, ok_src and src or nil, ok_dst and dst or nil)
  record(self.final, self.net, self.start_s)
  return self.final
end

-- Every flow of net still running, stopped (net:stop() calls it first).
function M.stop_all(net)
  local list = {}
  for h in pairs(flows[net] or {}) do list[#list + 1] = h end
  table.sort(list, function(a, b) return a.id < b.id end)
  for _, h in ipairs(list) do h:stop() end
end

-- ---- a training's background (its summary's `background`) ----

-- Bytes sent and received so far by every flow made on the networks nets:
-- {[handle] = {sent, received}}. A running flow is asked (both ends); one
-- that cannot answer counts what it last said.
function M.snapshot(nets)
  local snap = {}
  for _, net in ipairs(nets) do
    for _, h in ipairs(made[net] or {}) do
      local ok, s = pcall(h.stats, h)
      if ok then h.last = s end
      local c = ok and s or h.last or {}
      snap[h] = { sent = c.sent_bytes or 0, received = c.received_bytes or 0 }
    end
  end
  return snap
end

-- What the flows moved between a snapshot and now: {flows = how many sent
-- meanwhile, sent_bytes, received_bytes}; nil when no flow did.
function M.window(before, nets)
  local w = { flows = 0, sent_bytes = 0, received_bytes = 0 }
  for h, c in pairs(M.snapshot(nets)) do
    local b = before and before[h] or { sent = 0, received = 0 }
    if c.sent > b.sent then
      w.flows = w.flows + 1
      w.sent_bytes = w.sent_bytes + c.sent - b.sent
      w.received_bytes = w.received_bytes + c.received - b.received
    end
  end
  return w.flows > 0 and w or nil
end

-- Wraps the networks' stop once: flows stop (and are recorded) before their
-- peers exit. A run that ends without net:stop() ends the flows with the
-- peers, unrecorded.
local installed = false
function M.install(methods)
  if installed then return end
  installed = true
  local stop = methods.stop
  methods.stop = function(net, ...)
    if net:state() == "started" then M.stop_all(net) end
    return stop(net, ...)
  end
end

return M
