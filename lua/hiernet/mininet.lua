-- hiernet.mininet: builds a Mininet topology in a hiernet network.
--
--   local mininet = require("hiernet.mininet")
--   local t = mininet.load(net, "topos/mytopo.py", "MyTopo", { 3, bw = 10 })   -- MyTopo(3, bw=10)
--   local t = mininet.load(net, nil, "TreeTopo", { depth = 2, fanout = 3 })    -- Mininet's own
--   t.hosts, t.switches, t.links (handles, in Mininet's order), t.nodes.h1
--
-- The topology class is evaluated by Debian's Python with Debian's mininet
-- package (the helper below): it imports the file, instantiates the class
-- with the arguments and prints hosts, switches and links with their
-- parameters as JSON. Mininet itself is never started, and the helper runs
-- in a fresh, empty network namespace when hiernet runs as root, so a file
-- that tries cannot touch the host's network. Nothing is parsed from Python
-- source here. The helper's output is untrusted (the file decides what it
-- prints): it goes through the strict JSON reader (controller/json_read.c)
-- and every field is checked before use.
--
-- Mapping: hosts -> net:node, switches -> net:switch (an L2 bridge),
-- links -> net:link with bw (Mbit/s) -> "XMbit", delay / jitter ("5ms", tc's
-- units; a bare number is microseconds, as tc reads it) -> times, loss
-- (percent) -> "X%", max_queue_size (packets) -> queue. A host's cpu
-- (CPULimitedHost: a share of the whole machine) becomes hiernet's cpu
-- (a share of one core) times the cores Mininet counts. Anything else is an
-- error naming the parameter and the node or link; ip, mac and
-- defaultRoute of hosts and dpid of switches are dropped with a log line
-- (hiernet assigns its own addresses).
local core = require("hiernet.core")

local mininet = {}

local HELPER_TIMEOUT_S = 60

