-- hiernet.algo.decentral.common: what the decentralized algorithms
-- (hiernet.algo.decentral.dpsgd, .gossip, .easgd) record the same way.
local job = require("hiernet.algo.job")

local common = {}

-- A step's figures from its batch: comm_ms is the time its sends took.
function common.step_summary(results, cmds)
  local r = job.batch_summary(results, cmds)
  r.comm_ms = r.send_ms
  return r
end

-- Worker i's steps.csv row of its local step t.
function common.record(J, i, t, r)
  J:step_row{ worker = i, step = t, loss = r.loss, compute_ms = r.compute_ms, comm_ms = r.comm_ms,
              wait_ms = r.wait_ms or 0, lr = J.o.worker_opt.lr, bytes = r.bytes, samples = r.samples }
end

return common
