-- tcp_settings: hn.network{tcp = ...} and a node's own tcp reach the node's
-- namespace: the sysctl tcp_ecn read from inside the node, the route
-- metrics (congctl, rto_min locked, initcwnd) on the routes the backend
-- installed, a peer connection's RTO below the kernel's 200 ms
-- minimum (ss), and run.json's record of each node's settings; under
-- --dilation D, tcp_tso_rtt_log 9 + log2(D) in every host.
--
-- a - b, one 100 Mbit/s link. The network asks reno, rto_min 5ms, ecn,
-- init_cwnd 20; b overrides cc and rto_min (the rest is the network's).
-- Args: backend=kernel|user.
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local backend = A.backend or "user"

local f = io.open("/proc/sys/net/ipv4/tcp_available_congestion_control")
local available = f and f:read("l") or ""
if f then f:close() end
local function has(cc) return (" " .. available .. " "):find(" " .. cc .. " ", 1, true) end
if not (has("reno") and has("cubic")) then
  print("SKIP: this kernel lacks reno or cubic: " .. available)
  os.exit(77)
end

local net = hn.network{ name = "tcpset", backend = backend, seed = 3,
                        tcp = { cc = "reno", rto_min = "5ms", ecn = true, init_cwnd = 20 } }
local a = net:node("a")
local b = net:node("b", { tcp = { cc = "cubic", rto_min = "2ms" } })
net:link(a, b, { bw = "100Mbit" })
net:start()
H.own(net)

local function sysctl(n, key)
  local r = n:run({ "cat", "/proc/sys/net/ipv4/" .. key })
  H.check(r.status == 0, "node %s: cat %s: %s", n.name, key, r.err)
  return (r.out:gsub("%s+$", ""))
end
H.check(sysctl(a, "tcp_ecn") == "1" and sysctl(b, "tcp_ecn") == "1", "tcp_ecn: a %s, b %s",
        sysctl(a, "tcp_ecn"), sysctl(b, "tcp_ecn"))
-- Under dilation D the TSO sizing's RTT log is the kernel's 9 plus log2(D), rounded
-- (topo_tcp_tso_rtt_log); at D = 1 the kernel's own (kernels before 5.18 have none).
local rtt_log = io.open("/proc/sys/net/ipv4/tcp_tso_rtt_log")
if rtt_log then
  rtt_log:close()
  local d = net.dilation or 1
  local want = tostring(d > 1 and 9 + math.floor(math.log(d, 2) + 0.5) or 9)
  H.check(sysctl(a, "tcp_tso_rtt_log") == want and sysctl(b, "tcp_tso_rtt_log") == want,
          "tcp_tso_rtt_log at dilation %g: a %s, b %s, want %s", d, sysctl(a, "tcp_tso_rtt_log"),
          sysctl(b, "tcp_tso_rtt_log"), want)
end

-- Every static route carries the metrics: `ip route` prints "rto_min lock 5ms initcwnd 20 congctl reno"
-- (rto_min in real time: D times the emulated one).
local dil = net.dilation or 1
local function routes(n)
  local r = n:run({ "ip", "-4", "route", "show", "proto", "static" })
  H.check(r.status == 0 and r.out ~= "", "node %s: no static routes: %s", n.name, r.err)
  return r.out
end
for line in routes(a):gmatch("[^\n]+") do
  H.check(line:find(string.format("rto_min lock %gms", 5 * dil), 1, true) and line:find("initcwnd 20", 1, true) and
          line:find("congctl reno", 1, true),
          "a's route lacks the metrics: %s", line)
end
for line in routes(b):gmatch("[^\n]+") do
  H.check(line:find(string.format("rto_min lock %gms", 2 * dil), 1, true) and line:find("initcwnd 20", 1, true) and
          line:find("congctl cubic", 1, true),
          "b's route lacks the metrics: %s", line)
end

-- A peer connection uses them: after a send a -> b, ss in a shows reno and an RTO far below 200 ms.
a:tensor{ name = "x", size = 1 << 16, fill = 1 }
a:send{ tensor = "x", to = "b" }
-- ss comes with ip (iproute2), which the kernel backend needs: one that fails is a failure, not a skip.
local ss = a:run({ "ss", "-tin", "state", "established" })
H.check(ss.status == 0, "ss in a failed (%s): %s", tostring(ss.status), tostring(ss.err))
H.check(ss.out:find("reno", 1, true), "a's connection is not reno: %s", ss.out)
local rto = tonumber(ss.out:match("rto:([%d.]+)"))
H.check(rto and rto < 100 * dil, "a's connection's rto is %s ms, not near rto_min %g ms: %s", tostring(rto),
        5 * dil, ss.out)
H.log("a's connection: rto %s ms", rto)
net:stop()

-- run.json records what was in force, per node.
local rf = assert(io.open(hn.results_dir() .. "/run.json"))
local run = rf:read("a")
rf:close()
H.check(run:find('"name": "a"[^}]-"tcp": {"cc": "reno", "rto_min": "5ms", "ecn": true, "init_cwnd": 20}'),
        "run.json lacks a's tcp settings")
H.check(run:find('"name": "b"[^}]-"tcp": {"cc": "cubic", "rto_min": "2ms", "ecn": true, "init_cwnd": 20}'),
        "run.json lacks b's tcp settings")
