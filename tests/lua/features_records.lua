-- A training's names: `label` (log lines, at_start, the default prefix),
-- `progress` (the status line in log.txt, or none), the default record
-- prefix ("" for the first training of a run, then the label's, then the
-- label's with a count) and the error for a prefix used twice.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net, server, workers = T.network("frec", 2)

local function log_text()
  local f = assert(io.open(hn.results_dir() .. "/log.txt"))
  local text = f:read("a")
  f:close()
  return text
end

local function exists(name)
  local f = io.open(hn.results_dir() .. "/" .. name)
  if f then f:close() end
  return f ~= nil
end

local function train(o)
  return ps.train(T.with({ server = server, workers = workers, mode = "bsp", model = T.model, dataset = T.dataset,
                           batch = 16, steps = 2, eval_every = 100, eval_limit = 50 }, o))
end

-- progress = false, first: nothing has logged a status line yet, so one
-- from this training would be in the log (hn.status logs its first line).
local s1 = train{ label = "beta", progress = false }
T.eq(s1.prefix, "", "the first training's prefix")
for _, f in ipairs{ "steps.csv", "eval.csv", "summary.json" } do
  assert(exists(f), "first training: no " .. f)
end
assert(log_text():find("beta: 2 workers", 1, true), "label 'beta' is not in the set-up log line")
assert(not log_text():find("beta step", 1, true), "progress = false, yet a status line was logged")

-- progress by default: the status line names the label.
local got_label
local s2 = train{ label = "alpha", at_start = function(info) got_label = info.label end }
T.eq(s2.prefix, "alpha_", "second training's prefix: the label's")
assert(exists("alpha_steps.csv") and exists("alpha_summary.json"), "no alpha_steps.csv / alpha_summary.json")
T.eq(got_label, "alpha", "at_start's label")
assert(log_text():find("alpha step %d+ loss"), "progress: no status line 'alpha step N loss ...' in log.txt")

-- The same label again: a count; no label: algorithm-mode; a label that is
-- no file name is made one.
T.eq(train{ label = "alpha", progress = false }.prefix, "alpha_2_", "the label's prefix taken")
T.eq(train{ progress = false }.prefix, "ps-bsp_", "default label's prefix")
T.eq(train{ label = "my run/1", progress = false }.prefix, "my_run_1_", "a label with a space and a slash")
assert(log_text():find("my run/1: 2 workers", 1, true), "the label as given in the log")

-- A prefix given twice is an error naming it, before anything is written.
local ok, err = pcall(train, { prefix = "alpha_", progress = false })
assert(not ok, "a prefix used twice was accepted")
assert(tostring(err):find("prefix 'alpha_' is already used by another training in this run", 1, true),
       "prefix reuse error: " .. tostring(err))
T.eq(train{ prefix = "own_", progress = false }.prefix, "own_", "a prefix of one's own")

net:stop()
