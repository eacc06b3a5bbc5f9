-- privileges.lua — a run whose peers and linkd must have given up root:
-- h1 loads Fashion-MNIST (Debian's gzip files under /usr/share, decompressed
-- into a fresh cache the controller hands over) and evaluates a model on it, h2 sends
-- a tensor to h3, and h1 runs a program (which keeps the controller's uid).
-- Then it lists its peers and program and waits for privileges.sh to look
-- at them (args: backend=, ready=FILE, go=FILE, plus lib.sh's owned/regdir).
local hn = require("hiernet")
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "common.lua")
local a = H.args(...)

local net = hn.network{ name = "priv", backend = a.backend }
local h1 = net:node("pv1", { cpu = a.backend ~= "none" and 0.5 or nil })
local h2, h3 = net:node("pv2"), net:node("pv3")
if a.backend ~= "none" then
  net:link(h1, h2, { bw = "100Mbit" })
  net:link(h2, h3, { bw = "100Mbit" })
end
net:start()
if a.backend ~= "none" then H.own(net, { unique = true }) end

local d = h1:dataset{ name = "fashion-mnist", split = "test", shards = 4, shard = 1 }
H.check(d.samples == 2500, "fashion-mnist shard: %s samples", tostring(d.samples))
h1:model{ name = "m", arch = "logreg:784-10" }
H.check(h1:eval{ model = "m", limit = 200 }.samples == 200, "an evaluation on a dataset read after the drop")
h2:tensor{ name = "t", size = 1000, fill = 2 }
H.check(h2:send{ tensor = "t", to = h3 }.bytes == 4000, "send h2 -> h3")
H.check(math.abs(h3:norm{ x = "t" }.value - math.sqrt(4000)) < 1e-3, "h3 holds what h2 sent")
local prog = h1:spawn({ "sleep", "60" })
H.own_proc(prog, "sleep in pv1")

local f = assert(io.open(a.ready, "w"))
for _, n in ipairs({ h1, h2, h3 }) do f:write("peer ", n:stats().pid, " ", n.name, "\n") end
f:write("program ", prog.pid, "\n")
f:close()
for _ = 1, 300 do
  local go = io.open(a.go)
  if go then go:close() break end
  hn.sleep(0.1)
end
prog:kill()
prog:wait()
net:stop()
