-- The synchronization models of hiernet.algo.ps driven with scripted arrival
-- orders (no peers, no timing): every k, staleness, version and start
-- permission is checked exactly; and the Barzilai-Borwein rate with its
-- Armijo backtracking, on a quadratic by hand (a fake node computes it).
local ps = require("hiernet.algo.ps")
local worker = require("hiernet.algo.worker")

local function eq(got, want, what)
  if got ~= want then error(string.format("%s: got %s, want %s", what, tostring(got), tostring(want)), 2) end
end

local function near(got, want, tol, what)
  if math.abs(got - want) > tol then
    error(string.format("%s: got %.9g, want %.9g (tolerance %g)", what, got, want, tol), 2)
  end
end

local function policy(mode, o, n) return ps.policies[mode](o or {}, n) end

-- Feeds pushes {worker, version} in order; returns the list of rounds
-- closed as {k=, members={worker...}} and every push with its verdict.
local function feed(sync, pushes)
  local rounds, taken = {}, {}
  for _, pw in ipairs(pushes) do
    local p = { worker = pw[1], version = pw[2], norm2 = pw[3] }
    sync:take(p)
    if pw.sum_norm2 then sync:set_norm2(pw.sum_norm2) end
    taken[#taken + 1] = p
    if sync:ready() then
      local k, members = sync:close_round()
      local ws = {}
      for _, m in ipairs(members) do ws[#ws + 1] = m.worker end
      rounds[#rounds + 1] = { k = k, members = ws }
    end
  end
  return rounds, taken
end

-- ---- BSP: exactly N per step, nobody starts before the model moved on ----
do
  local n = 4
  local sync = ps.sync(policy("bsp", {}, n), n)
  for step = 0, 2 do
    for i = 1, n do eq(sync:may_start(i), true, "bsp: worker " .. i .. " may start step " .. step) end
    for i = 1, n do sync:start(i) end
    local order = ({ { 3, 1, 4, 2 }, { 1, 2, 3, 4 }, { 4, 3, 2, 1 } })[step + 1]
    for j, i in ipairs(order) do
      sync:take{ worker = i, version = step }
      eq(sync:may_start(i), false, "bsp: worker " .. i .. " waits after its push")
      eq(sync:ready(), j == n, "bsp: ready after " .. j .. " pushes")
    end
    local k = sync:close_round()
    eq(k, n, "bsp: k of step " .. step)
    eq(sync.S.version, step + 1, "bsp: version after step " .. step)
  end
  -- One worker gone: the step needs only the live ones.
  sync:set_alive_count(3)
  local rounds = feed(sync, { { 1, 3 }, { 2, 3 }, { 3, 3 } })
  eq(#rounds, 1, "bsp with 3 live workers: one round")
  eq(rounds[1].k, 3, "bsp with 3 live workers: k")
end

-- ---- ASP: each push applied alone; staleness exact ----
do
  local sync = ps.sync(policy("asp", {}, 3), 3)
  -- All pulled version 0; pushes arrive 1, 2, 3, then 1 again (pulled at 1).
  local rounds, taken = feed(sync, { { 1, 0 }, { 2, 0 }, { 3, 0 }, { 1, 1 }, { 2, 2 } })
  eq(#rounds, 5, "asp: one apply per push")
  local want = { 0, 1, 2, 2, 2 }
  for j, p in ipairs(taken) do
    eq(p.staleness, want[j], "asp: staleness of push " .. j)
    eq(p.k, 1, "asp: k of push " .. j)
  end
  eq(sync.S.version, 5, "asp: version")
end

-- ---- SSP: an event simulation with workers of different speeds ----
local function simulate_ssp(s, durations, pushes_each)
  local n = #durations
  local sync = ps.sync(policy("ssp", { staleness = s }, n), n)
  local busy_until, now, events, max_ahead, waited = {}, 0, 0, 0, 0
  local done = {}
  for i = 1, n do done[i] = 0 end
  local function try_start()
    for i = 1, n do
      if not busy_until[i] and done[i] < pushes_each then
        if sync:may_start(i) then
          -- the invariant: the step being started is at most s ahead of the slowest
          local started = sync:start(i)
          local slowest = math.huge
          for j = 1, n do slowest = math.min(slowest, sync.S.completed[j]) end
          local ahead = started - (slowest + 1)
          if ahead > max_ahead then max_ahead = ahead end
          busy_until[i] = now + durations[i]
        else
          waited = waited + 1
        end
      end
    end
  end
  try_start()
  while true do
    local next_i, t = nil, math.huge
    for i = 1, n do if busy_until[i] and busy_until[i] < t then next_i, t = i, busy_until[i] end end
    if not next_i then break end
    now, busy_until[next_i] = t, nil
    sync:take{ worker = next_i, version = sync.S.version }
    if sync:ready() then sync:close_round() end
    done[next_i] = done[next_i] + 1
    events = events + 1
    try_start()
  end
  return max_ahead, waited, events
end

for _, s in ipairs{ 0, 1, 3 } do
  local ahead, waited, events = simulate_ssp(s, { 1, 2, 7 }, 20)
  if ahead > s then error(string.format("ssp s=%d: a worker ran %d steps ahead", s, ahead)) end
  eq(ahead, s, "ssp s=" .. s .. ": the fast worker does get s steps ahead")
  if waited == 0 then error("ssp s=" .. s .. ": the fast worker never had to wait") end
  eq(events, 60, "ssp s=" .. s .. ": every push taken")
end

-- ---- fastest-k: exactly k per step; late pushes dropped or merged ----
do
  local n, k = 4, 2
  local sync = ps.sync(policy("fastest-k", { k = k }, n), n)
  local rounds, taken = feed(sync, {
    { 1, 0 }, { 3, 0 },          -- the fastest two: round of step 0
    { 2, 0 }, { 4, 0 },          -- computed on version 0, now at 1: late, dropped
    { 1, 1 }, { 2, 1 },          -- step 1
  })
  eq(#rounds, 2, "fastest-k: rounds")
  for _, r in ipairs(rounds) do eq(r.k, k, "fastest-k: k") end
  eq(table.concat(rounds[1].members, ","), "1,3", "fastest-k: members of step 0")
  eq(taken[3].kind, "drop", "fastest-k: late push dropped")
  eq(taken[3].staleness, 1, "fastest-k: staleness of the late push")
  eq(taken[4].k, nil, "fastest-k: a dropped push has no k")
  eq(sync:may_start(2), true, "fastest-k: a late worker may start on the new model")
  local merge = ps.sync(policy("fastest-k", { k = k, late = "merge" }, n), n)
  local _, t2 = feed(merge, { { 1, 0 }, { 2, 0 }, { 3, 0 } })
  eq(t2[3].kind, "late", "fastest-k late=merge: the late push is merged")
end

-- ---- drop-worker: the slowest fraction dropped each step ----
do
  local sync = ps.sync(policy("drop-worker", { drop_fraction = 0.25 }, 4), 4)
  local rounds, taken = feed(sync, { { 2, 0 }, { 4, 0 }, { 1, 0 }, { 3, 0 } })
  eq(#rounds, 1, "drop-worker: one round")
  eq(rounds[1].k, 3, "drop-worker: 4 - floor(0.25 * 4) pushes")
  eq(taken[4].kind, "drop", "drop-worker: the slowest is dropped")
  -- A fraction that does not divide: 3 - floor(0.34 * 3) = 2 (not 3 - ceil = 1).
  sync = ps.sync(policy("drop-worker", { drop_fraction = 0.34 }, 3), 3)
  rounds, taken = feed(sync, { { 3, 0 }, { 1, 0 }, { 2, 0 } })
  eq(#rounds, 1, "drop-worker 0.34 of 3: one round")
  eq(rounds[1].k, 2, "drop-worker: 3 - floor(0.34 * 3) pushes")
  eq(taken[3].kind, "drop", "drop-worker 0.34 of 3: the third push is dropped")
end

-- ---- adaptive-k: the norm test by hand, k within [1, N], late weights ----
do
  -- u1 = (1, 0), u2 = (0, 1): mean (0.5, 0.5), ||mean||^2 = 0.5;
  -- tr(Sigma) = (||u1||^2 + ||u2||^2 - 2 * 0.5) / 1 = 1; rhs = theta^2 / 2.
  local ok, lhs, rhs = ps.norm_test(2, 2, 2, 0.9)
  near(lhs, 0.5, 1e-12, "norm test: ||mean||^2")
  near(rhs, 0.405, 1e-12, "norm test: theta^2 tr / k")
  eq(ok, true, "norm test: passes at theta 0.9")
  eq((ps.norm_test(2, 2, 2, 1.1)), false, "norm test: fails at theta 1.1 (rhs 0.605)")
  -- u1 = (1, 0), u2 = (-1, 0.2): mean (0, 0.1): 0.01 against (1 + 1.04 - 0.02) / 1 * 0.81 / 2
  local ok2, lhs2, rhs2 = ps.norm_test(0.04, 2.04, 2, 0.9)
  near(lhs2, 0.01, 1e-12, "norm test 2: lhs")
  near(rhs2, 0.81 * 2.02 / 2, 1e-12, "norm test 2: rhs")
  eq(ok2, false, "norm test 2: opposing updates fail")

  local n = 5
  local p = policy("adaptive-k", { theta = 0.9 }, n)
  p.gamma = 0.9
  near(p:late_weight(3), 0.729, 1e-12, "adaptive-k: late weight gamma^tau")
  local sync = ps.sync(p, n)
  -- Noisy updates until all five: the test never passes, so k = N.
  local rounds = feed(sync, {
    { 1, 0, 1 }, { 2, 0, 1, sum_norm2 = 0.0 }, { 3, 0, 1, sum_norm2 = 0.01 },
    { 4, 0, 1, sum_norm2 = 0.02 }, { 5, 0, 1 } })
  eq(#rounds, 1, "adaptive-k: one round")
  eq(rounds[1].k, n, "adaptive-k: k = N when the test never holds")
  -- Aligned updates: the test holds at the second push: k = 2.
  rounds = feed(sync, { { 3, 1, 1 }, { 1, 1, 1, sum_norm2 = 4 } })
  eq(rounds[1].k, 2, "adaptive-k: k = 2 when two aligned updates pass")
  -- A push computed on version 0 now (version 2) is late, merged into momentum.
  local _, taken = feed(sync, { { 2, 0, 1 } })
  eq(taken[1].kind, "late", "adaptive-k: an old push is late")
  eq(taken[1].staleness, 2, "adaptive-k: its staleness")
  eq(taken[1].k, nil, "adaptive-k: a late push has no k before its round closes")
  -- It takes effect (in the momentum) with the next round: it gets that k.
  rounds = feed(sync, { { 4, 2, 1 }, { 5, 2, 1, sum_norm2 = 4 } })
  eq(rounds[1].k, 2, "adaptive-k: the next round")
  eq(taken[1].k, 2, "adaptive-k: the late push's k is its round's")
  -- k always within [1, N] whatever the norms say.
  math.randomseed(7)
  local s2 = ps.sync(policy("adaptive-k", { theta = 0.5 }, n), n)
  for _ = 1, 200 do
    local i = math.random(n)
    local pu = { worker = i, version = s2.S.version, norm2 = math.random() }
    s2:take(pu)
    if s2:wants_norm() then s2:set_norm2(math.random() * 3) end
    if s2:ready() then
      local k = s2:close_round()
      if k < 1 or k > n then error("adaptive-k: k = " .. k .. " outside [1, " .. n .. "]") end
    end
  end
end

-- ---- BB step on a quadratic, by hand ----
do
  -- f(w) = 1/2 (2 w1^2 + 8 w2^2): g = (2 w1, 8 w2). From w0 = (1, 1) to w1 = (0.5, 0.75):
  -- s = (-0.5, -0.25), y = A s = (-1, -2): ||s||^2 = 0.3125, <s, y> = 1.0: alpha_BB = 0.3125.
  local o = { min_lr = 1e-4, max_lr = 10, smoothing = 1 }
  near(worker.bb_rate(0.1, 0.3125, 1.0, o), 0.3125, 1e-12, "bb: two-point step")
  o.smoothing = 0.5
  near(worker.bb_rate(0.1, 0.3125, 1.0, o), 0.20625, 1e-12, "bb: smoothed half way")
  eq(worker.bb_rate(0.1, 0.3125, -1.0, o), 0.1, "bb: negative curvature keeps the rate")
  o.smoothing = 1
  eq(worker.bb_rate(0.1, 100, 1, o), 10, "bb: clamped to max_lr")
end

-- ---- Armijo backtracking of a BB step that is too large, by hand ----
do
  -- A fake node computing f(w) = 1/2 (2 w1^2 + 8 w2^2) (gradient (2 w1, 8 w2))
  -- for the commands a BB step sends: the whole step runs without peers.
  local A = { 2, 8 }
  local function f(w) return 0.5 * (A[1] * w[1] ^ 2 + A[2] * w[2] ^ 2) end
  local T = { w = { 1, 1 } }
  local trials = {}
  local node = {}
  function node:batch(cmds)
    local results = {}
    for k, c in ipairs(cmds) do
      local name, p = c[1], c[2]
      local r = { ms = 0 }
      if name == "grad" then
        local w = T[p.model]
        T[p.out] = { A[1] * w[1], A[2] * w[2] }
        r.loss, r.batch = f(w), 4
        if p.model == "trial" and p.out == "g_trial" then trials[#trials + 1] = { T.trial[1], T.trial[2] } end
      elseif name == "copy" then
        T[p.dst] = { T[p.src][1], T[p.src][2] }
      elseif name == "axpy" then
        local y, x = T[p.y], T[p.x]
        for e = 1, 2 do y[e] = y[e] + (p.alpha or 1) * x[e] end
      elseif name == "scale" then
        for e = 1, 2 do T[p.x][e] = T[p.x][e] * p.alpha end
      elseif name == "norm" then
        r.value = math.sqrt(T[p.x][1] ^ 2 + T[p.x][2] ^ 2)
      elseif name == "dot" then
        r.value = T[p.x][1] * T[p.y][1] + T[p.x][2] * T[p.y][2]
      else
        error("fake node: no command " .. name)
      end
      results[k] = r
    end
    return { results = results }
  end
  local J = { o = { worker_opt = { method = "sgd", lr = 0.1 }, batch = 4 }, workers = { node }, model_name = "w" }
  -- rates within [0.001, 1], the BB proposal taken whole (smoothing 1),
  -- c = 0.5, halving: the defaults but for the smoothing
  local W = worker.new(J, { bb = true, bb_opts = { smoothing = 1 } })
  -- Step 1 at w0 = (1, 1): no previous point, the rate stays 0.1.
  local r1 = W:bb_step(1, {})
  near(r1.lr, 0.1, 1e-12, "armijo: first step keeps worker_opt.lr")
  eq(#trials, 0, "armijo: no line search at an unchanged rate")
  -- The model moves to w1 = (0.5, 1): s = (-0.5, 0), y = A s = (-1, 0),
  -- alpha_BB = ||s||^2 / <s, y> = 0.25 / 0.5 = 0.5 > 0.1: Armijo checks it
  -- at w1 (g = (1, 8), ||g||^2 = 65, L = 4.25) against L - 0.5 alpha 65:
  --   alpha 0.5:   w = (0, -3),      f = 36       > -12     backtrack
  --   alpha 0.25:  w = (0.25, -1),   f = 4.0625   > -3.875  backtrack
  --   alpha 0.125: w = (0.375, 0),   f = 0.140625 <= 0.1875 accepted
  T.w = { 0.5, 1 }
  local r2 = W:bb_step(1, {})
  near(r2.lr, 0.125, 1e-12, "armijo: the BB rate 0.5 backtracked twice")
  eq(#trials, 3, "armijo: trial points evaluated")
  local want = { { 0, -3 }, { 0.25, -1 }, { 0.375, 0 } }
  for k, w in ipairs(want) do
    near(trials[k][1], w[1], 1e-12, "armijo: trial " .. k .. " w1")
    near(trials[k][2], w[2], 1e-12, "armijo: trial " .. k .. " w2")
  end
  -- What the worker pushes is the accepted rate times its gradient at w1.
  near(T.g[1], 0.125 * 1, 1e-12, "armijo: pushed update, element 1")
  near(T.g[2], 0.125 * 8, 1e-12, "armijo: pushed update, element 2")
  near(r2.loss, 4.25, 1e-12, "armijo: the step's loss is L(w1)")
  -- At most max_backtracks trials: with 2 the search stops at 0.5, 0.25
  -- (both rejected) and takes the next halving, 0.125, unchecked.
  local W2 = worker.new(J, { bb = true, bb_opts = { smoothing = 1, max_backtracks = 2 } })
  trials = {}
  local lr, _ = W2:armijo(node, 0.5, 4.25, 65)
  near(lr, 0.125, 1e-12, "armijo: max_backtracks 2")
  eq(#trials, 2, "armijo: max_backtracks 2: trials")
end

-- ---- shard ranges: contiguous, cover, sizes within one ----
do
  local r = ps.shard_ranges(10, 3)
  eq(r[1][1] .. "+" .. r[1][2] .. " " .. r[2][1] .. "+" .. r[2][2] .. " " .. r[3][1] .. "+" .. r[3][2],
     "0+4 4+3 7+3", "shard ranges of 10 over 3")
end

print("algo_sync: ok")
