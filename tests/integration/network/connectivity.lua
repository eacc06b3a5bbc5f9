-- connectivity: a 3-tier terminal/edge/cloud network (2 clouds, 4 edges,
-- 8 terminals) plus a switch segment of three hosts bridged to two edges,
-- bw-only links. Asserts:
--   * every host has a distinct node address on its loopback, and no IPv6
--     address on any link end;
--   * every ordered pair of hosts pings (ping -c1 -W2, 16 at a time);
--   * for every ordered pair, the kernel's next hop (`ip -o route get`) is an
--     address of the next host on net:route(a, b), and the source address is
--     the node address; for a few pairs the whole path is walked hop by hop;
--   * link:down() cuts a host off and link:up() restores its routes.
-- The segment hosts' names share their first 15 characters (interface-name
-- collisions) and one is 31 characters long (the longest valid name).
-- Args: backend=kernel|user; switch=no makes the segment's centre a host
-- (to exercise the rest where switches fail); owned=, regdir= from lib.sh.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local backend = A.backend or "kernel"

local net = hn.network{ name = "conn", backend = backend, seed = 3 }
local t = topo.hier(net, { clouds = 2, edges_per_cloud = 2, terminals_per_edge = 2,
                           links = { cloud_edge = { bw = "1Gbit" }, edge_terminal = { bw = "100Mbit" },
                                     cloud_cloud = { bw = "1Gbit" } } })
local sw = A.switch == "no" and net:node("segment") or net:switch("segment")
local seg = {
  net:node("seghost-longname-a", { tier = "terminal" }),
  net:node("seghost-longname-b", { tier = "terminal" }),
  net:node("seghost-longname-c-0123456789ab", { tier = "terminal" }), -- 31 characters
}
local seg_link = {}
for i, h in ipairs(seg) do seg_link[i] = net:link(sw, h, { bw = "100Mbit" }) end
net:link(sw, t.edge[1], { bw = "100Mbit" })
net:link(sw, t.edge[3], { bw = "100Mbit" })

