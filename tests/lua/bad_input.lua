-- Misuse of networks, nodes and commands raises errors that name the
-- network, node, command and value at fault.
local hn = require("hiernet")

local fails = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua").fails

local net = hn.network{ name = "bad", backend = "none" }
local a = net:node("a", { tier = "edge" })
fails("duplicate node 'a'", net.node, net, "a")
fails("node name 'no space' is invalid", net.node, net, "no space")
fails("unknown option 'cpus'", net.node, net, "c", { cpus = 2 })
fails("speed must be > 0", net.node, net, "d", { speed = 0 })
fails("unknown backend 'fast'", hn.network, { name = "n2", backend = "fast" })
fails("unknown option 'nodes'", hn.network, { nodes = 3 })
fails("network 'bad' is not started", a.ping, a)

net:start()
assert(a.addr:match("^127%.%d+%.%d+%.%d+$"), "none backend gives a loopback address: " .. tostring(a.addr))
fails("cannot add node 'late'", net.node, net, "late")
fails("node 'a': tensor: param 'size'", a.tensor, a, { name = "t", size = "big" })
fails("node 'a' has no field or command 'nosuch'", function() return a:nosuch() end)
fails("node 'a': axpy", a.axpy, a, { y = "missing", x = "missing" })
fails("node 'a': read", a.read, a, { tensor = "missing" })
fails("a function cannot be sent", a.tensor, a, { name = "t", size = 1, fill = print })
a:tensor{ name = "t", size = 4 }
fails("out of bounds", a.read, a, { tensor = "t", range = { 3, 2 } })
-- Destinations are checked in the controller, naming the network's hosts.
fails("node 'a': send: param 'to': 'zz' is not a node of network 'bad' (its hosts: a",
      a.send, a, { tensor = "t", to = "zz" })
fails("node 'a': batch: command 1 (send): param 'to': 'q' is not a node of network 'bad'",
      a.batch, a, { { "send", { tensor = "t", to = "q" } } })
fails("node 'a': wait: param 'from': 'nope' is not a node", a.wait, a, { tensor = "t", from = "nope" })
local other = hn.network{ name = "other", backend = "none" }
local o = other:node("o")
other:start()
fails("node 'a': send: param 'to': node 'o' belongs to network 'other', not 'bad'",
      a.send, a, { tensor = "t", to = o })
other:stop()
-- The peer lives on after every error above.
assert(a:ping().ms >= 0)
net:stop()
fails("network 'bad' is stopped", a.ping, a)
net:stop() -- stopping twice is fine
