-- The own-algorithm loop: a researcher's module in the scenario's folder
-- (tests/lua/mods/fastest_k_bounded.lua, the policy of
-- docs/writing-algorithms.md) loads without a rebuild, registers a new ps
-- mode with ps.add_mode, and trains. Checked exactly: the scripted verdicts
-- of its ps.sync; its options' ownership (k shared with fastest-k, max_late
-- its own); and in a training on backend none, every steps.csv row says
-- what the policy promises: a fresh push has the round's k, a late one at
-- most max_late versions old is kept (it gets the k of the round it joined),
-- an older one is dropped (no k), exactly k fresh pushes per server step.
-- And the page's code block is the module, word for word.
local hn = require("hiernet")
local ps, where = require("mods.fastest_k_bounded")
local job = require("hiernet.algo.job")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

assert(tostring(where):find("mods/fastest_k_bounded.lua", 1, true), "loaded from " .. tostring(where))

-- The page's example is this module as written, from its description on.
T.doc_example("writing-algorithms.md", "Example: bounded-staleness fastest-k", "mods/fastest_k_bounded.lua",
              "-- Fastest-k that keeps")
assert(require("hiernet.algo.ps") == ps, "the module extends the library's ps, not a copy")
assert(ps.policies["fastest-k-bounded"] and ps.modes[#ps.modes] == "fastest-k-bounded", "mode registered")

-- ---- the bookkeeping, scripted (the page's example, every verdict) ----
do
  local sync = ps.sync(ps.policies["fastest-k-bounded"]({ k = 2, max_late = 1 }, 4), 4)
  local script = {
    { worker = 1, version = 0, kind = "fresh", staleness = 0, k = 2 }, -- round 1
    { worker = 2, version = 0, kind = "fresh", staleness = 0, k = 2 },
    { worker = 3, version = 0, kind = "late", staleness = 1, k = 2 },  -- late by 1: kept, joins round 2
    { worker = 1, version = 1, kind = "fresh", staleness = 0, k = 2 }, -- round 2
    { worker = 2, version = 1, kind = "fresh", staleness = 0, k = 2 },
    { worker = 4, version = 0, kind = "drop", staleness = 2 },         -- late by 2: dropped
  }
  local pushes, closes = {}, 0
  for n, want in ipairs(script) do
    local p = { worker = want.worker, version = want.version }
    pushes[n] = p
    T.eq(sync:take(p), want.kind, "push " .. n .. ": verdict")
    T.eq(p.staleness, want.staleness, "push " .. n .. ": staleness")
    if sync:ready() then sync:close_round(); closes = closes + 1 end
  end
  T.eq(closes, 2, "rounds closed")
  T.eq(sync.S.version, 2, "model version")
  for n, want in ipairs(script) do T.eq(pushes[n].k, want.k, "push " .. n .. ": k") end
  -- weight of a kept push: 1 / (1 + staleness)
  T.eq(sync.policy:late_weight(1), 0.5, "late weight at staleness 1")
  -- may_start: worker 1 pushed on version 1, the model is at 2: it may go;
  -- after its push on version 2 it waits for the next model.
  T.eq(sync:may_start(1), true, "worker 1 may start")
  sync:take{ worker = 1, version = 2 }
  T.eq(sync:may_start(1), false, "worker 1 waits for a newer model")
end

-- ---- options: k belongs to two modes now, max_late to the new one ----
local net, server, workers = T.network("own", 4, { speeds = { 1, 1, 0.5, 0.05 } })

local function fails(o, text, what)
  local base = { server = server, workers = workers, model = T.model, dataset = T.dataset, steps = 1,
                 progress = false }
  for key, v in pairs(o) do base[key] = v end
  local ok, err = pcall(ps.train, base)
  assert(not ok and tostring(err):find(text, 1, true), what .. ": " .. tostring(err))
end
fails({ mode = "bsp", k = 2 }, "option 'k' is for modes 'fastest-k', 'fastest-k-bounded', not 'bsp'", "k with bsp")
fails({ mode = "fastest-k", max_late = 1 }, "option 'max_late' is for mode 'fastest-k-bounded', not 'fastest-k'",
      "max_late with fastest-k")
fails({ mode = "fastest-k-bounded", max_late = -1 }, "option 'max_late'", "a negative max_late")
fails({ mode = "fastest-k-bounded", k = 5 }, "option 'k': 5 is more than the 4 workers", "k above n")
fails({ mode = "no-such-mode" }, "fastest-k-bounded", "an unknown mode lists the new one")
local function add_fails(args, text, what)
  local ok, err = pcall(ps.add_mode, table.unpack(args, 1, 3))
  assert(not ok and tostring(err):find(text, 1, true), what .. ": " .. tostring(err))
end
add_fails({ "fastest-k-bounded", function() end }, "mode 'fastest-k-bounded' exists already", "a second add")
add_fails({ "mine", function() end, { batch = job.check.posint } }, "option 'batch': every mode takes it already",
          "a common option")
add_fails({ "mine", function() end, { local_steps = job.check.posint } }, "option 'local_steps': every mode",
          "a ps option of every mode")
add_fails({ "mine", "policy" }, "expected a policy function", "no function")
assert(not ps.policies.mine, "a failed add_mode registers nothing")
-- a policy's summary field may not replace one of ps.train's
ps.add_mode("shadows-k", function(o, n)
  local p = ps.policies["fastest-k-bounded"](o, n)
  p.name, p.summary = "shadows-k", { k = 99 }
  return p
end)
fails({ mode = "shadows-k" }, "policy 'shadows-k': summary field 'k' is one ps.train writes", "a summary field of ps's")

-- ---- training: what the policy promises, row by row ----
-- k = 2 of the three quick workers close a round, so the third one's push
-- is mostly one version late: kept (max_late = 1). Worker 4 at speed 1/20
-- computes a step in several rounds' time (CPU time / speed), so it pushes
-- some ten times, mostly 2 to 10 versions late: dropped (10 to 20 drops a
-- run, 27 to 59 kept, in four runs on a loaded host).
local K, MAX_LATE, STEPS = 2, 1, 60
local s = ps.train{ server = server, workers = workers, mode = "fastest-k-bounded", k = K, max_late = MAX_LATE,
                    model = "mlp:16-256-256-4", dataset = T.dataset, batch = 256, steps = STEPS,
                    worker_opt = { method = "sgd", lr = 0.05 }, eval_every = 1000, eval_limit = 200,
                    prefix = "fkb_", progress = false }
T.eq(s.policy, "fastest-k-bounded", "summary: policy")
T.eq(s.k, K, "summary: k")
T.eq(s.max_late, MAX_LATE, "summary: max_late (the policy's own field)")
T.eq(s.steps, STEPS, "server steps")
T.eq(s.updates_applied, K * STEPS, "updates applied: k fresh pushes per step")
local fresh, kept, dropped, untaken = 0, 0, 0, 0
for _, row in ipairs(T.csv("fkb_steps")) do
  local what = string.format("worker %s step %d (staleness %s)", row.worker, row.step, tostring(row.staleness))
  if row.staleness == nil then -- pushed after the last round: never taken
    T.eq(row.k, nil, what .. ": k of a push never taken")
    untaken = untaken + 1
  elseif row.staleness == 0 then
    T.eq(row.k, K, what .. ": k of a fresh push")
    fresh = fresh + 1
  elseif row.staleness <= MAX_LATE then
    T.eq(row.k, K, what .. ": a late push within max_late is kept")
    kept = kept + 1
  else
    T.eq(row.k, nil, what .. ": a push beyond max_late is dropped")
    dropped = dropped + 1
  end
end
T.eq(fresh, K * STEPS, "fresh pushes")
hn.log(string.format("fastest-k-bounded: %d fresh, %d late kept, %d dropped, %d after the end; accuracy %.3f",
                     fresh, kept, dropped, untaken, s.final_accuracy))
assert(kept >= 1, "no late push within max_late was seen (the quick workers' third push of a round is late by 1)")
assert(dropped >= 1, "no push beyond max_late was seen (worker 4 at 1/20 should be 2 or more versions late)")
T.learned(s, 0.7, "fastest-k-bounded")
net:stop()