local t0 = hn.now()
net:start()
H.log("backend %s: %d hosts up in %.2f s", net.backend, #H.hosts(net), hn.now() - t0)
H.own(net)
local hosts = H.hosts(net)

-- Node addresses: distinct, on lo as /32.
local owner, seen = {}, {}
H.map(hosts, 8, function(n)
  H.check(n.addr and n.addr:match("^%d+%.%d+%.%d+%.%d+$"), "node %s has no address: %s", n.name, tostring(n.addr))
  H.check(not seen[n.addr], "nodes %s and %s share address %s", n.name, tostring(seen[n.addr]), n.addr)
  seen[n.addr] = n.name
  local r = n:run({ "ip", "-o", "-4", "addr", "show" })
  H.check(r.status == 0, "ip addr in %s failed: %s", n.name, r.err)
  local on_lo = false
  for ifname, addr, plen in r.out:gmatch("%d+: (%S+)%s+inet ([%d%.]+)/(%d+)") do
    if addr:match("^127%.") then goto continue end
    H.check(not owner[addr] or owner[addr] == n.name, "address %s is on %s and %s", addr, n.name, tostring(owner[addr]))
    owner[addr] = n.name
    if ifname == "lo" and addr == n.addr and plen == "32" then on_lo = true end
    ::continue::
  end
  H.check(on_lo, "node %s: %s/32 is not on lo:\n%s", n.name, n.addr, r.out)
  -- IPv6 stays quiet on every link end (addr_gen_mode none): no link-local
  -- address, so no DAD, solicitations or MLD reports on shaped links.
  local r6 = n:run({ "ip", "-o", "-6", "addr", "show" })
  H.check(r6.status == 0, "ip -6 addr in %s failed: %s", n.name, r6.err)
  for ifname, addr in r6.out:gmatch("%d+: (%S+)%s+inet6 (%S+)") do
    H.check(ifname == "lo", "node %s: link end %s has IPv6 address %s", n.name, ifname, addr)
  end
end)

-- Every ordered pair pings.
local pairs_list = {}
for _, a in ipairs(hosts) do
  for _, b in ipairs(hosts) do
    if a ~= b then pairs_list[#pairs_list + 1] = { a, b } end
  end
end
t0 = hn.now()
local failed = {}
H.map(pairs_list, 16, function(p)
  if not H.ping_ok(p[1], p[2], 2) then failed[#failed + 1] = p[1].name .. "->" .. p[2].name end
end)
H.log("%d ordered pairs pinged in %.2f s, %d failed", #pairs_list, hn.now() - t0, #failed)
table.sort(failed)
H.check(#failed == 0, "%d of %d pairs do not ping: %s", #failed, #pairs_list,
        table.concat(failed, " ", 1, math.min(#failed, 12)))

-- Routes: the hosts of net:route(a, b), switches left out (they forward at L2).
local function host_path(a, b)
  local path = {}
  for _, name in ipairs(net:route(a, b)) do
    local n = net:find(name)
    if n.kind == "host" then path[#path + 1] = n end
  end
  return path
end

-- The kernel's next hop from `at` towards `dst`: via address and source.
local function next_hop(at, dst)
  local r = at:run({ "ip", "-o", "route", "get", dst.addr })
  H.check(r.status == 0, "ip route get %s in %s failed: %s", dst.addr, at.name, r.err)
  return r.out:match(" via ([%d%.]+)"), r.out:match(" src ([%d%.]+)"), r.out
end

-- First hop of every ordered pair.
t0 = hn.now()
local wrong = {}
H.map(pairs_list, 16, function(p)
  local a, b = p[1], p[2]
  local path = host_path(a, b)
  local via, src, out = next_hop(a, b)
  local expect = path[2].name
  if not via or owner[via] ~= expect or src ~= a.addr then
    wrong[#wrong + 1] = string.format("%s->%s: route says next %s (src %s), kernel: %s", a.name, b.name,
                                      expect, a.addr, out:gsub("%s+", " "))
  end
end)
H.log("first hops of %d pairs checked in %.2f s, %d wrong", #pairs_list, hn.now() - t0, #wrong)
H.check(#wrong == 0, "%d next hops disagree with net:route:\n%s", #wrong,
        table.concat(wrong, "\n", 1, math.min(#wrong, 8)))

-- Whole paths, hop by hop, for pairs across clouds, edges and the segment.
local walks = { { "t1", "t8" }, { "t8", "seghost-longname-c-0123456789ab" },
                { "seghost-longname-a", "t5" }, { "seghost-longname-a", "seghost-longname-b" },
                { "cloud2", "t2" }, { "t3", "t4" } }
for _, w in ipairs(walks) do
  local src, dst = net:find(w[1]), net:find(w[2])
  local path = host_path(src, dst)
  local names = {}
  for i, n in ipairs(path) do names[i] = n.name end
  for i = 1, #path - 1 do
    local via = next_hop(path[i], dst)
    H.check(owner[via] == path[i + 1].name, "path %s->%s (%s): hop %d at %s goes via %s (%s), expected %s",
            src.name, dst.name, table.concat(names, ","), i, path[i].name, tostring(via),
            tostring(owner[via]), path[i + 1].name)
  end
  H.log("path %s ok (%d hops)", table.concat(net:route(src, dst), ","), #path - 1)
end

-- link:down() cuts segment host a off; link:up() brings it (and its routes) back.
local a, far = seg[1], t.terminal[8]
seg_link[1]:down()
H.check(not H.ping_ok(a, far, 1), "%s still reaches %s with its link down", a.name, far.name)
H.check(not H.ping_ok(far, a, 1), "%s still reaches %s with its link down", far.name, a.name)
seg_link[1]:up()
local back = false
for _ = 1, 20 do
  if H.ping_ok(a, far, 1) and H.ping_ok(far, a, 1) then back = true break end
  hn.sleep(0.1)
end
H.check(back, "%s <-> %s does not ping after link:up()", a.name, far.name)
H.log("link down/up ok")

net:stop()
H.check(net:state() == "stopped", "network is %s after stop", net:state())
H.log("PASS connectivity (%s)", backend)
