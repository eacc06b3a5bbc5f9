-- traffic_training: background traffic and a training's accounting. A
-- parameter server ps behind a 10 Mbit/s port of switch s, two workers and a
-- traffic host bg on 100 Mbit/s ports (backend user). The same BSP training
-- (same seed, same steps) runs twice: alone, then with constant UDP at
-- 8 Mbit/s from bg to ps on the server's port (the workers' pushes' way).
-- Then:
--   the loaded training takes longer (its wall_s at least 1.3 times the
--     plain one's: a fifth of the port is left to the pushes);
--   its bytes are the plain one's exactly: the summary's bytes and each
--     step's bytes in steps.csv; bg's data plane (stats() bytes_sent,
--     bytes_received) counted none of the traffic it sent;
--   the background bytes are counted apart: the UDP flow's own counters,
--     the loaded summary's `background` (both flows; the plain one has
--     none), traffic.csv;
--   a second flow (poisson, bg -> w1) never stopped by hand is stopped by
--     net:stop(), which writes its traffic.csv row.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local net = hn.network{ name = "trtrain", backend = A.backend or "user", seed = 4 }
local server, _, workers = H.star(net, 2, { bw = "10Mbit" }, { bw = "100Mbit" })
local bg = net:node("bg")
net:link(bg, net:find("s"), { bw = "100Mbit" })
net:start()
H.own(net)

local function train(label, steps)
  return ps.train{ server = server, workers = workers, mode = "bsp", model = "mlp:64-256-10",
                   dataset = { name = "synthetic", n = 800, dim = 64, classes = 10, noise = 0.4, test_n = 100 },
                   batch = 16, steps = steps or 6, seed = 11, worker_opt = { method = "sgd", lr = 0.1 },
                   eval_limit = 50, progress = false, label = label,
                   prefix = label .. "_" }
end

local plain = train("plain")
local side = net:traffic{ from = bg, to = workers[1], pattern = "poisson", rate = "1Mbit", seed = 2 }
local load = net:traffic{ from = bg, to = server, rate = "8Mbit" }
local loaded = train("loaded")
local l = load:stop()
H.log("plain %.2f s, loaded %.2f s; %d bytes each; background %d bytes sent, %d received (%d lost)",
      plain.wall_s, loaded.wall_s, plain.bytes, l.sent_bytes, l.received_bytes, l.lost)
H.check(loaded.wall_s >= 1.3 * plain.wall_s, "with 8 of the port's 10 Mbit/s taken the training took %.2f s, alone %.2f s",
        loaded.wall_s, plain.wall_s)
H.check(loaded.bytes == plain.bytes and plain.bytes > 0, "summary bytes %d with traffic, %d without",
        loaded.bytes, plain.bytes)
-- The summary counts the background apart: both flows ran in the loaded
-- training and none in the plain one.
H.check(plain.background == nil, "the plain training has a background: %s", tostring(plain.background))
local bgsum = loaded.background
H.check(bgsum and bgsum.flows == 2 and bgsum.sent_bytes >= l.sent_bytes * 0.8 and bgsum.sent_bytes <= l.sent_bytes
        + side:stats().sent_bytes, "loaded summary's background: %s", bgsum and
        ("%d flows, %d bytes sent"):format(bgsum.flows, bgsum.sent_bytes) or "none")
-- The flows' bytes never reach the data plane's counters: bg sent only
-- background traffic, and its data plane counted nothing.
local bgs = bg:stats()
H.check(bgs.bytes_sent == 0 and bgs.bytes_received == 0 and bgs.transfers_sent == 0,
        "bg's data plane counted %d bytes sent, %d received", bgs.bytes_sent, bgs.bytes_received)
H.check(l.received_bytes > 0 and l.sent_bytes >= l.received_bytes, "the background flow: %d sent, %d received",
        l.sent_bytes, l.received_bytes)
net:stop()
H.check(side:stats().sent_bytes > 0, "the poisson flow sent nothing")

-- steps.csv: each worker's step the same bytes in both trainings.
local function step_bytes(label)
  local t, n = {}, 0
  for _, row in ipairs(require("hiernet.experiment").read_csv(label .. "_steps")) do
    t[row.worker .. "/" .. row.step], n = row.bytes, n + 1
  end
  return t, n
end
local plain_steps, n_plain = step_bytes("plain")
local loaded_steps, n_loaded = step_bytes("loaded")
H.check(n_plain > 0 and n_plain == n_loaded, "steps.csv: %d plain rows, %d loaded", n_plain, n_loaded)
for key, b in pairs(plain_steps) do
  H.check(loaded_steps[key] == b, "steps.csv %s: %s bytes loaded, %s plain", key, tostring(loaded_steps[key]), b)
end

local rows = require("hiernet.experiment").read_csv("traffic")
H.check(#rows == 2 and rows[1].name == load.name and rows[1].received_bytes == l.received_bytes
        and rows[2].name == side.name and rows[2].pattern == "poisson",
        "traffic.csv: %d rows, not the explicit stop then the one net:stop() made", #rows)
