-- hiernet.algo.decentral.easgd: elastic averaging SGD (Zhang et al.
-- 2015), asynchronous, for hiernet.algo.decentral: every `period` local
-- steps worker i pulls the centre c from the centre node (`center`,
-- default the network's one tier-"cloud" host), d = alpha (x_i - c),
-- x_i <- x_i - d, and c <- c + d (the centre adds d as it arrives). With
-- compression it compresses d.
local job = require("hiernet.algo.job")
local common = require("hiernet.algo.decentral.common")

local easgd = {}
local step_summary, record = common.step_summary, common.record
local fail = job.fail

-- The local update: x <- x - lr g (or the worker optimizer) as commands.
local function local_step_commands(J, model)
  local o = J.o.worker_opt
  return {
    { "grad", { model = model, out = "g", batch = J.o.batch } },
    { "optim", job.optim_params(o, model, "g") },
  }
end

-- ---- EASGD ----

local function easgd_step(J, center, alpha, period)
  local m = J.model_name
  local c = J.o.compress
  return function(i, t)
    local node = J.workers[i]
    local cmds = local_step_commands(J, m)
    local r = step_summary(node:batch(cmds).results, cmds)
    if t % period == 0 then
      -- Elastic exchange: pull the centre, move towards it, push the difference.
      local pull = center:send{ tensor = "c", to = node, as = "center" }
      local ex = {
        { "copy", { src = m, dst = "d" } },
        { "axpy", { y = "d", x = "center", alpha = -1 } },
        { "scale", { x = "d", alpha = alpha } },
        { "axpy", { y = m, x = "d", alpha = -1 } },
      }
      local sent = "d"
      if c then
        ex[#ex + 1] = job.compress_command(c, "d", "dc")
        sent = "dc"
      end
      ex[#ex + 1] = { "send", { tensor = sent, to = center, as = c and ("dc." .. i) or "c",
                                add = not c or nil } }
      local e = step_summary(node:batch(ex).results, ex)
      if c then center:decompress{ tensor = "dc." .. i, out = "c", add = true } end
      r.comm_ms, r.bytes = r.comm_ms + pull.ms + e.comm_ms, r.bytes + pull.bytes + e.bytes
      r.compute_ms = r.compute_ms + e.compute_ms
      J.updates_applied = J.updates_applied + 1
    end
    record(J, i, t, r)
  end
end

-- EASGD's centre by default: the network's one host of tier "cloud" that
-- is not a worker (the node a hierarchy keeps its global model on).
local function default_center(J)
  local is_worker, found = {}, {}
  for _, w in ipairs(J.workers) do is_worker[w.name] = true end
  for _, n in ipairs(J.workers[1].network:nodes()) do
    if n.tier == "cloud" and n.kind == "host" and not is_worker[n.name] then found[#found + 1] = n end
  end
  if #found == 1 then return found[1] end
  local why = #found == 0 and "the network has no node of tier \"cloud\" besides the workers"
      or string.format("the network has %d nodes of tier \"cloud\"", #found)
  fail("decentral.train: easgd needs a centre: %s; give option 'center' (the node holding the centre variable)", why)
end

easgd.default_center = default_center

-- The plan (hiernet.algo.decentral): steps on their own; the centre is
-- evaluated as of when every live worker has made `step` local steps
-- (eval.csv's step counts steps, as steps.csv's does). Faults: the workers
-- must reach the centre; one cut off waits (its transfers with the centre
-- aborted on both ends), one restarted starts from the centre.
function easgd.plan(J, extra, center)
  -- The centre starts as the common initial model (a model, so it can be
  -- evaluated), made like the job's: by profile, with its surrogate, where
  -- the job computes by profile (the centre's node needs no profile: it
  -- makes no grad).
  center:model{ name = "c", arch = J.o.model, seed = J.o.seed, compute = J.o.compute, learn = J.o.learn }
  center:copy{ src = "w", dst = "c" }
  local alpha, period = J.o.alpha or (0.9 / #J.workers), J.o.period or 4
  extra.alpha, extra.period = alpha, period
  return {
    step = easgd_step(J, center, alpha, period),
    on_steps = function(v) if J:eval_due(v) then J:evaluate(v, center, "c") end end,
    faults = {
      hub = function() return center end,
      essential = function(node) return node == center and "centre" or nil end,
      rejoin = function(i) center:send{ tensor = "c", to = J.workers[i], as = J.model_name } end,
      on_change = function(i, back)
        if not back then J:abort_between(J.workers[i], { center }) end
      end,
    },
    counts_updates = true, -- an exchange with the centre is an update (easgd_step)
    finish = function() extra.final_node, extra.final_model = center, "c" end,
  }
end

return easgd
