-- A training family of one's own, put together from the public frame
-- pieces (docs/writing-algorithms.md, "A new algorithm module"), the way a
-- researcher would write it in the scenario's folder: synchronous data
-- parallelism over an all-reduce, each worker applying the mean update
-- with a server optimizer of its own. tests/lua/own_collective.lua checks
-- it against a sequential reference.
--
--   local mine = require("mods.mean_allreduce")
--   mine.train{ workers = {...}, algo = "ring", groups = {...}, server_opt = {...}, steps = ... }
local hn = require("hiernet")
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

local function train_step(J, W, state)
  local ids = active_ids(J)
  if state.changed then -- a fault changed who takes part: one model again
    state.changed = false
    ar.resync(J, ids)
  end
  local run = ar.run(step_plan(J, W, ids))
  J.steps = J.steps + 1
  J.updates_applied = J.updates_applied + #ids
  ar.record_step(J, run, ids, J:now())
  if J:eval_due(J.steps) then J:evaluate(J.steps) end
end

function mine.train(opts)
  local J = job.new("mean_allreduce", opts, { mode = type(opts) == "table" and opts.algo or "ring",
                                              options = OPTIONS })
  J.o.algo = J.o.algo or "ring"
  if J.o.groups then ar.group_indices(J.workers, J.o.groups) end -- every worker in one group
  J.o.server_opt = J.o.server_opt or { method = "sgd", lr = 1.0 }
  J:setup{ origin = J.workers[1], eval_node = J.workers[1], model_name = "w" }
  local W = worker.new(J, {})
  local state = {}
  ar.watch(J, state)
  J:start_clock()
  J:guard(function()
    while not J:stopped() do train_step(J, W, state) end
    if J.fault_error then error(J.fault_error, 0) end
  end)
  return J:finish{ algo = J.o.algo }
end

return mine
