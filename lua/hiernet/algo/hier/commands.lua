-- hiernet.algo.hier.commands: the peer commands of one round of
-- hierarchical averaging (hiernet.algo.hier, whose header says what they
-- compute): a terminal's local steps and weighted model, an edge's sum of
-- its terminals' slots, the cloud's sum of the edges'. Reachable from
-- hiernet.algo.hier as hier.terminal_commands, hier.edge_commands, ...
local job = require("hiernet.algo.job")

local hier = {}

-- The slot a terminal's weighted model lands in on its edge, and an
-- edge's on the cloud.
function hier.slot(i)
  return "share." .. i
end

function hier.up_slot(edge)
  return "up." .. edge.name
end

-- A terminal: `local_steps` (default tau1) local steps, then its model
-- weighted by `share` into its slot on the edge.
function hier.terminal_commands(J, i, edge, share, local_steps)
  local m, o, c = J.model_name, J.o.worker_opt, J.o.compress
  local cmds = {}
  if c then cmds[#cmds + 1] = { "copy", { src = m, dst = "base" } } end
  for _ = 1, local_steps or J.o.tau1 or 5 do
    cmds[#cmds + 1] = { "grad", { model = m, out = "g", batch = J.o.batch } }
    cmds[#cmds + 1] = { "optim", job.optim_params(o, m, "g") }
  end
  cmds[#cmds + 1] = { "copy", { src = m, dst = "share" } }
  if c then cmds[#cmds + 1] = { "axpy", { y = "share", x = "base", alpha = -1 } } end
  cmds[#cmds + 1] = { "scale", { x = "share", alpha = share } }
  if c then
    cmds[#cmds + 1] = job.compress_command(c, "share", "sc")
    cmds[#cmds + 1] = { "send", { tensor = "sc", to = edge, as = "sc." .. i } }
  else
    cmds[#cmds + 1] = { "send", { tensor = "share", to = edge, as = hier.slot(i) } }
  end
  return cmds
end

-- An edge: the weighted sum of its terminals becomes its model; on a cloud
-- round it sends its own weighted model to its slot on the cloud and waits
-- for the cloud's average; then it sends the model to its terminals.
function hier.edge_commands(J, group, cloud_share, cloud)
  local m, c = J.model_name, J.o.compress
  local terms = {}
  for n, i in ipairs(group.terminals) do terms[n] = J.workers[i] end
  local cmds = {}
  if c then
    local names = {}
    for n, i in ipairs(group.terminals) do names[n] = "sc." .. i end
    cmds[#cmds + 1] = { "wait", { tensors = names, k = #names } }
    cmds[#cmds + 1] = { "copy", { src = m, dst = "acc" } } -- the model the changes start from
    for _, name in ipairs(names) do
      cmds[#cmds + 1] = { "decompress", { tensor = name, out = "acc", add = true } }
    end
  else
    local names = {}
    for n, i in ipairs(group.terminals) do names[n] = hier.slot(i) end
    cmds[#cmds + 1] = { "wait", { tensors = names, k = #names, from = terms } }
    cmds[#cmds + 1] = { "sum", { out = "acc", inputs = names } }
  end
  cmds[#cmds + 1] = { "copy", { src = "acc", dst = m } }
  if cloud_share then
    table.move(hier.up_commands(J, group.edge, cloud_share, cloud), 1, 3, #cmds + 1, cmds)
    cmds[#cmds + 1] = { "wait", { tensor = m, k = 1, from = { cloud } } }
  end
  cmds[#cmds + 1] = { "send", { tensor = m, to = terms } }
  return cmds
end

-- An edge's model weighted by `share` into its slot on the cloud.
function hier.up_commands(J, edge, share, cloud)
  return {
    { "copy", { src = J.model_name, dst = "share" } },
    { "scale", { x = "share", alpha = share } },
    { "send", { tensor = "share", to = cloud, as = hier.up_slot(edge) } },
  }
end

-- The cloud: the edges' slots summed in the order of `edges` become its
-- model, sent down to them unless keep (the last average, at the end).
function hier.cloud_commands(J, edges, keep)
  local cmds = {
    { "wait", { tensors = hier.up_slots(edges), k = #edges, from = edges } },
    { "sum", { out = "acc", inputs = hier.up_slots(edges) } },
    { "copy", { src = "acc", dst = J.model_name } },
  }
  if not keep then cmds[4] = { "send", { tensor = J.model_name, to = edges } } end
  return cmds
end

function hier.up_slots(edges)
  local names = {}
  for k, e in ipairs(edges) do names[k] = hier.up_slot(e) end
  return names
end

return hier
