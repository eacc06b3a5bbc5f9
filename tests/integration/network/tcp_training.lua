-- tcp_training: a many-to-one training's TCP account in summary.json. Eight
-- workers push to one parameter server through a switch whose port to the
-- server queues 4 packets (10 Mbit/s, backend user): the pushes converge,
-- the queue drops, TCP retransmits. Then summary.json's tcp must hold every
-- counter, each at most what net:tcp() grew by around the whole training
-- (setup and final evaluation included), retransmissions, and the link
-- whose queue dropped most: ps-s (the pushes converge on s -> ps, the
-- server's eight sends leave by ps -> s; either direction may drop more). The RTO
-- warning is logged exactly when the account says the steps were RTO-bound.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local net = hn.network{ name = "tcptr", backend = A.backend or "user", seed = 5 }
local server, _, workers = H.star(net, 8, { bw = "10Mbit", queue = "4" }, { bw = "10Mbit" })
net:start()
H.own(net)

local keys = { "retrans", "rtos", "fast_retrans", "lost_retrans", "recoveries" }
local function total(c)
  local t = {}
  for _, k in ipairs(keys) do
    t[k] = 0
    for _, node in pairs(c) do t[k] = t[k] + node[k] end
  end
  return t
end
local before = total(net:tcp())
local s = ps.train{ server = server, workers = workers, mode = "bsp", model = "mlp:64-256-10",
                    dataset = { name = "synthetic", n = 800, dim = 64, classes = 10, noise = 0.4, test_n = 100 },
                    batch = 16, steps = 3, worker_opt = { method = "sgd", lr = 0.1 }, eval_limit = 50,
                    progress = false }
local after = total(net:tcp())
net:stop()

H.check(s.tcp, "summary has no tcp account")
for _, k in ipairs(keys) do
  local grew = after[k] - before[k]
  H.check(type(s.tcp[k]) == "number" and s.tcp[k] >= 0 and s.tcp[k] <= grew,
          "tcp.%s = %s, the counters grew %d around the training", k, tostring(s.tcp[k]), grew)
end
H.check(s.tcp.retrans > 0, "no retransmission through a 4-packet queue from 8 senders")
H.check(s.tcp.queue_link == "ps-s" and s.tcp.queue_drops > 0,
        "worst queue: %s %s %s", tostring(s.tcp.queue_link), tostring(s.tcp.queue_dir), tostring(s.tcp.queue_drops))
local bound = s.tcp.rtos > 0 and s.tcp.rto_step_share >= 0.2
H.check((s.tcp.warning ~= nil) == bound, "warning %s, but rtos %d and rto_step_share %.2f",
        tostring(s.tcp.warning), s.tcp.rtos, s.tcp.rto_step_share)
local f = assert(io.open(hn.results_dir() .. "/summary.json"))
local json = f:read("a")
f:close()
H.check(json:find('"tcp"', 1, true) and json:find('"rto_step_share"', 1, true), "summary.json lacks tcp")
H.log("tcp: retrans %d, rtos %d, RTO steps %.0f%%, %s dropped %d", s.tcp.retrans, s.tcp.rtos,
      100 * s.tcp.rto_step_share, s.tcp.queue_link, s.tcp.queue_drops)
local o = hn.overload()
H.log("overload: %d of %d compute commands overran, %d starved; limited %s, waited %s, suggested dilation %g",
      o.overruns, o.commands, o.starved, tostring(o.limited), tostring(o.waited), o.suggested_dilation)

-- The report page shows the account in the training's summary row.
local page = hn.report{ format = "png" }
local pf = assert(io.open(page))
local html = pf:read("a")
pf:close()
H.check(html:find(string.format("%d RTOs, %d retrans, ", s.tcp.rtos, s.tcp.retrans), 1, true),
        "the report page lacks the TCP account")
