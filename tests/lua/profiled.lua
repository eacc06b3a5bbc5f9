-- Profiled compute, virtual tensors and the surrogate learner
-- (docs/lua-api.md "Profiled compute"), checked exactly where the answer is
-- known:
--   * a virtual tensor sent between two peers arrives with its size and
--     version, its resident prefix bit for bit and the pattern (zero)
--     beyond it; an add into a virtual tensor is exact on the prefix and
--     counts size - resident skipped elements, and so does an axpy; a
--     pass over a virtual tensor on a profiled node takes the profile's
--     memory-bound time (profile_add_seconds);
--   * a profiled grad takes the profile's time (a measured step of the
--     made-up test profile: 0.5 s at batch 100) / speed, asleep: its CPU
--     time stays small;
--   * a surrogate BSP training (ps, allreduce, hier; sums of two) ends with the
--     surrogate's parameters equal, bit for bit, to a plain training of the
--     surrogate model; a timing-only run says so and evaluates nothing;
--   * decentral by profile: D-PSGD (lockstep) with a surrogate equals the
--     plain run bit for bit; EASGD (asynchronous: the centre takes the
--     workers' exchanges in the order their compute times set) equals, bit
--     for bit, the surrogate's own model trained by profile with every
--     element resident under the same timing, and its grads take the
--     profile's time / speed; gossip (push-sum) and compression by profile
--     are refused with their line;
--   * adaptive-k (its BB trial model) trains by profile with a surrogate;
--   * the errors: a bad profile at net:node, compute = "profile" on a node
--     without one, a zoo model without compute = "profile", learn alone.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local dc = require("hiernet.algo.decentral")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local PROFILE = dir .. "data/round.profile"

-- ---- errors at the node and the train call ----
local bad = hn.network{ name = "bad", backend = "none" }
T.fails("node 'x': profile 'no-such-device'", bad.node, bad, "x", { profile = "no-such-device" })

local net = hn.network{ name = "profiled", backend = "none" }
local hub = net:node("hub", { tier = "cloud" })
local a = net:node("a", { profile = PROFILE })
local b = net:node("b", { profile = PROFILE, speed = 2 })
local plain = net:node("plain")
for _, n in ipairs{ a, b, plain } do net:link(hub, n) end
net:start()
T.eq(a.profile, PROFILE, "a node's profile")

-- ---- virtual tensors ----
local SIZE, RESIDENT = 100000, 10
local function skipped(n) return n:stats().virtual_skipped_elements end
a:tensor{ name = "v", size = SIZE, resident = RESIDENT, fill = "uniform", seed = 3 }
local sent = a:read{ tensor = "v", range = { 0, RESIDENT } }.values
local va = a:norm{ x = "v" }.version
a:send{ tensor = "v", to = b }
local got = b:norm{ x = "v" }
T.eq(got.size, SIZE, "virtual tensor's size after the send")
T.eq(got.version, va, "virtual tensor's version after the send")
local prefix = b:read{ tensor = "v", range = { 0, RESIDENT } }.values
for i = 1, RESIDENT do T.eq(prefix[i], sent[i], "resident element " .. (i - 1)) end
for _, x in ipairs(b:read{ tensor = "v", range = { SIZE - 5, 5 } }.values) do T.eq(x, 0, "pattern element") end

b:tensor{ name = "acc", size = SIZE, resident = RESIDENT, fill = 1 }
local before = skipped(b)
a:send{ tensor = "v", to = b, as = "acc", add = true }
T.eq(skipped(b) - before, SIZE - RESIDENT, "elements skipped by one add")
local summed = b:read{ tensor = "acc", range = { 0, RESIDENT } }.values
-- float32 addition: the exact sum rounded to float32
local function f32(x) return (string.unpack("f", string.pack("f", x))) end
for i = 1, RESIDENT do T.eq(summed[i], f32(sent[i] + 1), "added element " .. (i - 1)) end
before = skipped(b)
b:axpy{ y = "acc", x = "v", alpha = 2 }
T.eq(skipped(b) - before, SIZE - RESIDENT, "elements skipped by one axpy")
T.le(b:stats().mem_rss_bytes, 200e6, "peer memory with two virtual tensors of 100000 elements")

-- A pass over a virtual tensor on a profiled node takes the profile's
-- memory-bound time for the whole (12 bytes an element at its bandwidth,
-- 1e10 B/s: 1e8 elements 120 ms), as a server's aggregation would.
a:tensor{ name = "big", size = 100000000, resident = 0 }
local pass = a:scale{ x = "big", alpha = 2 }
if not (pass.ms >= 120 * 0.98 and pass.ms <= 120 * 1.5) then
  error(string.format("scale of a virtual 1e8 elements took %.1f ms, want 120", pass.ms))
end
T.le(pass.cpu_ms, 24, "CPU ms of a pass over a virtual tensor")
a:drop{ name = "big" }

-- ---- profiled grad: the profile's time / speed, asleep ----
for _, case in ipairs{ { node = a, want = 500 }, { node = b, want = 250 } } do
  local n = case.node
  n:dataset{ name = "fashion-mnist", split = "train", n = 200 }
  n:model{ name = "m", arch = "mlp:784-128-10", compute = "profile" }
  local r = n:grad{ model = "m", batch = 100 }
  T.eq(r.basis, "measured", n.name .. ": grad's basis")
  -- an upper bound under load: the wait may end late, never early
  if not (r.ms >= case.want * 0.98 and r.ms <= case.want * 1.5) then
    error(string.format("%s: profiled grad took %.1f ms, want %d", n.name, r.ms, case.want))
  end
  T.le(r.cpu_ms, 0.2 * case.want, n.name .. ": CPU ms of a profiled grad")
end
T.fails("node 'plain' has no profile", function()
  plain:model{ name = "m", arch = "mlp:784-128-10", compute = "profile" }
  plain:grad{ model = "m" }
end)
T.fails("has no kernels", plain.model, plain, { name = "z", arch = "resnet50" })
net:stop()

-- ---- the train calls ----
local function network(name, profiled)
  local n = hn.network{ name = name, backend = "none" }
  local server = n:node("server", { tier = "cloud" })
  local workers = {}
  for i = 1, 2 do
    workers[i] = n:node("w" .. i, { profile = profiled and PROFILE or nil })
    n:link(server, workers[i])
  end
  n:start()
  return n, server, workers
end

local BASE = { model = T.model, dataset = T.dataset, seed = 5, batch = 16, steps = 3,
               worker_opt = { lr = 0.1 }, eval_every = 1000, eval_limit = 50, progress = false }
local SURROGATE = { model = "mobilenet_v2", compute = "profile", learn = T.model }

local n0, s0, w0 = network("errors", false)
T.fails("worker 'w1' has no profile", ps.train, T.with(BASE, T.with(SURROGATE, { workers = w0, servers = { s0 } })))
T.fails("computes by profile only", ps.train, T.with(BASE, { workers = w0, servers = { s0 }, model = "resnet50" }))
T.fails("'learn' goes with compute", ps.train, T.with(BASE, { workers = w0, servers = { s0 }, learn = T.model }))
n0:stop()

-- The surrogate's parameters: the resident prefix of the profiled model.
local P = hn.model_check(T.model)
local function params(node) return node:read{ tensor = "w", range = { 0, P } }.values end

local runs = 0
local function run(train, profiled, extra)
  runs = runs + 1
  local n, server, workers = network("run" .. runs, profiled)
  local o = T.with(BASE, { workers = workers, prefix = "r" .. runs .. "_" })
  if train == ps.train then o.servers, o.mode = { server }, "bsp" end
  if profiled then o = T.with(o, SURROGATE) end
  if profiled == "timing" then o.learn = nil end
  local s = train(T.with(o, extra or {}))
  -- ps: the server holds the final model (a worker may not have pulled it);
  -- dpsgd: every worker holds its own, worker 1's is evaluated
  local holder = train == ps.train and server or workers[1]
  local values = (o.learn ~= nil or not profiled) and params(holder) or nil
  n:stop()
  return s, values
end

-- D-PSGD steps in lockstep and sums in a fixed order: its runs are exact
-- whatever the timing, as ps's BSP and allreduce's.
for _, case in ipairs{ { "ps", ps.train }, { "allreduce", ar.train }, { "dpsgd", dc.train, { algo = "dpsgd" } } } do
  local what, train = case[1], case[2]
  local s_plain, w_plain = run(train, false, case[3])
  local s_sur, w_sur = run(train, true, case[3])
  T.eq(s_sur.learning, "surrogate " .. T.model, what .. ": summary's learning")
  T.eq(s_plain.learning, "real " .. T.model, what .. ": plain summary's learning")
  T.eq(#w_sur, P, what .. ": surrogate's parameters")
  for i = 1, P do
    if w_sur[i] ~= w_plain[i] then
      error(string.format("%s: surrogate parameter %d is %.9g, the plain run's %.9g", what, i - 1, w_sur[i], w_plain[i]))
    end
  end
  T.eq(s_sur.final_accuracy, s_plain.final_accuracy, what .. ": surrogate's accuracy")
  if not (s_sur.virtual_skipped_elements > 0) then error(what .. ": no skipped elements counted") end
  hn.log(string.format("%s: surrogate = plain run bit for bit (%d parameters), %d elements skipped",
                       what, P, s_sur.virtual_skipped_elements))
end

-- hier: two edges of two terminals (every sum is of two: exact in any
-- order), the cloud's surrogate = the plain run's, bit for bit.
local hier = require("hiernet.algo.hier")
local topo = require("hiernet.topo")
local function hier_run(profiled)
  runs = runs + 1
  local n = hn.network{ name = "hier" .. runs, backend = "none" }
  local t = topo.hier(n, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2,
    nodes = { terminal = function() return { profile = profiled and PROFILE or nil } end } })
  n:start()
  local o = T.with(BASE, { cloud = t.cloud[1], workers = t.terminal, tau1 = 2, tau2 = 2, steps = 4,
                           prefix = "r" .. runs .. "_" })
  if profiled then o = T.with(o, SURROGATE) end
  local s = hier.train(o)
  local values = params(t.cloud[1])
  n:stop()
  return s, values
end
local h_plain, hw_plain = hier_run(false)
local h_sur, hw_sur = hier_run(true)
T.eq(h_sur.learning, "surrogate " .. T.model, "hier: summary's learning")
for i = 1, P do T.eq(hw_sur[i], hw_plain[i], "hier: surrogate parameter " .. (i - 1)) end
T.eq(h_sur.final_accuracy, h_plain.final_accuracy, "hier: surrogate's accuracy")

-- Timing only: nothing learns, nothing is evaluated, and the summary says so.
local s_time = run(ps.train, "timing")
T.eq(s_time.learning, "none (timing only)", "timing-only summary's learning")
T.eq(s_time.final_accuracy, nil, "timing-only final accuracy")
T.eq(#T.csv("r" .. runs .. "_eval"), 0, "timing-only eval rows")
T.eq(s_time.steps, BASE.steps, "timing-only steps")

-- ---- EASGD by profile ----
-- Asynchronous: the centre's value depends on the order in which the
-- workers reach it, which their compute times set, so its reference is a
-- run under the same timing: the surrogate's own model computed by profile
-- with every element resident (model = learn), whose grads take the same
-- measured 0.4 s at batch 32 (round.profile). Worker 2 runs at speed 2:
-- its exchange (steps 1-3) comes at 0.6 s, worker 1's at 1.2 s, one after
-- the other in both runs, and worker 1 pulls the centre worker 2 moved.
local GRAD_S = 0.4
local function easgd_run(model)
  runs = runs + 1
  local n = hn.network{ name = "easgd" .. runs, backend = "none" }
  local center = n:node("center", { tier = "cloud" }) -- no profile: it makes no grad
  local workers = {}
  for i = 1, 2 do
    workers[i] = n:node("w" .. i, { profile = PROFILE, speed = i })
    n:link(center, workers[i])
  end
  n:start()
  local s = dc.train(T.with(BASE, { algo = "easgd", workers = workers, center = center, alpha = 0.3, period = 3,
                                     steps = 3, batch = 32, compute = "profile", model = model, learn = T.model,
                                     prefix = "r" .. runs .. "_" }))
  local values = { center:read{ tensor = "c", range = { 0, P } }.values, params(workers[1]), params(workers[2]) }
  local rows = T.csv("r" .. runs .. "_steps")
  n:stop()
  return s, values, rows
end
local e_ref, ev_ref = easgd_run(T.model)
local e_sur, ev_sur, e_rows = easgd_run("mobilenet_v2")
T.eq(e_sur.learning, "surrogate " .. T.model, "easgd: summary's learning")
T.eq(e_sur.updates_applied, 2, "easgd: elastic exchanges")
T.eq(e_ref.virtual_skipped_elements, 0, "easgd reference: skipped elements (all resident)")
if not (e_sur.virtual_skipped_elements > 0) then error("easgd: no skipped elements counted") end
for k, what in ipairs{ "centre", "worker 1", "worker 2" } do
  T.eq(#ev_sur[k], P, "easgd: " .. what .. "'s surrogate parameters")
  for i = 1, P do
    if ev_sur[k][i] ~= ev_ref[k][i] then
      error(string.format("easgd: %s's surrogate parameter %d is %.9g, the reference's %.9g", what, i - 1,
                          ev_sur[k][i], ev_ref[k][i]))
    end
  end
end
T.eq(e_sur.final_accuracy, e_ref.final_accuracy, "easgd: surrogate's accuracy")
-- Its grads take the profile's time / speed (steps 1-2: no exchange's
-- vector commands in them), asleep; the exchanges came in the order above.
local last = {}
for _, r in ipairs(e_rows) do
  local want = 1000 * GRAD_S / (r.worker == "w2" and 2 or 1) -- steps.csv names the worker
  if r.step < 3 and not (r.compute_ms >= want * 0.98 and r.compute_ms <= want * 1.5) then
    error(string.format("easgd: %s's step %d computed %.1f ms, want %.0f", r.worker, r.step, r.compute_ms, want))
  end
  last[r.worker] = math.max(last[r.worker] or 0, r.time)
end
T.le(last.w2, last.w1, "easgd: worker 2's exchange before worker 1's")
hn.log(string.format("easgd: surrogate = reference bit for bit (centre and both workers, %d parameters each), %d elements skipped",
                     P, e_sur.virtual_skipped_elements))

-- Push-sum's weight and compression have no place in a virtual tensor: refused, no records made.
local nr, sr, wr = network("refused", true)
local REFUSED = T.with(BASE, T.with(SURROGATE, { workers = wr, prefix = "refused_" }))
T.fails("decentral.train: compute = \"profile\" is not for algo 'gossip': push-sum keeps its weight", dc.train,
        T.with(REFUSED, { algo = "gossip" }))
T.fails("decentral.train: compress with compute = \"profile\": compress refuses a virtual tensor", dc.train,
        T.with(REFUSED, { algo = "easgd", center = sr, compress = { method = "int8" } }))
T.fails("no file", T.csv, "refused_steps")
nr:stop()

-- Adaptive-k's Barzilai-Borwein rate computes at a trial model: it is made
-- like the job's (by profile, with the surrogate), so the mode trains a zoo
-- model (it failed with "has no kernels" before).
local s_ak = run(ps.train, true, { mode = "adaptive-k" })
T.eq(s_ak.learning, "surrogate " .. T.model, "adaptive-k by profile: summary's learning")
if not (s_ak.updates_applied > 0) then error("adaptive-k by profile: no update applied") end
