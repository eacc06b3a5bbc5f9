-- hiernet.mininet: builds a Mininet topology in a hiernet network.
--
--   local mininet = require("hiernet.mininet")
--   local t = mininet.load(net, "topos/mytopo.py", "MyTopo", { 3, bw = 10 })   -- MyTopo(3, bw=10)
--   local t = mininet.load(net, nil, "TreeTopo", { depth = 2, fanout = 3 })    -- Mininet's own
--   local t = mininet.load(net, "router.py", "NetTopo", nil, { roles = { MyRouter = "router" } })
--   t.hosts, t.routers, t.switches, t.links (handles, in Mininet's order), t.nodes.h1
--
-- The topology class is evaluated by Debian's Python with Debian's mininet
-- package (the helper below): it imports the file, instantiates the class
-- with the arguments and prints hosts, switches and links with their
-- parameters as JSON. Mininet itself is never started, and the helper runs
-- in a fresh, empty network namespace when hiernet runs as root, so a file
-- that tries cannot touch the host's network. Nothing is parsed from Python
-- source here (the helper only searches a user's node class for the line
-- that turns on IP forwarding, to know a router). The helper's output is untrusted (the file decides what it
-- prints): it goes through the strict JSON reader (common/json_read.c)
-- and every field is checked before use.
--
-- Mapping: hosts -> net:node, switches -> net:switch (an L2 bridge),
-- links -> net:link with bw (Mbit/s) -> "XMbit", delay / jitter ("5ms", tc's
-- units; a bare number is microseconds, as tc reads it) -> times, loss
-- (percent) -> "X%", max_queue_size (packets) -> queue. A host's cpu
-- (CPULimitedHost: a share of the whole machine) becomes hiernet's cpu
-- (a share of one core) times the cores Mininet counts. A second link
-- between the same two nodes becomes a parallel link (net:link's
-- parallel = true). Host classes by role: a class that turns on IP
-- forwarding (LinuxRouter) or that options.roles names "router" becomes a
-- node of tier "router" (hiernet nodes forward anyway); VLANHost a host
-- without its VLAN; a Controller or NAT subclass, or inNamespace=False, stays
-- an error saying why. Values that only name or address things (ip, mac,
-- defaultRoute, dpid, intfName1/2, params1/2 holding only ip and mac) or
-- that ask for what hiernet does anyway (use_htb, inNamespace=True) are
-- dropped with one log line per reason. Anything else is an error naming
-- the parameter and the node or link, unless options.lenient turns unknown
-- classes into plain hosts, switches and links and unknown parameters into
-- one warning line each. cls=functools.partial(Class, k=v) is Class with
-- k=v among the parameters; an OpenFlow switch's settings are dropped.
local core = require("hiernet.core")

local mininet = {}

local HELPER_TIMEOUT_S = 60

