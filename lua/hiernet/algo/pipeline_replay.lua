-- hiernet.algo.pipeline_replay: what a step of stage batches would take
-- with its measured compute alone (docs/algorithms.md "Split learning and
-- pipelines", what the bubble is made of). No network in it: plain data.
--
--   local span_ms = replay.span(plans, results)
--   local even_ms = replay.span(plans, results, { even = true })
--
-- plans[i] = { node =, cmds = { {name, params}, ... } } as split.train runs
-- them (one batch per stage), results[i] the batch's results in command
-- order. The replay runs every stage's commands in order on a clock of its
-- own: a compute command (anything but send and wait) takes the `ms` its
-- result says; a send takes no time and delivers its tensor (`as`, or its
-- own name) to every receiver at once; a wait ends when the tensors it
-- waits for have arrived. The span is when the last stage ends: the step as
-- the schedule would run it if transfers and the per-command control cost
-- nothing, so that 1 - (a stage's compute) / span is the bubble the
-- schedule leaves with the stages' measured compute, their imbalance
-- included (the ideal (p - 1) / (M + p - 1) when the stages are equal).
-- With `even`, each compute command takes the mean time of its stage's
-- commands of the same name: the stages' imbalance stays, the spread of
-- one stage's passes from micro-batch to micro-batch goes.
local replay = {}

-- The time at which a wait on `arrived` (name -> list of arrival times)
-- is satisfied, or nil while it is not: `tensors` each arrived (k of
-- them), or `k` arrivals of `tensor`.
local function wait_ready(params, arrived)
  local times = {}
  if params.tensors then
    for _, name in ipairs(params.tensors) do
      local list = arrived[name]
      if list and list[1] then times[#times + 1] = list[1] end
    end
  else
    for _, at in ipairs(arrived[params.tensor] or {}) do times[#times + 1] = at end
  end
  local k = params.k or (params.tensors and #params.tensors) or 1
  if #times < k then return nil end
  table.sort(times)
  return times[k]
end

-- A send's arrivals (`to`: a node or a list of nodes); receivers that run
-- no stage of the step are left out.
local function deliver(arrivals, params, at)
  local to = params.to
  local receivers = type(to) == "table" and to[1] ~= nil and to or { to }
  for _, node in ipairs(receivers) do
    local box = arrivals[node]
    if box then
      local name = params.as or params.tensor
      box[name] = box[name] or {}
      table.insert(box[name], at)
    end
  end
end

-- Each command's time: its result's ms, or with `even` the mean ms of
-- the stage's commands of its name.
local function command_times(cmds, results, even)
  local times, sums, counts = {}, {}, {}
  for i, c in ipairs(cmds) do
    times[i] = results[i] and results[i].ms or 0
    sums[c[1]], counts[c[1]] = (sums[c[1]] or 0) + times[i], (counts[c[1]] or 0) + 1
  end
  if even then
    for i, c in ipairs(cmds) do times[i] = sums[c[1]] / counts[c[1]] end
  end
  return times
end

-- Runs a stage's commands from its position as far as its waits allow;
-- returns whether it moved.
local function advance(stage, arrivals)
  local moved = false
  while stage.next <= #stage.cmds do
    local name, params = stage.cmds[stage.next][1], stage.cmds[stage.next][2]
    if name == "wait" then
      local ready = wait_ready(params, arrivals[stage.node])
      if not ready then return moved end
      stage.clock = math.max(stage.clock, ready)
    elseif name == "send" then
      deliver(arrivals, params, stage.clock)
    else
      stage.clock = stage.clock + stage.times[stage.next]
    end
    stage.next = stage.next + 1
    moved = true
  end
  return moved
end

-- The replayed span in ms, or nil when the waits cannot all be met (a
-- plan that waits for a tensor no stage sends).
function replay.span(plans, results, opts)
  local even = opts and opts.even
  local stages, arrivals = {}, {}
  for i, plan in ipairs(plans) do
    stages[i] = { node = plan.node, cmds = plan.cmds, times = command_times(plan.cmds, results[i], even),
                  next = 1, clock = 0 }
    arrivals[plan.node] = {}
  end
  repeat
    local moved = false
    for _, stage in ipairs(stages) do moved = advance(stage, arrivals) or moved end
  until not moved
  local span = 0
  for _, stage in ipairs(stages) do
    if stage.next <= #stage.cmds then return nil end
    span = math.max(span, stage.clock)
  end
  return span
end

return replay
