-- mininet_roles: tests/lua/mininet/roles_topo.py's node classes and link
-- parameters as docs/lua-api.md's Mininet section says: a router found by
-- its forwarding, one named by options.roles, parallel links, unknown
-- classes and parameters (errors, or with lenient one warning line each),
-- classes given as functools.partial, OpenFlow switch settings, and the
-- classes refused even when lenient (a controller, a NAT, the root
-- namespace); exact nodes, links, routes, parameters and log lines
-- (backend none, never started). Needs Debian's mininet package.
local mininet = require("hiernet.mininet")
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local M = dofile(here .. "/lib/mininet_check.lua")
local network, expect_eq, expect_error = M.network, M.expect_eq, M.expect_error
local names, link_names, route, load, expect_logged_once = M.names, M.link_names, M.route, M.load,
  M.expect_logged_once
M.skip_without_mininet()

-- ---- roles, lenient and refusals (tests/lua/mininet/roles_topo.py) ----

local roles_file = here .. "/mininet/roles_topo.py"
expect_error("roles_topo.py: host 'r2': unsupported class StaticRouter (roles = {StaticRouter = \"host\"} or "
             .. "\"router\" says what it is; lenient = true makes it a plain host)", mininet.load, network("r0"),
             roles_file, "RouterTopo")
local roles = { StaticRouter = "router" }
local t, net, log = load(roles_file, "RouterTopo", nil, { roles = roles })
expect_eq(names(t.hosts), "h1 h2", "RouterTopo hosts")
expect_eq(names(t.routers), "r1 r2", "RouterTopo routers")
expect_eq(link_names(t.links), "h1-s1 r1-r2 r1-r2#2 r2-h2 s1-r1", "RouterTopo links")
expect_eq(t.links[2]:params().delay, 0.005, "r1-r2 delay")
expect_eq(t.links[3]:params().delay, 0.001, "r1-r2#2 delay")
expect_eq(t.links[1]:params().bw, 20000000, "h1-s1 bw (use_htb dropped)")
expect_eq(route(net, "h1", "h2"), "h1 s1 r1 r2 h2", "RouterTopo route")
for _, line in ipairs({
  "ignored ip, params1, params2 (hiernet assigns its own addresses)",
  "ignored intfName1, intfName2 (hiernet names interfaces itself)",
  "ignored use_htb (hiernet always shapes",
  "r1 (ForwardingRouter) routes as a hiernet node (every hiernet node forwards, on routes hiernet computes); its "
    .. "subnets 10.1.0.0/24, 10.9.0.0/30, 10.9.1.0/30 become hiernet's own addresses",
  "r2 (StaticRouter) routes as a hiernet node (every hiernet node forwards, on routes hiernet computes); its "
    .. "subnets 10.9.0.0/30 become hiernet's own addresses",
  "parallel links r1-r2 (2): separate links, each with its interfaces and parameters; routes use the one with the "
    .. "least delay, the first made of equal ones",
}) do
  expect_logged_once(log, line, "RouterTopo")
end

-- Unknown classes and parameters: errors, or with lenient one warning each.
expect_error("roles_topo.py: host 'h2': unsupported class FancyHost", mininet.load, network("x1"), roles_file,
             "RouterTopo", { extra = true }, { roles = roles })
expect_error("roles_topo.py: switch 's1': unsupported class FancySwitch (hiernet switches are L2 bridges",
             mininet.load, network("x2"), roles_file, "RouterTopo", { extra = true },
             { roles = { StaticRouter = "router", FancyHost = "host" } })
expect_error("roles_topo.py: link r2-h2: params2 holds bw=5 (a parameter of one interface; hiernet links are alike "
             .. "both ways)", mininet.load, network("x3"), roles_file, "RouterTopo", { extra = true },
             { roles = { StaticRouter = "router", FancyHost = "host", FancySwitch = "switch" } })
expect_error("roles_topo.py: link r2-h2: cls=FancyLink cannot be represented in hiernet", mininet.load,
             network("x4"), roles_file, "RouterTopo", { fancy_link = true }, { roles = roles })
t, net, log = load(roles_file, "RouterTopo", { extra = true, fancy_link = true }, { roles = roles, lenient = true })
expect_eq(names(t.hosts), "h1 h2", "lenient RouterTopo hosts")
expect_eq(t.nodes.s1.kind, "switch", "lenient: FancySwitch is a switch")
for _, line in ipairs({
  "lenient: host class FancyHost made a plain host: h2",
  "lenient: switch class FancySwitch made an L2 bridge: s1",
  "lenient: ignored link parameter speedup=2: r2-h2",
  "lenient: ignored params2.bw=5: r2-h2",
  "lenient: link class FancyLink made a plain link: r2-h2",
}) do
  expect_logged_once(log, line, "lenient RouterTopo")
end

-- Classes as functools.partial (their keywords are the node's or link's
-- parameters, the call's own winning) and an OpenFlow switch's settings.
t, net, log = load(roles_file, "PartialTopo")
assert(math.abs(t.nodes.h1.cpu / t.nodes.h2.cpu - 2) < 1e-9,
       string.format("cpu 0.2 and 0.1 of the cores: %s, %s", t.nodes.h1.cpu, t.nodes.h2.cpu))
expect_eq(t.links[1]:params().bw, 7000000, "h1-s1 bw from partial(TCLink, bw=7)")
expect_eq(t.links[1]:params().delay, 0.002, "h1-s1 delay from partial(TCLink, delay='2ms')")
expect_eq(t.links[2]:params().bw, 3000000, "h2-s1 bw: the call's bw=3 wins")
expect_logged_once(log, "ignored failMode, protocols, stp (hiernet switches are L2 learning bridges, without "
                   .. "OpenFlow or a controller)", "PartialTopo")

-- Refused even when lenient: a controller, a NAT, the root namespace.
for _, options in ipairs({ { roles = roles, lenient = true } }) do
  expect_error("host 'c0': class MyController cannot be represented: it is an OpenFlow controller, and hiernet's "
               .. "switches are L2 bridges that take none", mininet.load, network("c"), roles_file, "RouterTopo",
               { refused = "controller" }, options)
  expect_error("host 'nat0': class NAT cannot be represented", mininet.load, network("n"), roles_file, "RouterTopo",
               { refused = "nat" }, options)
  expect_error("host 'root': inNamespace=false cannot be represented: the node would need the root namespace",
               mininet.load, network("rt"), roles_file, "RouterTopo", { refused = "root" }, options)
end

-- Bad options are one-line errors naming them.
expect_error("load: unknown option 'strict' (options: lenient, roles)", mininet.load, network("o1"), nil,
             "MinimalTopo", nil, { strict = true })
expect_error("load: roles['Foo'] = 'gateway': a class name maps to \"host\", \"router\" or \"switch\"",
             mininet.load, network("o2"), nil, "MinimalTopo", nil, { roles = { Foo = "gateway" } })
expect_error("load: lenient must be true or false, got 'yes'", mininet.load, network("o3"), nil, "MinimalTopo",
             nil, { lenient = "yes" })

print("roles, lenient and refusals: as documented")