-- The helper: argv = file ("" for Mininet's own classes), class name, the
-- arguments as JSON {"args": [...], "kwargs": {...}}. Exit 0 with the
-- topology as JSON on stdout; 2 with one line on stderr for an error in
-- the file or the arguments; 3 when mininet cannot be imported. What the
-- file prints goes to stderr, never into the JSON.
local HELPER = [==[
import functools, importlib.util, inspect, json, math, os, re, sys, traceback

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
    sys.modules[spec.name] = module  # where inspect finds a class's source (forwards)
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

# Mininet's own node classes: a class's bases among them say what it is
# (a Host, a Controller, a NAT) whatever the user named it.
LIBRARY = ("mininet.node", "mininet.nodelib", "mininet.link")
# A class that turns IPv4 forwarding on, as the LinuxRouter of Mininet's
# examples does with `sysctl net.ipv4.ip_forward=1`.
FORWARDING = re.compile(r"ip_forward\s*=\s*1|echo\s+1\s*>+\s*/proc/sys/net/ipv4/ip_forward"
                        r"|\.forwarding\s*=\s*1")

def forwards(cls):
    for c in cls.__mro__:
        if c.__module__ in LIBRARY or c is object:
            continue
        try:
            if FORWARDING.search(inspect.getsource(c)):
                return True
        except (OSError, TypeError):
            pass
    return False

def value(v, nested=False):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2 ** 53 else {"repr": repr(v)}
    if isinstance(v, float):
        return v if math.isfinite(v) else {"repr": repr(v)}
    if isinstance(v, type):
        return {"class": v.__name__, "forwards": forwards(v),
                "bases": [c.__name__ for c in v.__mro__ if c.__module__ in LIBRARY]}
    if isinstance(v, dict) and not nested:  # params1 / params2 of a link
        return {"dict": {str(k): value(x, True) for k, x in v.items() if x is not None}}
    return {"repr": repr(v)[:200]}

def unwrapped(info):  # cls=partial(Class, k=v): Mininet calls Class(k=v, **params)
    cls = info.get("cls")
    if isinstance(cls, functools.partial) and isinstance(cls.func, type) and not cls.args:
        info = dict(cls.keywords, **info)
        info["cls"] = cls.func
    return info

def params(info, internal):
    return {str(k): value(v) for k, v in unwrapped(info).items() if k not in internal and v is not None}

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

local function check_value(v, what, k, nested)
  local tv = type(v)
  if tv == "string" or tv == "number" or tv == "boolean" then return end
  check(tv == "table", "%s: parameter %s has a value of type %s", what, k, tv)
  if type(v.repr) == "string" then return end
  if type(v.class) == "string" then
    check(type(v.forwards) == "boolean" and type(v.bases) == "table", "%s: class %s lacks forwards or bases", what, k)
    for _, b in ipairs(v.bases) do check(type(b) == "string", "%s: class %s: a base is not a string", what, k) end
    return
  end
  check(not nested and type(v.dict) == "table", "%s: parameter %s has a malformed value", what, k)
  for dk, dv in pairs(v.dict) do
    check(type(dk) == "string", "%s: %s: a key is not a string", what, k)
    check_value(dv, what, k .. "." .. dk, true)
  end
end

local function check_params(p, what)
  check(type(p) == "table", "%s: params is not an object", what)
  for k, v in pairs(p) do
    check(type(k) == "string", "%s: a parameter name is not a string", what)
    check_value(v, what, k, false)
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

-- ---- what a load did: dropped values, mappings, lenient warnings ----

-- Why a parameter hiernet takes without using it is dropped; one log line
-- per reason lists the keys.
local REASONS = {
  addresses = "hiernet assigns its own addresses",
  names = "hiernet names interfaces itself",
  shaping = "hiernet always shapes: HTB on the kernel backend, hiernet-linkd on the user backend",
  namespace = "every hiernet node has a network namespace of its own",
  openflow = "hiernet switches are L2 learning bridges, without OpenFlow or a controller",
}

-- ctx: what one load has seen, reported once at its end (report()).
local function new_context(doc, where, options)
  return { doc = doc, where = where, lenient = options.lenient, roles = options.roles,
           dropped = {}, warnings = {}, warned = {}, routers = {}, vlans = {}, parallel = {} }
end

local function drop(ctx, reason, key)
  ctx.dropped[reason] = ctx.dropped[reason] or {}
  ctx.dropped[reason][key] = true
end

-- Lenient: one warning line per kind of thing ignored, naming where.
local function warn(ctx, line, element)
  local w = ctx.warned[line]
  if not w then
    w = { line = line, elements = {} }
    ctx.warned[line] = w
    ctx.warnings[#ctx.warnings + 1] = w
  end
  w.elements[#w.elements + 1] = element
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function listed(names, most)
  if #names <= most then return table.concat(names, ", ") end
  return table.concat(names, ", ", 1, most) .. fmt(" and %d more", #names - most)
end

-- ---- parameters ----

local function shown(v)
  if type(v) == "table" then
    if v.dict then
      local parts = {}
      for _, k in ipairs(sorted_keys(v.dict)) do parts[#parts + 1] = k .. "=" .. shown(v.dict[k]) end
      return "{" .. table.concat(parts, ", ") .. "}"
    end
    return v.class or v.repr
  end
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

local LINK_CLASSES = { Link = true, TCLink = true, TCULink = true, OVSLink = true } -- OVSLink: a veth between non-OVS nodes
local INTERFACE_CLASSES = { Intf = true, TCIntf = true }

-- Keys of params1 / params2 that only address an interface.
local INTERFACE_ADDRESS = { ip = true, mac = true }

-- params1 / params2: per-interface parameters. Addresses only are dropped
-- (their ip kept to name a router's subnets); anything else would shape one
-- direction alone, which a hiernet link (alike both ways) cannot.
local function interface_params(ctx, link, v, key, what)
  if type(v) ~= "table" or not v.dict then
    fail("%s: %s=%s cannot be represented in hiernet", what, key, shown(v))
  end
  for _, k in ipairs(sorted_keys(v.dict)) do
    if not INTERFACE_ADDRESS[k] then
      if not ctx.lenient then
        fail("%s: %s holds %s=%s (a parameter of one interface; hiernet links are alike both ways)", what, key,
             k, shown(v.dict[k]))
      end
      warn(ctx, fmt("lenient: ignored %s.%s=%s", key, k, shown(v.dict[k])), link.a .. "-" .. link.b)
    end
  end
  if v.dict.ip ~= nil or v.dict.mac ~= nil then drop(ctx, "addresses", key) end
  return v.dict.ip
end

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
  intf = function(v) -- TCIntf is what TCLink uses; its parameters are the link's
    if type(v) == "table" and INTERFACE_CLASSES[v.class] then return nil end
    return false
  end,
}

-- Link keys that name things or ask for what hiernet does anyway: the
-- reason they are dropped, or false when the value is not of that kind.
local LINK_DROPPED = {
  use_htb = function(v) return type(v) == "boolean" and "shaping" end,
  intfName1 = function(v) return type(v) == "string" and "names" end,
  intfName2 = function(v) return type(v) == "string" and "names" end,
}

local function link_param(ctx, link, k, v, what, opts)
  local map, dropped = LINK_PARAMS[k], LINK_DROPPED[k]
  if k == "params1" or k == "params2" then
    local ip = interface_params(ctx, link, v, k, what)
    if ip then link.ips[k == "params1" and link.a or link.b] = ip end
  elseif dropped then
    local reason = dropped(v)
    if not reason then fail("%s: %s=%s cannot be represented in hiernet", what, k, shown(v)) end
    drop(ctx, reason, k)
  elseif map then
    local option, value = map(v)
    if option == false and ctx.lenient and (k == "cls" or k == "intf") then
      warn(ctx, fmt("lenient: link %s %s made a plain link", k == "cls" and "class" or "interface class",
                    shown(v)), fmt("%s-%s", link.a, link.b))
    elseif option == false then
      fail("%s: %s=%s cannot be represented in hiernet", what, k, shown(v))
    elseif option then
      opts[option] = value
    end
  elseif ctx.lenient then
    warn(ctx, fmt("lenient: ignored link parameter %s=%s", k, shown(v)), fmt("%s-%s", link.a, link.b))
  else
    fail("%s: unsupported parameter %s=%s", what, k, shown(v))
  end
end

local function link_options(ctx, link)
  local what = fmt("%s: link %s-%s", ctx.where, link.a, link.b)
  local opts = {}
  link.ips = {}
  for _, k in ipairs(sorted_keys(link.params)) do link_param(ctx, link, k, link.params[k], what, opts) end
  return opts
end

-- ---- node classes ----

local HOST_CLASSES = { Node = true, Host = true, CPULimitedHost = true } -- Mininet's Host is a bare Node
local SWITCH_CLASSES = { OVSSwitch = true, OVSKernelSwitch = true, OVSBridge = true, UserSwitch = true,
                         LinuxBridge = true, IVSSwitch = true }
local ROLES = { host = true, router = true, switch = true }
-- Settings of an OpenFlow switch and its controller channel: a hiernet
-- switch is a learning bridge, which is what a Mininet switch is without a
-- controller (failMode standalone); stp matters only for loops, which
-- net:start() refuses.
local SWITCH_OPENFLOW = { protocols = true, failMode = true, listenPort = true, datapath = true, inband = true,
                          stp = true }

-- Mininet classes whose role hiernet cannot play, by the library base that
-- says so, with the reason; these stay errors, lenient or not.
local REFUSED_BASES = {
  { "Controller", "it is an OpenFlow controller, and hiernet's switches are L2 bridges that take none" },
  { "NAT", "it translates addresses (iptables MASQUERADE) to reach outside the emulated network, "
           .. "which hiernet does not emulate" },
}

local function has_base(cls, name)
  for _, b in ipairs(cls.bases) do if b == name then return true end end
  return false
end

local function refusal(cls)
  for _, r in ipairs(REFUSED_BASES) do
    if has_base(cls, r[1]) then return r[2] end
  end
end

-- A class hiernet does not know, on a host or a switch entry (kind): an
-- error (hint: what the user can say instead), or with lenient `made` (a
-- plain host, an L2 bridge) with a warning. A cls that is not a class (a
-- lambda, an instance) is named as such.
local function unknown_class(ctx, entry, cls, what, kind, made, hint)
  local name = cls.class or cls.repr
  if not ctx.lenient and not cls.class then
    fail("%s: cls=%s is not a class (lenient = true makes it %s)", what, name, made)
  elseif not ctx.lenient then
    fail("%s: unsupported class %s (%s)", what, name, hint)
  end
  warn(ctx, fmt("lenient: %s class %s made %s", kind, name, made), entry.name)
end

-- A parameter of a host or a switch entry (kind) that hiernet has no
-- place for: an error, or with lenient a warning that it was ignored.
local function unknown_param(ctx, entry, kind, what, k, v)
  if not ctx.lenient then fail("%s: unsupported parameter %s=%s", what, k, shown(v)) end
  warn(ctx, fmt("lenient: ignored %s parameter %s=%s", kind, k, shown(v)), entry.name)
end

-- The role of a host entry's class: "host", "router" or "vlan" (a host
-- whose VLAN is left out); an error for a class hiernet cannot represent.
local function host_role(ctx, host, cls, what)
  if cls == nil then return "host" end
  if type(cls) ~= "table" then cls = { repr = shown(cls) } end
  local name = cls.class or cls.repr
  local role = ctx.roles[name]
  if role == "switch" then fail("%s: roles makes class %s a switch, but the file adds it as a host", what, name) end
  if role then return role end
  if cls.class and HOST_CLASSES[name] then return "host" end
  local why = cls.class and refusal(cls)
  if why then fail("%s: class %s cannot be represented: %s", what, name, why) end
  if cls.class and cls.forwards then return "router" end
  if cls.class and name == "VLANHost" and has_base(cls, "Host") then return "vlan" end
  unknown_class(ctx, host, cls, what, "host", "a plain host",
                fmt("roles = {%s = \"host\"} or \"router\" says what it is; lenient = true makes it a plain host", name))
  return "host"
end

local HOST_DROPPED = { ip = "addresses", mac = "addresses", defaultRoute = "addresses" }

local function host_param(ctx, host, role, k, v, what, opts)
  if k == "cpu" then
    if type(v) ~= "number" or v <= 0 or v > 1 then fail("%s: cpu=%s cannot be represented in hiernet", what, shown(v)) end
    opts.cpu = v * ctx.doc.cores
  elseif k == "sched" then
    if v ~= "cfs" then fail("%s: sched=%s cannot be represented in hiernet (it limits CPU with CFS quotas)", what, shown(v)) end
  elseif k == "inNamespace" then
    if v ~= true then
      fail("%s: inNamespace=%s cannot be represented: the node would need the root namespace, and every hiernet "
           .. "node has a namespace of its own", what, shown(v))
    end
    drop(ctx, "namespace", k)
  elseif k == "vlan" and role == "vlan" then
    ctx.vlans[#ctx.vlans + 1] = fmt("%s (%s)", host.name, shown(v))
  elseif HOST_DROPPED[k] then
    drop(ctx, HOST_DROPPED[k], k)
  else
    unknown_param(ctx, host, "host", what, k, v)
  end
end

-- The options of net:node for a host entry, and its role.
local function host_options(ctx, host)
  local what = fmt("%s: host '%s'", ctx.where, host.name)
  local role = host_role(ctx, host, host.params.cls, what)
  local opts = role == "router" and { tier = "router" } or {}
  for _, k in ipairs(sorted_keys(host.params)) do
    if k ~= "cls" then host_param(ctx, host, role, k, host.params[k], what, opts) end
  end
  return opts, role
end

-- Every switch class becomes an L2 bridge; an unknown one only when roles
-- or lenient say so.
local function check_switch_class(ctx, switch, v, what)
  if type(v) ~= "table" then v = { repr = shown(v) } end
  local name = v.class or v.repr
  if (v.class and SWITCH_CLASSES[name]) or ctx.roles[name] == "switch" then return end
  unknown_class(ctx, switch, v, what, "switch", "an L2 bridge",
                fmt("hiernet switches are L2 bridges; roles = {%s = \"switch\"} or lenient = true takes it as one", name))
end

local function check_switch(ctx, switch)
  local what = fmt("%s: switch '%s'", ctx.where, switch.name)
  for _, k in ipairs(sorted_keys(switch.params)) do
    local v = switch.params[k]
    if k == "cls" then
      check_switch_class(ctx, switch, v, what)
    elseif k == "dpid" then
      drop(ctx, "addresses", k)
    elseif SWITCH_OPENFLOW[k] then
      drop(ctx, "openflow", k)
    elseif k == "inNamespace" and type(v) == "boolean" then -- a bridge in its namespace forwards alike
      drop(ctx, "namespace", k)
    else
      unknown_param(ctx, switch, "switch", what, k, v)
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

local function add_node(ctx, net, t, kind, item, opts)
  if item.name:find("%z") then fail("%s: %s name %q holds a NUL byte", ctx.where, kind, item.name) end
  local ok, node = pcall(kind == "switch" and net.switch or net.node, net, item.name, opts)
  if not ok then fail("%s: %s '%s': %s", ctx.where, kind, item.name, node) end
  t.nodes[item.name] = node
  return node
end

local function add_nodes(ctx, net)
  local t = { hosts = {}, routers = {}, switches = {}, links = {}, nodes = {} }
  for _, h in ipairs(ctx.doc.hosts) do
    local opts, role = host_options(ctx, h)
    local node = add_node(ctx, net, t, "host", h, opts)
    if role == "router" then
      ctx.routers[#ctx.routers + 1] = { name = h.name, class = shown(h.params.cls), ips = { h.params.ip } }
      t.routers[#t.routers + 1] = node
    else
      t.hosts[#t.hosts + 1] = node
    end
  end
  for _, s in ipairs(ctx.doc.switches) do
    check_switch(ctx, s)
    t.switches[#t.switches + 1] = add_node(ctx, net, t, "switch", s)
  end
  return t
end

-- A link's addresses on a router's interfaces name the router's subnets.
local function note_router_ips(ctx, link)
  for _, r in ipairs(ctx.routers) do
    if link.ips[r.name] then r.ips[#r.ips + 1] = link.ips[r.name] end
  end
end

local function add_links(ctx, net, t)
  local count = {}
  for _, l in ipairs(ctx.doc.links) do
    local a, b = t.nodes[l.a], t.nodes[l.b]
    check(a and b, "link %s-%s names a node that is neither host nor switch", l.a, l.b)
    local opts = link_options(ctx, l)
    note_router_ips(ctx, l)
    local pair = l.a < l.b and (l.a .. "-" .. l.b) or (l.b .. "-" .. l.a)
    count[pair] = (count[pair] or 0) + 1
    if count[pair] > 1 then
      opts.parallel = true
      ctx.parallel[pair] = count[pair]
    end
    local ok, link = pcall(net.link, net, a, b, opts)
    if not ok then fail("%s: link %s-%s: %s", ctx.where, l.a, l.b, link) end
    t.links[#t.links + 1] = link
  end
end

-- "192.168.1.1/24" -> "192.168.1.0/24"; an address without a prefix as it is.
local function subnet_of(ip)
  if type(ip) ~= "string" then return nil end
  local a, b, c, d, len = ip:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)/(%d+)$")
  len = tonumber(len)
  if not a or len > 32 then return ip:match("^[%d.]+$") end
  local addr = ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d)
  local size = 1 << (32 - len)
  addr = addr // size * size
  return fmt("%d.%d.%d.%d/%d", addr >> 24 & 255, addr >> 16 & 255, addr >> 8 & 255, addr & 255, len)
end

local function report_routers(ctx)
  for _, r in ipairs(ctx.routers) do
    local subnets, seen = {}, {}
    for _, ip in ipairs(r.ips) do
      local s = subnet_of(ip)
      if s and not seen[s] then seen[s] = true; subnets[#subnets + 1] = s end
    end
    table.sort(subnets)
    core.log(fmt("mininet %s: %s (%s) routes as a hiernet node (every hiernet node forwards, on routes "
                 .. "hiernet computes); %s", ctx.where, r.name, r.class,
                 #subnets > 0 and ("its subnets " .. table.concat(subnets, ", ") .. " become hiernet's own addresses")
                   or "it keeps no address of the file"))
  end
end

local function report(ctx)
  for _, reason in ipairs({ "addresses", "names", "shaping", "namespace", "openflow" }) do
    if ctx.dropped[reason] then
      core.log(fmt("mininet %s: ignored %s (%s)", ctx.where, table.concat(sorted_keys(ctx.dropped[reason]), ", "),
                   REASONS[reason]))
    end
  end
  report_routers(ctx)
  if #ctx.vlans > 0 then
    core.log(fmt("mininet %s: VLANHost without its VLAN: %s share one network with the other hosts", ctx.where,
                 listed(ctx.vlans, 6)))
  end
  local pairs_ = {}
  for _, pair in ipairs(sorted_keys(ctx.parallel)) do pairs_[#pairs_ + 1] = fmt("%s (%d)", pair, ctx.parallel[pair]) end
  if #pairs_ > 0 then
    core.log(fmt("mininet %s: parallel links %s: separate links, each with its interfaces and parameters; routes "
                 .. "use the one with the least delay, the first made of equal ones", ctx.where, listed(pairs_, 6)))
  end
  for _, w in ipairs(ctx.warnings) do
    core.log(fmt("mininet %s: %s: %s", ctx.where, w.line, listed(w.elements, 6)))
  end
end

-- {lenient = false, roles = {ClassName = "host" | "router" | "switch"}}
local function check_options(options)
  if options == nil then return { lenient = false, roles = {} } end
  if type(options) ~= "table" then fail("load: options must be a table, got %s", type(options)) end
  for k in pairs(options) do
    if k ~= "lenient" and k ~= "roles" then fail("load: unknown option '%s' (options: lenient, roles)", tostring(k)) end
  end
  if options.lenient ~= nil and type(options.lenient) ~= "boolean" then
    fail("load: lenient must be true or false, got %s", shown(options.lenient))
  end
  local roles = options.roles or {}
  if type(roles) ~= "table" then fail("load: roles must be a table {ClassName = role}, got %s", type(roles)) end
  for class_name, role in pairs(roles) do
    if type(class_name) ~= "string" or not ROLES[role] then
      fail("load: roles[%s] = %s: a class name maps to \"host\", \"router\" or \"switch\"", shown(class_name), shown(role))
    end
  end
  return { lenient = options.lenient == true, roles = roles }
end

-- mininet.load(net, file, class_name, args, options) -> {hosts=, routers=,
-- switches=, links=, nodes=}
-- net: a network not yet started; file: a Python file, or nil for Mininet's
-- own topologies (LinearTopo, SingleSwitchTopo, TreeTopo, ...); args: the
-- constructor's arguments, positional in the array part and keyword in
-- the hash part ({4, n = 2} is Class(4, n=2)); options: lenient, roles.
function mininet.load(net, file, class_name, args, options)
  if type(net) ~= "userdata" or not pcall(function() return net:state() end) then
    fail("load: net must be a network (hn.network{...}), got %s", type(net))
  end
  if file ~= nil and type(file) ~= "string" then fail("load: file must be a path or nil, got %s", type(file)) end
  if type(class_name) ~= "string" or class_name == "" then fail("load: class_name must be a non-empty string") end
  options = check_options(options)
  if net:state() ~= "not started" then fail("load: network '%s' is already %s", net.name, net:state()) end
  if file and core._stat(file) ~= "file" then fail("%s: no such file", file) end
  local doc = run_helper(file, class_name, args)
  local ctx = new_context(doc, file or ("mininet " .. class_name), options)
  local t = add_nodes(ctx, net)
  add_links(ctx, net, t)
  report(ctx)
  return t
end

return mininet
