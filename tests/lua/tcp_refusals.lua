-- TCP settings (hn.network{tcp = ...}, node tcp) that cannot be applied are
-- refused in one line naming the network or node and the value: a
-- congestion control this kernel lacks, an rto_min finer than the kernel's
-- ms, a bad init_cwnd, an unknown key, tcp on a switch, and any tcp setting
-- on backend none, whose peers share the host's TCP stack. Needs nothing
-- but the binary (backend none).
local hn = require("hiernet")

local fails = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua").fails

local f = io.open("/proc/sys/net/ipv4/tcp_available_congestion_control")
local available = f and f:read("l") or ""
if f then f:close() end

fails("network 'n1': tcp cc 'no_such_cc' is not available in this kernel (it has: " .. available .. ")",
      hn.network, { name = "n1", backend = "none", tcp = { cc = "no_such_cc" } })
fails("network 'n2': tcp rto_min '500us': must be a whole number of ms",
      hn.network, { name = "n2", backend = "none", tcp = { rto_min = "500us" } })
fails("network 'n3': tcp: unknown option 'rto'", hn.network, { name = "n3", tcp = { rto = "1ms" } })
fails("network 'n4': option 'tcp' must be a table", hn.network, { name = "n4", tcp = "bbr" })

local net = hn.network{ name = "t", backend = "none" }
fails("node 'a': tcp init_cwnd 0: must be an integer from 1 to 1024", net.node, net, "a",
      { tcp = { init_cwnd = 0 } })
fails("node 'b': tcp init_cwnd 2.5: must be an integer", net.node, net, "b", { tcp = { init_cwnd = 2.5 } })
fails("node 'c': tcp ecn must be true or false", net.node, net, "c", { tcp = { ecn = "yes" } })
fails("node 'd': tcp rto_min: bad time \"1 parsec\"", net.node, net, "d", { tcp = { rto_min = "1 parsec" } })
fails("node 's': a switch has no TCP", net.switch, net, "s", { tcp = { ecn = true } })

-- Accepted in the model, refused at start: backend none cannot apply them.
local first = available:match("%S+") or "reno"
net:node("h1")
net:node("h2", { tcp = { cc = first, rto_min = "1ms", ecn = true, init_cwnd = 20 } })
fails("network 't': node 'h2' has tcp settings, which backend 'none' cannot apply", net.start, net)

-- A network without tcp settings still starts on backend none.
local ok = hn.network{ name = "plain", backend = "none" }
ok:node("p")
ok:start()
ok:stop()
