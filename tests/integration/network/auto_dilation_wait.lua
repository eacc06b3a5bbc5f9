-- auto_dilation_wait: a many-to-one run that waits on the network and
-- leaves the CPU idle is not CPU-limited, and dilation = "auto" keeps it
-- at 1. Eight workers push to one parameter server through a switch whose
-- port to the server runs at 10 Mbit/s with a 4-packet queue (backend user):
-- the pushes converge, the queue drops, the steps wait on TCP. Every node
-- computes at a fifth of this host's speed on a small model (a few ms of
-- CPU a step against steps of tenths of a second), so the host keeps up.
-- Checked: the probe chose 1 ("the host keeps up" in run.json's reason),
-- the overload verdict is not CPU-limited and suggests no dilation, and
-- when its overruns pass 5% they are called waits (the note, no warning).
-- 4 steps (steps=N to change): the probe's 40 commands after each node's
-- first 3 closed within 3 steps here (7 s at load 5); a run that ends
-- inside the probe fails the test rather than passing on no judgement.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local net = hn.network{ name = "autowait", backend = A.backend or "user", seed = 3, dilation = "auto" }
local server, sw = net:node("ps", { speed = 0.2 }), net:switch("s")
net:link(server, sw, { bw = "10Mbit", queue = "4" })
local workers = {}
for i = 1, 8 do
  workers[i] = net:node("w" .. i, { speed = 0.2 })
  net:link(workers[i], sw, { bw = "10Mbit" })
end
net:start()
H.own(net)
ps.train{ server = server, workers = workers, mode = "bsp", model = "mlp:64-256-10",
          dataset = { name = "synthetic", n = 800, dim = 64, classes = 10, noise = 0.4, test_n = 100 },
          batch = 16, steps = tonumber(A.steps or 4), worker_opt = { method = "sgd", lr = 0.1 }, eval_limit = 50,
          progress = false }
net:stop()

local f = assert(io.open(hn.results_dir() .. "/run.json"))
local json = f:read("a")
f:close()
local choice = json:match('"dilation": %b{}') or "missing"
local o = hn.overload()
H.log("run.json: %s", choice)
H.log("overload: %d of %d compute commands overran, %d starved; limited %s, waited %s, suggested %g, host %.0f%%",
      o.overruns, o.commands, o.starved, tostring(o.limited), tostring(o.waited), o.suggested_dilation,
      100 * o.host_cpu_saturation)
H.check(net.dilation == 1, "auto chose dilation %g for a run that waits on the network: %s", net.dilation,
        choice)
H.check(o.limited == false and o.suggested_dilation == 1,
        "verdict: limited %s, suggested dilation %g", tostring(o.limited), o.suggested_dilation)
H.check((o.waited or o.latency) == (o.overrun_share > 0.05), "waited %s, latency %s with %.1f%% overruns",
        tostring(o.waited), tostring(o.latency), 100 * o.overrun_share)
H.check(json:find('"dilation": {"mode": "auto", "value": 1, "reason": "', 1, true)
        and (json:find("the host keeps up", 1, true) or json:find("others' load", 1, true))
        and not json:find("the run ended inside the probe", 1, true),
        "run.json's dilation: %s", choice)
