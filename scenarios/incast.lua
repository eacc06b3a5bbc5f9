-- incast: TCP incast at a parameter server (issue 24). N workers and one
-- server on one switch, every link 10 Gbit/s with 0.05 ms delay, BSP
-- training of mlp:784-128-10 (101,770 parameters: 407 KB per message) for a
-- fixed number of steps; each step every worker pushes its gradient to the
-- server and the server sends the model back, so N flows converge on the
-- server's one link. The α-β bound of a step is 2·N·S/B (S the message, B
-- the link rate; the 0.2 ms of a round trip is left out): 42 ms at N = 64.
-- The variants:
--
--   default   the link queues as they are (docs/lua-api.md "queue": at
--             10 Gbit/s 2 ms at the rate, 2.5 MB)
--   bdp       queue = "bdp": the link's own bandwidth-delay product
--             (10 Gbit/s x 0.1 ms = 125 KB), a shallow switch port
--   queue     queue = 10000 packets on every link: no queue overflows
--   rto_min   tcp = { rto_min = "1ms" }: a loss costs 1 ms, not Linux's 200 ms
--   ecn       ecn_threshold = 65 packets (DCTCP's marking threshold for
--             10 Gbit/s ports) with tcp = { ecn = true, cc = "cubic" }
--             (BBR ignores marks); backend user only
--
--   tools/run scenarios/incast.lua [--set name=value ...]
--     workers="8,16,32,64"   N of each run (quick: "4,8")
--     variants="default,bdp,queue,rto_min,ecn"
--     steps=20               BSP steps per run (quick: 3)
--     bw="10Gbit"            every link's rate
--     delay="0.05ms"         every link's delay
--     backend=user           user or kernel (none has no TCP of its own;
--                            kernel has no ecn variant and counts no queue drops)
--     plots=true             plots and the report page at the end
--
-- Measured figures: docs/cookbook.md "incast". Each result row: workers,
-- variant, step_s (emulated seconds per step), bound_s, ratio (step_s /
-- bound_s), rtos and retrans (the training's TCP account), rto_step_share
-- (worker steps that waited at least one minimum RTO), queue_drops and
-- marked (the server port's queue, s -> ps), host_cpu (the host's busy
-- share over the run so far) and limited / waited (the overload verdict:
-- CPU-starved, or late while waiting).
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")
local topo = require("hiernet.topo")

local quick = hn.param("quick", false)
local steps = hn.param("steps", quick and 3 or 20)
local bw = hn.param("bw", "10Gbit")
local delay = hn.param("delay", "0.05ms")
local ARCH = "mlp:784-128-10"
local PARAMS = assert(hn.model_check(ARCH))

local sizes = ex.list_param("workers", quick and "4,8" or "8,16,32,64")
local variants = ex.list_param("variants", "default,bdp,queue,rto_min,ecn")
local backend = hn.param("backend", "user")

-- DCTCP (Alizadeh et al., SIGCOMM 2010) marks above 65 packets on 10 Gbit/s ports.
local DCTCP_K_10G = 65
local VARIANTS = {
  default = { link = {}, tcp = nil },
  bdp = { link = { queue = "bdp" }, tcp = nil },
  queue = { link = { queue = 10000 }, tcp = nil },
  rto_min = { link = {}, tcp = { rto_min = "1ms" } },
  ecn = { link = { ecn_threshold = DCTCP_K_10G }, tcp = { ecn = true, cc = "cubic" }, linkd = true },
}

-- Checked before any network starts: a bad name costs nothing.
assert(backend == "user" or backend == "kernel",
       string.format("--set backend: '%s' (user or kernel: none has no TCP of its own)", tostring(backend)))
for _, v in ipairs(variants) do
  if not VARIANTS[v] then
    error(string.format("--set variants: unknown variant '%s' (default, bdp, queue, rto_min, ecn)", tostring(v)))
  end
  if VARIANTS[v].linkd and backend ~= "user" then
    error(string.format("--set variants: variant '%s' needs backend user (the kernel's qdiscs do not mark)", v))
  end
end

-- The server port's marks and queue drops (s -> ps: the link's b -> a);
-- nil on the kernel backend, whose links have no such counters.
local function server_port(l)
  if backend ~= "user" then return nil end
  local ba = l:stats().ba
  return ba.marked, ba.drops_queue
end

-- One BSP training of n workers under variant v: its result row.
local function run(n, v)
  local spec = VARIANTS[v]
  local net = hn.network{ name = string.format("incast%d_%s", n, v), backend = backend, seed = 1, tcp = spec.tcp }
  local server = net:node("ps")
  local link = { bw = bw, delay = delay }
  for k, x in pairs(spec.link) do link[k] = x end
  local star = topo.star(net, { n = n, center_name = "tor", prefix = "w", link = link })
  local workers = star.hosts
  -- the server's link, whose rate (bit/s, as the link parsed it) bounds a step
  local uplink = net:link(server, star.center, link)
  net:start()
  local marks_before, drops_before = server_port(uplink)
  local s = ps.train{ server = server, workers = workers, mode = "bsp", model = ARCH,
                      dataset = { name = "synthetic", n = 64 * n, dim = 784, classes = 10, noise = 0.4, test_n = 200 },
                      batch = 32, steps = steps, worker_opt = { method = "sgd", lr = 0.1 }, eval_limit = 100,
                      eval_every = steps + 1, progress = not quick,
                      prefix = string.format("n%d_%s_", n, v) }
  local marks_after, drops_after = server_port(uplink)
  net:stop()
  local bound = 2 * n * PARAMS * 4 * 8 / uplink:params().bw
  local step = s.steps > 0 and s.wall_s / s.steps or nil
  local tcp, ov = s.tcp or {}, s.overload or {}
  return ex.row(string.format("%d workers, %s", n, v), s, {
    workers = n, variant = v, step_s = step, bound_s = bound, ratio = step and step / bound,
    rtos = tcp.rtos, retrans = tcp.retrans, rto_step_share = tcp.rto_step_share,
    queue_drops = drops_after and drops_after - drops_before, marked = marks_after and marks_after - marks_before,
    host_cpu = ov.host_cpu_saturation, limited = ov.limited, waited = ov.waited })
end

local results = {}
for _, n in ipairs(sizes) do
  for _, v in ipairs(variants) do results[#results + 1] = run(n, v) end
end
ex.table(string.format("incast: BSP %s, %d steps, every link %s, %s", ARCH, steps, bw, delay), results,
         { "label", "step_s", "bound_s", "ratio", "rtos", "retrans", "rto_step_share", "queue_drops", "marked",
           "host_cpu", "limited", "waited" })
-- The figure (hiernet plot's step_vs_bound): per variant, step / bound by N.
local bound_bars = {}
for _, v in ipairs(variants) do
  local points = {}
  for _, r in ipairs(results) do
    if r.variant == v and r.ratio then points[#points + 1] = { r.workers, r.ratio } end
  end
  bound_bars[#bound_bars + 1] = { label = v, points = points }
end
ex.finish{ scenario = "incast", steps = steps, bw = bw, delay = delay, backend = backend, results = results,
           bound_bars = bound_bars }
