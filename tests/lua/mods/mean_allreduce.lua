-- tests/lua/mods/mean_allreduce.lua: docs/writing-algorithms.md's "A new
-- algorithm module" shows this file word for word from its next paragraph
-- on; tests/lua/own_collective.lua checks that, and the training against a
-- sequential reference.

-- Mean all-reduce, a family of one's own on the job's round-and-fault
-- frame: each step every worker computes its update, the updates are
-- all-reduced, and every worker applies the mean with a server optimizer
-- of its own.
--
--   local mine = require("mods.mean_allreduce")
--   mine.train{ workers = {...}, algo = "ring", groups = {...}, server_opt = {...}, steps = ... }
local job = require("hiernet.algo.job")
local worker = require("hiernet.algo.worker")
local ar = require("hiernet.algo.allreduce")
local check, fail = job.check, job.fail

local mine = {}

local OPTIONS = {
  algo = check.oneof(table.unpack(ar.algos)), server_opt = check.optimizer, local_steps = check.posint,
  groups = function(what, v)
    if type(v) ~= "table" or #v == 0 then fail("%s: expected a list of lists of nodes", what) end
    return v
  end,
}

-- The workers still training, by index.
local function active_ids(J)
  local ids = {}
  for i = 1, #J.workers do if J:alive(i) then ids[#ids + 1] = i end end
  return ids
end

-- One step's plan: each worker's update commands before the collective,
-- the mean applied after it. The server optimizer steps the model with
-- optim{tensor=}: a state apart from the worker optimizer's, which steps
-- the same parameters with optim{model=} (a shared state would be reset
-- at every switch of method).
local function step_plan(J, W, ids)
  local nodes, before, after, update = {}, {}, {}, nil
  for r, i in ipairs(ids) do
    nodes[r] = J.workers[i]
    before[r], update = W:update_commands(W.lr[i])
    if W.writes_model then -- local steps moved the model: back to the step's start
      table.insert(before[r], { "axpy", { y = J.model_name, x = update, alpha = 1 } })
    end
    after[r] = { { "scale", { x = update, alpha = 1 / #ids } },
                 { "optim", job.optim_params(J.o.server_opt, J.model_name, update, "tensor") } }
  end
  return ar.plan{ peers = nodes, tensor = update, algo = J.o.algo, groups = J.o.groups,
                  size = J.model_size, before = before, after = after }
end

function mine.train(opts)
  local J = job.new("mean_allreduce", opts, { mode = type(opts) == "table" and opts.algo or "ring",
                                              options = OPTIONS })
  J.o.algo = J.o.algo or "ring"
  if J.o.groups then ar.group_indices(J.workers, J.o.groups) end -- every worker in one group
  J.o.server_opt = J.o.server_opt or { method = "sgd", lr = 1.0 }
  J:setup{ origin = J.workers[1], eval_node = J.workers[1], model_name = "w" }
  local W = worker.new(J, {})
  -- Faults: the largest group of workers that reach each other goes on
  -- (with on_failure = "fail", the first worker away ends the training);
  -- a worker away stops its transfers with the others and they theirs.
  J:watch_faults(J:group_faults())
  J:start_clock()
  J:guard(function()
    J:rounds{
      members = function() return active_ids(J) end,
      -- after a fault: one model again, the arrivals of a cut step cleared
      recover = function(ids) ar.resync(J, ids) end,
      finally = function(ids) ar.resync(J, ids) end,
      step = function(ids) return ar.run(step_plan(J, W, ids)) end,
      record = function(ids, run)
        J.steps = J.steps + 1
        J.updates_applied = J.updates_applied + #ids
        ar.record_step(J, run, ids, J:now())
        if J:eval_due(J.steps) then J:evaluate(J.steps) end
      end,
    }
  end)
  return J:finish{ algo = J.o.algo }
end

return mine
