-- tools/bench/workloads' scenario: N workers and one parameter server train
-- a zoo model by profile (compute = "profile", timing only) with BSP for a
-- few steps, every link `bw`; prints one result row per run: the step time
-- Cp + Cu in emulated seconds, Cu per step against the α-β bound of the
-- server's link 2·N·S/B + RTT, and the peak resident memory of every peer
-- together (stats mem_peak_bytes) with the controller's own.
--   hiernet run tools/bench/workloads.lua [--set workers=32 --set model=vgg16
--     --set profile=rtx2080ti --set bw=10Gbit --set steps=2 --set batch=32
--     --set delay_ms=0.05 --set backend=auto --set dilation=auto]
-- dilation "auto" (the default) lets the run's probe choose D from its
-- first seconds (the data plane's samples: a 10 or 100 Gbit/s incast is
-- more than a small host forwards in real time) and start again at it.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ex = require("hiernet.experiment")

local n = hn.param("workers", 32)
local model = hn.param("model", "vgg16")
local profile = hn.param("profile", "rtx2080ti")
local bw = hn.param("bw", "10Gbit")
local steps = hn.param("steps", 2)
local batch = hn.param("batch", 32)
local delay_ms = hn.param("delay_ms", 0.05)
local dilation = hn.param("dilation", "auto")
dilation = tonumber(dilation) or dilation

-- The controller's peak RSS (its own /proc entry), bytes.
local function controller_peak()
  local f = io.open("/proc/self/status", "r")
  if not f then return 0 end
  local kib = f:read("a"):match("VmHWM:%s*(%d+) kB")
  f:close()
  return (tonumber(kib) or 0) * 1024
end

local backend = ex.backend()
local net = hn.network{ name = "workloads", backend = backend, seed = 1, dilation = dilation }
local tor, server = net:switch("tor"), net:node("ps", { tier = "cloud" })
local uplink = net:link(server, tor, { bw = bw, delay = delay_ms .. "ms" })
local workers = {}
for i = 1, n do
  workers[i] = net:node("w" .. i, { profile = profile })
  net:link(workers[i], tor, { bw = bw, delay = delay_ms .. "ms" })
end
net:start()
local s = ps.train{ server = server, workers = workers, mode = "bsp", model = model, compute = "profile",
                    dataset = { name = "synthetic", n = 64 * n, dim = 784, classes = 10, test_n = 100 },
                    batch = batch, steps = steps, worker_opt = { lr = 0.1 }, progress = false }
local peak = controller_peak()
for _, node in ipairs{ server, table.unpack(workers) } do peak = peak + node:stats().mem_peak_bytes end
-- Cp: the profile's grad time, what every worker's compute_ms says.
local cp, rows = 0, 0
for _, r in ipairs(ex.read_csv("steps")) do cp, rows = cp + r.compute_ms / 1000, rows + 1 end
cp = rows > 0 and cp / rows or 0
local size = server:norm{ x = "w" }.size * 4 -- bytes of one model (float32)
net:stop()
local step = s.steps > 0 and s.wall_s / s.steps or nil
local link_bw = uplink:params().bw
local rtt = 4 * delay_ms / 1000 -- worker - switch - server and back
local bound = 2 * n * size * 8 / link_bw + rtt
local cu = step and step - cp
local ov = s.overload or {}
local row = { workers = n, model = model, profile = profile, bw = bw, backend = backend, dilation = net.dilation,
              steps = s.steps, step_s = step, cp_s = cp, cu_s = cu, bound_s = bound,
              ratio = cu and cu / bound, model_bytes = size, peak_rss_bytes = peak, host_cpu = ov.host_cpu_saturation,
              limited = ov.limited or (ov.dataplane or {}).limited or false, learning = s.learning, virtual_skipped_elements = s.virtual_skipped_elements }
ex.table(string.format("workloads: %d workers, BSP %s by profile %s, %s", n, model, profile, bw), { row },
         { "step_s", "cp_s", "cu_s", "bound_s", "ratio", "peak_rss_bytes", "host_cpu", "limited" })
ex.finish{ scenario = "workloads", results = { row } }
