-- The numbers adaptive-k decides on, checked by hand on real gradients
-- (backend none): the update norms the workers report, the norm of the
-- server's aggregate, the norm test, and the Barzilai-Borwein rate.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local ps = require("hiernet.algo.ps")
local worker = require("hiernet.algo.worker")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net, server, workers = T.network("ak", 3)
local J = job.new("test", { workers = workers, steps = 1, model = T.model, dataset = T.dataset, batch = 16,
                            worker_opt = { lr = 0.3 }, progress = false }, {})
J:setup{ origin = server, holders = { server }, eval_node = server }
local P = J.model_size

local function dot(a, b)
  local s = 0
  for e = 1, #a do s = s + a[e] * b[e] end
  return s
end

-- Each worker's update u_i = lr g_i, pushed into the server's slot u.i.
local W = worker.new(J, { want_norm = true })
local reported, u, sum = {}, {}, {}
for e = 1, P do sum[e] = 0 end
for i = 1, 3 do
  local r = W:step(i, { { node = server, as = "u." .. i } })
  reported[i] = r.norm2
  u[i] = T.read_all(server, "u." .. i, P)
  T.near(r.norm2, dot(u[i], u[i]), 1e-4, "worker " .. i .. "'s reported ||u||^2")
  for e = 1, P do sum[e] = sum[e] + u[i][e] end
end
server:tensor{ name = "acc", size = P }
for i = 1, 3 do worker.accumulate(server, "u." .. i, "acc", 1, nil) end
local server_norm2 = server:norm{ x = "acc" }.value ^ 2
T.near(server_norm2, dot(sum, sum), 1e-4, "server's ||sum u||^2")

-- The norm test on the peers' numbers against the same test by hand.
for _, theta in ipairs{ 0.3, 0.9, 2.0 } do
  local k = 3
  local mean2 = dot(sum, sum) / (k * k)
  local trace = 0
  for i = 1, k do
    for e = 1, P do trace = trace + (u[i][e] - sum[e] / k) ^ 2 end
  end
  trace = trace / (k - 1)
  local want = mean2 >= theta * theta * trace / k
  local ok, lhs, rhs = ps.norm_test(server_norm2, reported[1] + reported[2] + reported[3], k, theta)
  T.near(lhs, mean2, 1e-4, "norm test lhs")
  T.near(rhs, theta * theta * trace / k, 1e-4, "norm test rhs")
  T.eq(ok, want, "norm test verdict at theta " .. theta)
end

-- Barzilai-Borwein: two steps at two models; the rate from s and y by hand.
local B = worker.new(J, { bb = true, bb_opts = { max_lr = 10, smoothing = 0.5 } })
B:setup()
B.lr[1] = 10 * 0.3 -- the cap (10 x worker_opt.lr): no Armijo backtracking in this check
local w1 = workers[1]
B:step(1, { { node = server, as = "b.1" } })
local w_before = T.read_all(w1, "w_prev", P)
T.eq(B.lr[1], 10 * 0.3, "bb: the first step keeps the rate")
w1:axpy{ y = "w", x = "g", alpha = -0.05 } -- a new model for the second step
B:step(1, { { node = server, as = "b.1" } })
-- y = g_B(w_now) - g_B(w_before) on the second step's batch B; "g" was
-- pushed scaled by the rate, "g_prev" is the gradient at w_before on B.
local w_now, g_before = T.read_all(w1, "w_prev", P), T.read_all(w1, "g_prev", P)
local g_now = T.read_all(w1, "g", P)
local s, y = {}, {}
for e = 1, P do s[e], y[e] = w_now[e] - w_before[e], g_now[e] / B.lr[1] - g_before[e] end
local ss, sy = dot(s, s), dot(s, y)
assert(sy > 0, "bb: the check needs positive curvature, got " .. sy)
local want = 0.5 * 3 + 0.5 * math.min(3, math.max(0.003, ss / sy))
T.near(B.lr[1], want, 1e-4, "bb: smoothed two-point rate")
print("algo_adaptive_k: ok")
