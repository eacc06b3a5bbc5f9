-- hiernet.algo.pipeline_replay replays stage batches with their compute
-- alone (docs/algorithms.md "What the bubble is made of"): on plans built
-- here with known times, its spans equal the ones worked out by hand:
--   * GPipe with equal stages: (M + p - 1) (F + B), so that every stage's
--     bubble is the ideal (p - 1) / (M + p - 1) exactly;
--   * unequal stages (M = 2, the schedule traced by hand below);
--   * `even`: each stage's passes at their mean (one slow micro-batch
--     spread over the stage's others);
--   * sends to a list of nodes, waits on k arrivals of one name and on
--     several names, a send to a node outside the plans (dropped), and a
--     wait nobody satisfies (nil).
local replay = require("hiernet.algo.pipeline_replay")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")

-- Plain tables stand for the nodes: the replay only compares them.
local function nodes(p)
  local list = {}
  for k = 1, p do list[k] = { name = "s" .. k } end
  return list
end

-- GPipe's order, written here from the paper's schedule: every forward
-- (after its activation arrives), then every backward from the last
-- micro-batch; f[k][m], b[k][m] the passes' ms. Returns plans, results.
local function gpipe(f, b)
  local p, M = #f, #f[1]
  local ns, plans, results = nodes(p), {}, {}
  for k = 1, p do
    local cmds, res = {}, {}
    local function add(name, params, ms)
      cmds[#cmds + 1] = { name, params }
      res[#res + 1] = { ms = ms }
    end
    for m = 1, M do
      if k > 1 then add("wait", { tensor = "x." .. m }, 99) end
      add("forward", {}, f[k][m])
      if k < p then add("send", { tensor = "a", to = ns[k + 1], as = "x." .. m, nowait = true }, 99) end
    end
    for m = M, 1, -1 do
      if k < p then add("wait", { tensor = "dy." .. m }, 99) end
      add("backward", {}, b[k][m])
      if k > 1 then add("send", { tensor = "dx", to = ns[k - 1], as = "dy." .. m, nowait = true }, 99) end
    end
    plans[k], results[k] = { node = ns[k], cmds = cmds }, res
  end
  return plans, results
end

local function filled(p, M, v)
  local t = {}
  for k = 1, p do
    t[k] = {}
    for m = 1, M do t[k][m] = type(v) == "table" and v[k] or v end
  end
  return t
end

-- Equal stages: the ideal exactly, for several p and M.
for _, case in ipairs({ { 3, 1 }, { 3, 4 }, { 3, 16 }, { 4, 8 } }) do
  local p, M = case[1], case[2]
  local plans, results = gpipe(filled(p, M, 1), filled(p, M, 2))
  local span = replay.span(plans, results)
  T.near(span, (M + p - 1) * 3, 1e-9, string.format("p=%d M=%d: span", p, M))
  T.near(1 - M * 3 / span, (p - 1) / (M + p - 1), 1e-12, string.format("p=%d M=%d: bubble", p, M))
  T.near(replay.span(plans, results, { even = true }), span, 1e-9, "even changes nothing")
end

-- Unequal stages, M = 2, F = (1, 2, 1), B = (1, 1, 3). By hand:
--   s1 f1 [0,1] f2 [1,2];  s2 f1 [1,3] f2 [3,5];  s3 f1 [3,4] f2 [5,6]
--   s3 b2 [6,9] b1 [9,12]; s2 b2 [9,10] b1 [12,13]; s1 b2 [10,11] b1 [13,14]
do
  local plans, results = gpipe(filled(3, 2, { 1, 2, 1 }), filled(3, 2, { 1, 1, 3 }))
  T.near(replay.span(plans, results), 14, 1e-9, "unequal stages: span")
end

-- One slow forward (3 instead of 1) on stage 1 of 2, M = 2, B = 1: own
-- times s1 f1 [0,3] f2 [3,4]; s2 f1 [3,4] f2 [4,5] b2 [5,6] b1 [6,7]; s1
-- b2 [6,7] b1 [7,8]: 8. Even (s1's forwards at 2 each): s1 [0,2] [2,4];
-- s2 f1 [2,3] f2 [4,5] ...: 8 as well (the first stage's spread only
-- moves its own passes).
do
  local plans, results = gpipe({ { 3, 1 }, { 1, 1 } }, filled(2, 2, 1))
  T.near(replay.span(plans, results), 8, 1e-9, "slow first forward: span")
  T.near(replay.span(plans, results, { even = true }), 8, 1e-9, "slow first forward, even: span")
end
-- Stage 2 of 3 slow on micro-batch 1's forward (F2 = {4, 0}), all else 1,
-- M = 2. Own times: s1 f [0,1] [1,2]; s2 f1 [1,5] f2 [5,5]; s3 f1 [5,6]
-- f2 [6,7] b2 [7,8] b1 [8,9]; s2 b2 [8,9] b1 [9,10]; s1 b2 [9,10] b1
-- [10,11]: 11. Even (s2's forwards at 2 each): s2 f1 [1,3] f2 [3,5]; s3
-- f1 [3,4] f2 [5,6] b2 [6,7] b1 [7,8]; s2 b2 [7,8] b1 [8,9]; s1 b2 [8,9]
-- b1 [9,10]: 10.
do
  local f = { { 1, 1 }, { 4, 0 }, { 1, 1 } }
  local plans, results = gpipe(f, filled(3, 2, 1))
  T.near(replay.span(plans, results), 11, 1e-9, "one slow pass: span")
  T.near(replay.span(plans, results, { even = true }), 10, 1e-9, "one slow pass, even: span")
end

-- Sends to a list, waits on k arrivals and on several names, a receiver
-- outside the plans (dropped). a: compute 2, "x" to {b, c, outsider},
-- "z" to c at 2, compute 3, "z" to c at 5; b: wait x (2), compute 1, "y"
-- to c at 3; c: wait 2 arrivals of "z" (5), wait {x, y} (3), compute 1:
-- 6. The waits' own ms (7) count for nothing.
do
  local a, b, c, outsider = { name = "a" }, { name = "b" }, { name = "c" }, { name = "o" }
  local plans = {
    { node = a, cmds = { { "optim", {} }, { "send", { tensor = "t", to = { b, c, outsider }, as = "x" } },
                         { "send", { tensor = "z", to = c } }, { "scale", {} }, { "send", { tensor = "z", to = c } } } },
    { node = b, cmds = { { "wait", { tensor = "x" } }, { "forward", {} }, { "send", { tensor = "t", to = c, as = "y" } } } },
    { node = c, cmds = { { "wait", { tensor = "z", k = 2 } }, { "wait", { tensors = { "x", "y" } } }, { "backward", {} } } },
  }
  local results = {
    { { ms = 2 }, { ms = 0 }, { ms = 0 }, { ms = 3 }, { ms = 0 } },
    { { ms = 7 }, { ms = 1 }, { ms = 0 } },
    { { ms = 7 }, { ms = 7 }, { ms = 1 } },
  }
  T.near(replay.span(plans, results), 6, 1e-9, "lists, k and names: span")
  plans[3].cmds[1][2].k = 3
  T.eq(replay.span(plans, results), nil, "a wait nobody satisfies: nil")
end
