-- overlap: compute/communication overlap with gradient buckets (issue 21).
-- Two workers train a zoo model by profile (its compute the profile's,
-- its gradient its real size on the wire: docs/lua-api.md "Profiled
-- compute") with ring all-reduce over one switch, without overlap and with
-- overlap = true at three bucket sizes (PyTorch DDP's buckets, from the
-- last layer; docs/algorithms.md "Overlap"), on each link rate. Each step's
-- time is set against the bound of overlap,
--
--   bound = max(compute, communication) + the last bucket's transfer,
--
-- with compute the profile's forward+backward, communication a ring
-- all-reduce of the whole gradient and the last bucket's transfer one of
-- the last bucket (what is left to send once the backward pass ends), both
-- measured on the same network in the same run with nothing else running.
-- Two refinements keep it a bound: the last bucket is counted once and the
-- communication starts no sooner than the first bucket is ready (its share
-- of the compute, r1): bound = max(compute + last, r1 x compute +
-- communication). With many small buckets this is the formula above; with
-- a single bucket it is compute + communication, the step without overlap.
--
--   tools/run scenarios/overlap.lua [--set name=value ...]
--     model="resnet18"          a zoo model (quick: mobilenet_v2)
--     profile="jetson-nano"     the workers' device (an edge GPU)
--     batch=8                   samples per step
--     bws="1Gbit,100Mbit"       link rates, one run each
--     buckets="1,5,25"          bucket_mb of the overlapped runs (quick: "1,25":
--                               many buckets and one)
--     steps=5                   steps per run (quick: 3)
--     delay="0.1ms"             every link's delay
--     backend=user              user or kernel
--     quick=false               the reduced run of the test suite
--     plots=true                plots and the report page at the end
--
-- Each result row: bw, bucket_mb (0: no overlap), buckets, step_s (emulated
-- seconds per step, the steps after the first), compute_s, comm_s,
-- last_bucket_s, bound_s (without overlap: compute + communication), ratio
-- = step_s / bound_s and vs_plain = step_s / the step without overlap.
-- Expected: where the communication is below the compute (1 Gbit/s) small
-- buckets hide nearly all of it (a step near the compute alone, 0.6 to 0.7
-- of the step without overlap); where it dominates (100 Mbit/s) at most
-- the compute is hidden; one bucket is the step without overlap. Measured
-- figures, with the host's load: docs/cookbook.md "overlap".
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local ex = require("hiernet.experiment")
local topo = require("hiernet.topo")

local quick = hn.param("quick", false)
local model = hn.param("model", quick and "mobilenet_v2" or "resnet18")
local profile = hn.param("profile", "jetson-nano")
local batch = hn.param("batch", 8)
local bws = ex.list_param("bws", "1Gbit,100Mbit")
local bucket_sizes = ex.list_param("buckets", quick and "1,25" or "1,5,25")
local steps = hn.param("steps", quick and 3 or 5)
local delay = hn.param("delay", "0.1ms")
local backend = hn.param("backend", "user")
local N = 2

local zoo = assert(hn.zoo(model))
-- timing only (no learn): the gradient is the model's size, all virtual
local compute_s = assert(hn.profile_grad_seconds(profile, model, batch))
assert(backend == "user" or backend == "kernel",
       string.format("--set backend: '%s' (user or kernel: none emulates no link)", tostring(backend)))

-- The emulated seconds per step after the first (its set-up rides on it).
local function step_seconds(prefix)
  local times = {}
  for _, r in ipairs(ex.read_csv(prefix .. "steps")) do
    if r.worker == "w1" then times[#times + 1] = r.time end
  end
  return (times[#times] - times[1]) / (#times - 1)
end

-- Seconds of a ring all-reduce of `count` elements among the workers, on
-- this network and nothing else running: the median of 3 (the anchor of
-- the bound, measured in the same run).
local function allreduce_seconds(workers, count)
  for _, w in ipairs(workers) do w:tensor{ name = "probe", size = count, resident = 0 } end
  local ms = {}
  for k = 1, 3 do ms[k] = ar.allreduce{ peers = workers, tensor = "probe", algo = "ring" }.ms end
  for _, w in ipairs(workers) do w:drop{ name = "probe" } end
  table.sort(ms)
  return ms[2] / 1000
end

local runs = 0
-- One training; bucket_mb nil: no overlap. Its seconds per step.
local function train(workers, bucket_mb)
  runs = runs + 1
  local prefix = string.format("r%d_", runs)
  ar.train{ workers = workers, algo = "ring", model = model, compute = "profile",
            batch = batch, steps = steps, eval_every = steps + 1, progress = not quick,
            overlap = bucket_mb ~= nil or nil, bucket_mb = bucket_mb, prefix = prefix }
  return step_seconds(prefix)
end

-- The rows of one link rate: a star of N workers, the all-reduce anchors,
-- a training without overlap and one per bucket size.
local function rows_at(bw, results)
  local net = hn.network{ name = "overlap_" .. tostring(bw):gsub("[^%w]", ""), backend = backend, seed = 1 }
  local star = topo.star(net, { n = N, center_name = "sw", prefix = "w",
                                link = { bw = bw, delay = delay }, node = { profile = profile } })
  net:start()
  local workers = star.hosts
  local comm_s = allreduce_seconds(workers, zoo.params)
  local plain_s = train(workers)
  results[#results + 1] = { label = string.format("%s, no overlap", bw), bw = bw, bucket_mb = 0, buckets = 1,
                            step_s = plain_s, compute_s = compute_s, comm_s = comm_s,
                            bound_s = compute_s + comm_s, ratio = plain_s / (compute_s + comm_s), vs_plain = 1 }
  for _, mb in ipairs(bucket_sizes) do
    local b = assert(hn.grad_buckets(model, zoo.params, mb, profile))
    local last_s = #b > 1 and allreduce_seconds(workers, b[#b].count) or comm_s
    -- docs/algorithms.md "Overlap": the last bucket leaves after the
    -- compute, the first no sooner than its layers are done
    local bound = math.max(compute_s + last_s, b[1].ready_share * compute_s + comm_s)
    local step_s = train(workers, mb)
    results[#results + 1] = { label = string.format("%s, %g MiB buckets", bw, mb), bw = bw, bucket_mb = mb,
                              buckets = #b, step_s = step_s, compute_s = compute_s, comm_s = comm_s,
                              last_bucket_s = last_s, bound_s = bound, ratio = step_s / bound,
                              vs_plain = step_s / plain_s }
  end
  net:stop()
end

local results = {}
for _, bw in ipairs(bws) do rows_at(bw, results) end
ex.table(string.format("overlap: %s by %s, batch %d, ring all-reduce of %d workers", model, profile, batch, N),
         results, { "label", "buckets", "step_s", "compute_s", "comm_s", "last_bucket_s", "bound_s", "ratio",
                    "vs_plain" })
ex.finish{ scenario = "overlap", model = model, profile = profile, batch = batch, steps = steps, delay = delay,
           backend = backend, results = results }
