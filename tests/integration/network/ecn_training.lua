-- ecn_training: ECN marking in a many-to-one training (issue 24, item 4).
-- Eight workers push to one parameter server through a switch whose port to
-- the server (10 Mbit/s, backend user) queues 64 packets and marks CE above
-- 8; every node runs tcp = { ecn = true, cc = "cubic" }. The pushes
-- converge on s -> ps: that direction must mark (l:stats() and links.csv's
-- marked column agree on it), l:params() reports the threshold, and
-- l:set{} changes it. A kernel network asking for ecn_threshold is refused
-- at net:start() in one line (this kernel has no marking qdisc, or hiernet
-- does not install one yet), and so is l:set{ ecn_threshold } on one.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
H.args(...)

local kernel = hn.network{ name = "ecnk", backend = "kernel" }
kernel:link(kernel:node("a"), kernel:node("b"), { bw = "10Mbit", ecn_threshold = 8 })
local ok, err = pcall(kernel.start, kernel)
H.check(not ok and (tostring(err):find("cannot mark ECN here", 1, true)
                    or tostring(err):find("does not install sch_red yet", 1, true)),
        "kernel backend with ecn_threshold: %s", tostring(err))
-- ... and so is a threshold set on a running kernel network's link.
local kernel2 = hn.network{ name = "ecnk2", backend = "kernel" }
local kl = kernel2:link(kernel2:node("a"), kernel2:node("b"), { bw = "10Mbit" })
kernel2:start()
H.own(kernel2)
ok, err = pcall(kl.set, kl, { ecn_threshold = 8 })
H.check(not ok and tostring(err):find("ecn_threshold needs backend 'user'", 1, true),
        "kernel l:set{ecn_threshold}: %s", tostring(err))
kernel2:stop()

local net = hn.network{ name = "ecntr", backend = "user", seed = 5, tcp = { ecn = true, cc = "cubic" } }
local server, port, workers = H.star(net, 8, { bw = "10Mbit", queue = 64, ecn_threshold = 8 }, { bw = "10Mbit" })
net:start()
H.own(net)
H.check(port:params().ecn_threshold == 8, "params: ecn_threshold %s", tostring(port:params().ecn_threshold))
ps.train{ server = server, workers = workers, mode = "bsp", model = "mlp:64-256-10",
          dataset = { name = "synthetic", n = 800, dim = 64, classes = 10, noise = 0.4, test_n = 100 },
          batch = 16, steps = 3, worker_opt = { method = "sgd", lr = 0.1 }, eval_limit = 50,
          progress = false }
local marked = port:stats().ba.marked -- ba: what s sends to ps
H.check(marked > 0, "s -> ps marked %d packets with eight ECN senders converging", marked)
port:set{ ecn_threshold = "32KB" }
local p = port:params()
H.check(p.ecn_threshold == nil and p.ecn_threshold_bytes == 32000, "after set: %s / %s",
        tostring(p.ecn_threshold), tostring(p.ecn_threshold_bytes))
net:stop()

-- links.csv's rows of s -> ps are samples taken while the network ran: the
-- last one counts marks, at most what l:stats() gave after the training.
local last
for line in io.lines(hn.results_dir() .. "/links.csv") do
  local cells = {}
  for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = c end
  if cells[3] == "ps-s" and cells[4] == "ba" then last = tonumber(cells[15]) end
end
H.check(last and last > 0 and last <= marked, "links.csv marked for ps-s ba: %s, stats gave %d", tostring(last), marked)
H.log("s -> ps marked %d packets", marked)
