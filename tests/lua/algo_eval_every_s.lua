-- eval_every_s: evaluations every S seconds of training time (the job's
-- clock), whatever a step's length. For all-reduce with short steps (a tiny
-- model, batch 8) and long ones (a wider model, batch 256), checked against
-- steps.csv: at most one evaluation per period [kS, (k+1)S), each at the
-- first step that ended in its period (the step before it ended before kS),
-- and every period in which a step ended has its evaluation (or a skipped
-- one, counted in evals_skipped). hier evaluates at
-- its cloud rounds, once per period. eval_every and eval_every_s together
-- are refused, naming this file's line.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local hier = require("hiernet.algo.hier")
local topo = require("hiernet.topo")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local S = 0.25

-- The eval.csv rows of a training: at most one per period, periods from 1;
-- at least min_rows of them (default 2, so that two periods are compared).
local function eval_periods(s, what, min_rows)
  local rows = T.csv(s.prefix .. "eval")
  assert(#rows >= (min_rows or 2), what .. ": only " .. #rows .. " evaluations in " .. s.wall_s .. " s")
  local periods, last = {}, 0
  for j, r in ipairs(rows) do
    local k = math.floor(r.time / S)
    if k <= last then
      error(string.format("%s: evaluation %d at %.4f s is in period %d, after one in period %d", what, j,
                          r.time, k, last))
    end
    periods[j], last = k, k
  end
  return rows, periods
end

-- End time of every step (all-reduce: one time per step, on every worker's row).
local function step_ends(s)
  local ends = {}
  for _, r in ipairs(T.csv(s.prefix .. "steps")) do
    ends[r.step] = math.max(ends[r.step] or 0, r.time)
  end
  return ends
end

local function check_allreduce(s, what, min_rows)
  local rows, periods = eval_periods(s, what, min_rows)
  local ends = step_ends(s)
  for j, r in ipairs(rows) do
    local before = ends[r.step - 1] or 0
    if not (before < periods[j] * S) then
      error(string.format("%s: evaluation at step %d (%.4f s) is late: step %d ended at %.4f s, in period %d",
                          what, r.step, r.time, r.step - 1, before, periods[j]))
    end
  end
  -- Periods in which a step ended: each asked for one evaluation.
  local seen, due = {}, 0
  for _, t in pairs(ends) do
    local k = math.floor(t / S)
    if k >= 1 and not seen[k] then seen[k], due = true, due + 1 end
  end
  -- A step end and the check after it can straddle a period's start: one either way.
  T.le(math.abs(#rows + s.evals_skipped - due), 1,
       string.format("%s: %d evaluations + %d skipped vs %d periods with a step", what, #rows, s.evals_skipped, due))
  T.eq(s.evals, #rows, what .. ": evals")
  return #rows
end

local net, _, workers = T.network("es", 3, { no_server = true })
local base = { workers = workers, algo = "ring", model = T.model, dataset = T.dataset, seconds = 1.5,
               eval_every_s = S, worker_opt = { lr = 0.1 }, progress = false }
local function with(extra) return T.with(base, extra) end
local short = ar.train(with{ batch = 8, prefix = "short_" })
local long = ar.train(with{ batch = 256, model = "mlp:16-256-256-4", prefix = "long_" })
-- A long step may outlast several periods: on a loaded host (load 14 on 2
-- cores) the long run made 2 steps in 1.7 s, one evaluation. The short run
-- compares periods; the long one checks its evaluation's step and count.
local n_short = check_allreduce(short, "all-reduce, short steps")
local n_long = check_allreduce(long, "all-reduce, long steps", 1)
print(string.format("eval_every_s %.2f: %d evaluations over %d steps of %.1f ms, %d over %d steps of %.1f ms",
                    S, n_short, short.steps, 1000 * short.wall_s / short.steps, n_long, long.steps,
                    1000 * long.wall_s / long.steps))

local hnet = hn.network{ name = "esh", backend = "none" }
local t = topo.hier(hnet, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2 })
hnet:start()
local h = hier.train{ workers = t.terminal, tau1 = 2, tau2 = 1, model = T.model, dataset = T.dataset,
                      batch = 16, seconds = 1.5, eval_every_s = S, worker_opt = { lr = 0.1 }, progress = false }
eval_periods(h, "hier")

local line = debug.getinfo(1, "l").currentline + 1
local ok, err = pcall(ar.train, with{ eval_every = 5 })
assert(not ok and err:find("give eval_every (steps) or eval_every_s (seconds), not both", 1, true), tostring(err))
assert(err:find("algo_eval_every_s.lua:" .. line .. ": ", 1, true), "the error names the train line: " .. err)
print("algo_eval_every_s: ok")
