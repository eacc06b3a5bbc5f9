-- split.train under faults (the job's round-and-fault frame): a stage
-- killed in the middle of a pipeline's training, or a client of splitfed,
-- ends the training at once with an error naming the node, and the
-- surviving stages are free at once: the waits of the cut step are
-- aborted, not left to their 60 s timeout, so a command on each answers
-- within FREE_S and the next training on the same nodes runs its steps.
local hn = require("hiernet")
local split = require("hiernet.algo.split")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

-- Far below the wait's 60 s timeout, far above a command's time under load.
local FREE_S = 15

local net = hn.network{ name = "sfaults", backend = "none" }
local a = net:node("a", { tier = "terminal" })
local b = net:node("b", { tier = "edge" })
local c = net:node("c", { tier = "cloud" })
net:link(a, b)
net:link(b, c)
net:start()

local function options(prefix, extra, fire)
  return T.with({ model = "mlp:16-32-16-4", dataset = T.dataset, batch = 32, seconds = 3 * T.LIVENESS_S,
                  worker_opt = { lr = 0.1 }, eval_every = 5, eval_limit = 100, prefix = prefix,
                  progress = false, at_start = fire }, extra)
end

-- `victim` dies once `watched` has made 2 steps; the schedule then waits
-- for the training to end (a bound: it must not go on without the victim).
local function kill_after(watched, victim)
  return T.schedule(function(clock)
    T.after_steps(clock, watched, 2, watched .. "'s first steps")
    victim:kill()
    local t0 = hn.now()
    while not clock.done() do
      if hn.now() - t0 > T.LIVENESS_S then error("the training went on without " .. victim.name, 0) end
      hn.sleep(0.01)
    end
  end)
end

-- Each survivor answers a command within FREE_S: nothing of the cut step
-- still holds it.
local function free(what, nodes)
  for _, n in ipairs(nodes) do
    local t0 = hn.now()
    n:batch{ { "tensor", { name = "probe", size = 1 } } }
    T.le(hn.now() - t0, FREE_S, what .. ": seconds until " .. n.name .. " answers")
  end
end

local function fails(what, victim, survivors, extra, watched)
  local fire, at = kill_after(watched, victim)
  local t0 = hn.now()
  local ok, err = pcall(split.train, options(what .. "_", extra, fire))
  assert(not ok, what .. ": trained on through a dead stage")
  assert(tostring(err):find("'" .. victim.name .. "'", 1, true) or tostring(err):find(" " .. victim.name .. " ", 1, true),
         what .. ": the error does not name " .. victim.name .. ": " .. tostring(err))
  T.le(hn.now() - t0, T.LIVENESS_S, what .. ": seconds until the training failed")
  T.schedule_done(at, what)
  free(what, survivors)
  victim:restart()
end

local PIPE = { parts = { { node = a, layers = "1-1" }, { node = b, layers = "2-2" }, { node = c, layers = "3-" } },
               microbatches = 4 }
fails("pipeline", b, { a, c }, PIPE, "a")
fails("splitfed", a, { b, c }, { mode = "splitfed", clients = { a, b },
                                  parts = { { layers = "1-1" }, { node = c, layers = "2-" } } }, "b")

-- The nodes train again, every step, once the victims are back.
local s = split.train(options("again_", T.with(PIPE, { seconds = nil, steps = 4 })))
T.eq(s.steps, 4, "steps of the training after the faults")
hn.log("split_faults ok")