-- The helper: argv = file ("" for Mininet's own classes), class name, the
-- arguments as JSON {"args": [...], "kwargs": {...}}. Exit 0 with the
-- topology as JSON on stdout; 2 with one line on stderr for an error in
-- the file or the arguments; 3 when mininet cannot be imported. What the
-- file prints goes to stderr, never into the JSON.
local HELPER = [==[
import importlib.util, json, math, os, sys, traceback

out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

def fail(code, msg):
    sys.stderr.write("\n" + " ".join(str(msg).split()) + "\n")
    sys.exit(code)

try:
    from mininet.topo import Topo
    import mininet.topo, mininet.topolib, mininet.util
except ImportError as e:
    fail(3, "cannot import mininet: %s" % e)

path, name, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def shown(filename):  # the user's file as they named it
    same = path and filename and os.path.abspath(filename) == os.path.abspath(path)
    return path if same else filename

def where(exc, tb):
    if isinstance(exc, SyntaxError) and exc.filename:
        return "%s:%s" % (shown(exc.filename), exc.lineno)
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if shown(f.filename) == path]
    f = (mine or frames or [None])[-1]
    return "%s:%s" % (shown(f.filename), f.lineno) if f else (path or name)

def guarded(what, fn):
    try:
        return fn()
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        msg = e.msg if isinstance(e, SyntaxError) else e
        fail(2, "%s: %s: %s: %s" % (where(e, e.__traceback__), what, type(e).__name__, msg))

def load_module():
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("hiernet_mininet_topo", path)
    if spec is None:
        fail(2, "%s: cannot load it as Python" % path)
    module = importlib.util.module_from_spec(spec)
    guarded("loading the file", lambda: spec.loader.exec_module(module))
    return module

def find_class():
    if not path:
        for m in (mininet.topo, mininet.topolib):
            if isinstance(getattr(m, name, None), type) and issubclass(getattr(m, name), Topo):
                return getattr(m, name)
        fail(2, "mininet has no topology class '%s'" % name)
    module = load_module()
    found = getattr(module, name, None)
    if found is None and isinstance(getattr(module, "topos", None), dict):
        found = module.topos.get(name)
    if found is None:
        classes = sorted(k for k, v in vars(module).items()
                         if isinstance(v, type) and issubclass(v, Topo) and v.__module__ == module.__name__)
        fail(2, "%s: no class '%s' (topology classes there: %s)" % (path, name, ", ".join(classes) or "none"))
    if not callable(found):
        fail(2, "%s: '%s' is not a class" % (path, name))
    return found

def value(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2 ** 53 else {"repr": repr(v)}
    if isinstance(v, float):
        return v if math.isfinite(v) else {"repr": repr(v)}
    if isinstance(v, type):
        return {"class": v.__name__}
    return {"repr": repr(v)[:200]}

def params(info, internal):
    return {str(k): value(v) for k, v in info.items() if k not in internal and v is not None}

cls = find_class()
topo = guarded("%s(...)" % name, lambda: cls(*arguments["args"], **arguments["kwargs"]))
if not isinstance(topo, Topo):
    fail(2, "%s: '%s' did not make a mininet Topo (got %s)" % (path or "mininet", name, type(topo).__name__))
doc = {
    "hiernet_mininet": 1,
    "cores": mininet.util.numCores(),
    "hosts": [{"name": str(h), "params": params(topo.nodeInfo(h), ())} for h in topo.hosts(sort=True)],
    "switches": [{"name": str(s), "params": params(topo.nodeInfo(s), ("isSwitch",))}
                 for s in topo.switches(sort=True)],
    "links": [{"a": str(i["node1"]), "b": str(i["node2"]),
               "params": params(i, ("node1", "node2", "port1", "port2"))}
              for _, _, i in topo.links(sort=True, withInfo=True)],
}
out.write(json.dumps(doc, allow_nan=False))
out.close()
]==]

local fmt = string.format

local function fail(fmt_, ...)
  error("hiernet.mininet: " .. fmt_:format(...), 0)
end

-- ---- arguments to JSON ----

local json_encode

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c)
    if c:byte() >= 128 then return c end -- UTF-8 bytes pass through
    return fmt("\\u%04x", c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

function json_encode(v, depth)
  if depth > 16 then fail("arguments nest deeper than 16 levels") end
  local t = type(v)
  if t == "string" then return encode_string(v) end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then fail("argument %s is not a finite number", tostring(v)) end
    if math.type(v) == "integer" then return fmt("%d", v) end
    local s = fmt("%.17g", v)
    return s:find("[.eEn]") and s or (s .. ".0") -- stays a float in Python
  end
  if t ~= "table" then fail("an argument is a %s (numbers, strings, booleans and tables only)", t) end
  local parts = {}
  if is_array(v) then
    for i, x in ipairs(v) do parts[i] = json_encode(x, depth + 1) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  for k, x in pairs(v) do
    if type(k) ~= "string" then fail("argument table key %s is not a string", tostring(k)) end
    parts[#parts + 1] = encode_string(k) .. ":" .. json_encode(x, depth + 1)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- {1, 2, k = v} -> {"args": [1, 2], "kwargs": {"k": v}}
local function encode_arguments(args)
  if args == nil then return '{"args":[],"kwargs":{}}' end
  if type(args) ~= "table" then fail("args must be a table, got %s", type(args)) end
  local positional, keywords = {}, {}
  for k, v in pairs(args) do
    if math.type(k) == "integer" and k >= 1 and k <= #args then
      positional[k] = v
    elseif type(k) == "string" then
      keywords[k] = v
    else
      fail("args: key %s is neither a position 1..%d nor a name", tostring(k), #args)
    end
  end
  local kw = next(keywords) and json_encode(keywords, 1) or "{}"
  return '{"args":' .. json_encode(positional, 1) .. ',"kwargs":' .. kw .. "}"
end

-- ---- the helper's output: checked field by field ----

local function check(cond, what, ...)
  if not cond then fail("malformed helper output: " .. what, ...) end
end

local function check_params(p, what)
  check(type(p) == "table", "%s: params is not an object", what)
  for k, v in pairs(p) do
    check(type(k) == "string", "%s: a parameter name is not a string", what)
    local tv = type(v)
    check(tv == "string" or tv == "number" or tv == "boolean" or
          (tv == "table" and (type(v.class) == "string" or type(v.repr) == "string")),
          "%s: parameter %s has a value of type %s", what, k, tv)
  end
end

local function check_list(doc, key, fields)
  check(type(doc[key]) == "table", "no %s array", key)
  for i, item in ipairs(doc[key]) do
    check(type(item) == "table", "%s[%d] is not an object", key, i)
    for _, f in ipairs(fields) do check(type(item[f]) == "string", "%s[%d].%s is not a string", key, i, f) end
    check_params(item.params, key .. "[" .. i .. "]")
  end
end

local function decode(text)
  local doc, err = core._json_decode(text)
  check(doc, "%s", err or "")
  check(type(doc) == "table" and doc.hiernet_mininet == 1, "not a hiernet_mininet 1 document")
  check(math.type(doc.cores) == "integer" and doc.cores >= 1, "cores is not a positive integer")
  check_list(doc, "hosts", { "name" })
  check_list(doc, "switches", { "name" })
  check_list(doc, "links", { "a", "b" })
  return doc
end

-- ---- parameters ----

local function shown(v)
  if type(v) == "table" then return v.class or v.repr end
  if type(v) == "string" then return "'" .. v .. "'" end
  return tostring(v)
end

local function number(v)
  return fmt("%.15g", v)
end

-- tc's time units (Mininet hands delay and jitter to tc as they are).
local TIME_UNITS = { s = "s", sec = "s", secs = "s", ms = "ms", msec = "ms", msecs = "ms",
                     us = "us", usec = "us", usecs = "us", ns = "ns", nsec = "ns", nsecs = "ns" }

local function time_value(v)
  if type(v) == "number" and v >= 0 then return number(v) .. "us" end -- tc: a bare number is us
  if type(v) ~= "string" then return nil end
  local n, unit = v:match("^(%d*%.?%d+)(%a*)$")
  if not n or not tonumber(n) then return nil end
  if unit == "" then return n .. "us" end
  unit = TIME_UNITS[unit:lower()]
  return unit and (n .. unit)
end

local LINK_CLASSES = { Link = true, TCLink = true, TCULink = true }

-- key -> function(value) returning the hiernet option and its value (nil:
-- nothing to set), or false when the value cannot be represented.
local LINK_PARAMS = {
  bw = function(v) -- Mbit/s; 0 is no limit in Mininet
    if type(v) ~= "number" or v < 0 then return false end
    if v == 0 then return nil end
    return "bw", number(v) .. "Mbit"
  end,
  delay = function(v) local t = time_value(v); if not t then return false end; return "delay", t end,
  jitter = function(v) local t = time_value(v); if not t then return false end; return "jitter", t end,
  loss = function(v) -- percent
    if type(v) ~= "number" or v < 0 or v > 100 then return false end
    if v == 0 then return nil end
    return "loss", number(v) .. "%"
  end,
  max_queue_size = function(v) -- packets
    if math.type(v) ~= "integer" or v < 1 then return false end
    return "queue", v
  end,
  cls = function(v)
    if type(v) == "table" and LINK_CLASSES[v.class] then return nil end
    return false
  end,
}

local function link_options(link, where)
  local what = fmt("%s: link %s-%s", where, link.a, link.b)
  local opts = {}
  local keys = {}
  for k in pairs(link.params) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = link.params[k]
    local map = LINK_PARAMS[k]
    if not map then fail("%s: unsupported parameter %s=%s", what, k, shown(v)) end
    local option, value = map(v)
    if option == false then fail("%s: %s=%s cannot be represented in hiernet", what, k, shown(v)) end
    if option then opts[option] = value end
  end
  return opts
end

local HOST_CLASSES = { Host = true, CPULimitedHost = true }
local SWITCH_CLASSES = { OVSSwitch = true, OVSKernelSwitch = true, OVSBridge = true, UserSwitch = true,
                         LinuxBridge = true, IVSSwitch = true }
local HOST_IGNORED = { ip = true, mac = true, defaultRoute = true }
local SWITCH_IGNORED = { dpid = true }

local function host_options(host, cores, ignored, where)
  local what = fmt("%s: host '%s'", where, host.name)
  local opts = {}
  for k, v in pairs(host.params) do
    if k == "cpu" then
      if type(v) ~= "number" or v <= 0 or v > 1 then fail("%s: cpu=%s cannot be represented in hiernet", what, shown(v)) end
      opts.cpu = v * cores
    elseif k == "cls" then
      if not (type(v) == "table" and HOST_CLASSES[v.class]) then fail("%s: unsupported class %s", what, shown(v)) end
    elseif k == "sched" then
      if v ~= "cfs" then fail("%s: sched=%s cannot be represented in hiernet (it limits CPU with CFS quotas)", what, shown(v)) end
    elseif HOST_IGNORED[k] then
      ignored[k] = true
    else
      fail("%s: unsupported parameter %s=%s", what, k, shown(v))
    end
  end
  return opts
end

local function check_switch(switch, ignored, where)
  for k, v in pairs(switch.params) do
    if k == "cls" then
      if not (type(v) == "table" and SWITCH_CLASSES[v.class]) then
        fail("%s: switch '%s': unsupported class %s (hiernet switches are L2 bridges)", where, switch.name,
             shown(v))
      end
    elseif SWITCH_IGNORED[k] then
      ignored[k] = true
    else
      fail("%s: switch '%s': unsupported parameter %s=%s", where, switch.name, k, shown(v))
    end
  end
end

-- ---- running the helper ----

local function python()
  local path = os.getenv("HIERNET_PYTHON")
  if path and path ~= "" then
    if not core._which(path) then fail("HIERNET_PYTHON '%s' is not an executable", path) end
    return path
  end
  -- Debian's interpreter, where Debian's mininet package lives (a python3
  -- earlier in PATH, say pyenv's, would not see it).
  if core._stat("/usr/bin/python3") then return "/usr/bin/python3" end
  return core._which("python3") or fail("python3 is not installed (Debian package python3; tools/setup installs it)")
end

local function run_helper(file, class_name, args)
  local argv = { python(), "-B", "-c", HELPER, file or "", class_name, encode_arguments(args) }
  local status, out, err = core._host_run(argv, { sandbox = true, timeout = HELPER_TIMEOUT_S })
  local last = ""
  for line in err:gmatch("[^\n]+") do last = line end
  if status == nil then fail("%s %s: the Python helper %s", file or "mininet", class_name, out) end
  if status == 3 then
    fail("%s (install Debian package mininet; tools/setup installs it)", last)
  elseif status ~= 0 then
    fail("%s", last ~= "" and last or ("the Python helper exited with status " .. status))
  end
  return decode(out)
end

-- ---- building ----

local function add_nodes(net, doc, file)
  local t = { hosts = {}, switches = {}, links = {}, nodes = {} }
  local ignored = {}
  local function add(kind, item, opts)
    if item.name:find("%z") then fail("%s: %s name %q holds a NUL byte", file, kind, item.name) end
    local ok, node = pcall(kind == "host" and net.node or net.switch, net, item.name, opts)
    if not ok then fail("%s: %s '%s': %s", file, kind, item.name, node) end
    t.nodes[item.name] = node
    return node
  end
  for _, h in ipairs(doc.hosts) do
    t.hosts[#t.hosts + 1] = add("host", h, host_options(h, doc.cores, ignored, file))
  end
  for _, s in ipairs(doc.switches) do
    check_switch(s, ignored, file)
    t.switches[#t.switches + 1] = add("switch", s)
  end
  return t, ignored
end

local function add_links(net, doc, t, file)
  for _, l in ipairs(doc.links) do
    local a, b = t.nodes[l.a], t.nodes[l.b]
    check(a and b, "link %s-%s names a node that is neither host nor switch", l.a, l.b)
    local ok, link = pcall(net.link, net, a, b, link_options(l, file))
    if not ok then fail("%s: link %s-%s: %s", file, l.a, l.b, link) end
    t.links[#t.links + 1] = link
  end
end

-- mininet.load(net, file, class_name, args) -> {hosts=, switches=, links=, nodes=}
-- net: a network not yet started; file: a Python file, or nil for Mininet's
-- own topologies (LinearTopo, SingleSwitchTopo, TreeTopo, ...); args: the
-- constructor's arguments, positional in the array part and keyword in
-- the hash part ({4, n = 2} is Class(4, n=2)).
function mininet.load(net, file, class_name, args)
  if type(net) ~= "userdata" or not pcall(function() return net:state() end) then
    fail("load: net must be a network (hn.network{...}), got %s", type(net))
  end
  if file ~= nil and type(file) ~= "string" then fail("load: file must be a path or nil, got %s", type(file)) end
  if type(class_name) ~= "string" or class_name == "" then fail("load: class_name must be a non-empty string") end
  if net:state() ~= "not started" then fail("load: network '%s' is already %s", net.name, net:state()) end
  if file and core._stat(file) ~= "file" then fail("%s: no such file", file) end
  local doc = run_helper(file, class_name, args)
  local where = file or ("mininet " .. class_name)
  local t, ignored = add_nodes(net, doc, where)
  add_links(net, doc, t, where)
  local dropped = {}
  for k in pairs(ignored) do dropped[#dropped + 1] = k end
  table.sort(dropped)
  if #dropped > 0 then
    core.log(fmt("mininet %s: ignored %s (hiernet assigns its own addresses)", where, table.concat(dropped, ", ")))
  end
  return t
end

return mininet
