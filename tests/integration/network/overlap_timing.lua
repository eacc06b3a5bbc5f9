-- overlap_timing: overlap = true shortens a step where communication and
-- compute are comparable. Two workers and a server on one switch, every
-- link 1 Gbit/s (backend user); the workers compute mobilenet_v2 by the
-- jetson-nano profile at batch 8 (0.25 s a step; its 13.4 MiB gradient
-- crosses a link in about 0.11 s), timing only. For ring all-reduce and
-- BSP ps, the mean step after the first, with 1 MiB buckets against none:
--   * overlapped below a share of plain: 0.85 for the ring (measured 0.67),
--     0.95 for ps (measured 0.84: its pull, the model sent back after the
--     step, overlaps nothing); the margins are for a loaded 2-core host;
--   * never below the compute alone (0.95 x the profile's time: what the
--     buckets hide is communication, not compute).
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local ex = require("hiernet.experiment")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local MODEL, PROFILE, BATCH, STEPS = "mobilenet_v2", "jetson-nano", 8, 4
local compute_s = assert(hn.profile_grad_seconds(PROFILE, MODEL, BATCH))
local LINK = { bw = "1Gbit", delay = "0.1ms" }

local runs = 0
local function step_seconds(prefix)
  local times = {}
  for _, r in ipairs(ex.read_csv(prefix .. "steps")) do
    if r.worker == "w1" then times[#times + 1] = r.time end
  end
  H.check(#times == STEPS, "%s: %d steps recorded, want %d", prefix, #times, STEPS)
  return (times[#times] - times[1]) / (#times - 1)
end

local function train(family, overlap)
  runs = runs + 1
  local net = hn.network{ name = "ovt" .. runs, backend = A.backend or "user", seed = 1 }
  local server = net:node("ps")
  local topo = require("hiernet.topo")
  local star = topo.star(net, { n = 2, center_name = "s", prefix = "w", link = LINK, node = { profile = PROFILE } })
  net:link(server, star.center, LINK)
  net:start()
  H.own(net)
  local prefix = "r" .. runs .. "_"
  local o = { workers = star.hosts, model = MODEL, compute = "profile", batch = BATCH, steps = STEPS,
              eval_every = STEPS + 1, progress = false, prefix = prefix,
              overlap = overlap or nil, bucket_mb = overlap and 1 or nil }
  if family == "ps" then
    o.server, o.mode = server, "bsp"
    ps.train(o)
  else
    o.algo = "ring"
    ar.train(o)
  end
  net:stop()
  return step_seconds(prefix)
end

local MAX_RATIO = { allreduce = 0.85, ps = 0.95 }
for _, family in ipairs{ "allreduce", "ps" } do
  local plain = train(family, false)
  local over = train(family, true)
  H.log("%s: step %.3f s plain, %.3f s with 1 MiB buckets (%.2f), compute %.3f s",
        family, plain, over, over / plain, compute_s)
  H.check(over <= MAX_RATIO[family] * plain, "%s: overlapped step %.3f s is not below %.2f x %.3f s",
          family, over, MAX_RATIO[family], plain)
  H.check(over >= 0.95 * compute_s, "%s: overlapped step %.3f s beat the compute alone (%.3f s)",
          family, over, compute_s)
end
