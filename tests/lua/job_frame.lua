-- The job's round-and-fault frame (lua/hiernet/algo/job.lua): J:rounds runs
-- a scripted loop and every count is checked exactly (rounds recorded, the
-- recovery after a change, a round a fault cut dropped and run again, an
-- error that is no fault's raised as it is, a synchronous job's fault error
-- raised instead of the step's); J:abort_between ends a wait on the lost
-- node's partner and J:abort_among the waits of a whole group, at once
-- rather than at their timeout. J:rounds sees a change by itself and
-- recovers once the change's aborts are answered; J:worker_loops steps
-- every worker on its own, a worker away waits, and one that stays away
-- does not keep the job from its end; an engine's hooks (ps: own_steps,
-- cut_short, failed, finished) are called as documented.
local hn = require("hiernet")
local job = require("hiernet.algo.job")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net, _, w = T.network("frame", 3, { no_server = true })

-- A job with no set-up: J:rounds needs only the stop conditions and clock.
local function new_job(steps)
  local J = job.new("frame", { workers = w, steps = steps, progress = false }, {})
  J:start_clock()
  return J
end

-- A loop of 5 rounds. The first asks with nobody taking part (a sleep, no
-- step); round 2's first try is cut by a fault (state.changed set while it
-- runs): dropped, recovered once, run again with the members of then.
do
  local J, state = new_job(5), {}
  local asked, tries, recovered, recorded = 0, 0, {}, {}
  J:rounds{
    state = state,
    members = function()
      asked = asked + 1
      if asked == 1 then return {} end
      return tries >= 2 and { 1, 3 } or { 1, 2, 3 }
    end,
    recover = function(ids) recovered[#recovered + 1] = #ids end,
    step = function(ids)
      tries = tries + 1
      if tries == 2 then
        state.changed = true -- what a fault hook does
        error("wait: aborted")
      end
      return tries, #ids
    end,
    record = function(ids, try, n)
      T.eq(n, #ids, "record gets what step returned")
      J.steps = J.steps + 1
      recorded[#recorded + 1] = try
    end,
  }
  T.eq(asked, 7, "members asked: the empty one, 6 tries")
  T.eq(tries, 6, "steps tried: 5 recorded and the cut one")
  T.eq(table.concat(recorded, ","), "1,3,4,5,6", "the cut try is not recorded")
  T.eq(#recovered, 1, "one recovery after one change")
  T.eq(recovered[1], 2, "the recovery sees the members of the next round")
  T.eq(state.changed, false, "the change is cleared by the recovery")
  T.eq(J:stopped(), "steps", "the loop ends at the stop condition")
end

-- An error with no change behind it is no fault's: raised as it is.
do
  local J = new_job(5)
  local ok, err = pcall(J.rounds, J, {
    members = function() return { 1 } end,
    step = function() error("bad step", 0) end,
  })
  T.eq(ok, false, "a step's own error ends the loop")
  T.eq(err, "bad step", "raised as it is")
end

-- A synchronous job that stopped at a fault raises the fault's error (it
-- names the worker), not the aborted wait's.
do
  local J = new_job(5)
  local ok, err = pcall(J.rounds, J, {
    members = function() return { 1 } end,
    step = function()
      J.fault_error = "frame: step 0: worker w2 was killed"
      J:stop("fault")
      error("wait: aborted", 0)
    end,
  })
  T.eq(ok, false, "a fault of a synchronous job ends the loop")
  T.eq(err, "frame: step 0: worker w2 was killed", "the fault's error")
end

-- J:abort_between(lost, partners): a partner's wait on the lost node ends
-- at once (its timeout is 30 s).
local function waiting(node, from)
  return hn.spawn(function()
    local t0 = hn.now()
    local ok, err = pcall(node.wait, node, { tensor = "x", from = from, timeout = 30 })
    return ok, err, hn.now() - t0
  end)
end

-- The partner's wait (a waiting() task) failed at an abort.
local function expect_aborted(task)
  local ok, err, s = task:wait()
  T.eq(ok, false, "the partner's wait fails")
  T.le(s, 10, "it fails at the abort, not at its 30 s timeout")
  assert(tostring(err):find("abort", 1, true), "the wait says it was aborted: " .. tostring(err))
end

do
  local J = new_job(1)
  local task = waiting(w[2], { w[1] })
  hn.sleep(0.2) -- the wait is in
  local aborts = J:abort_between(w[1], { w[2], w[3] })
  T.eq(#aborts, 3, "one abort on the lost node, one per partner")
  hn.wait_all(aborts)
  expect_aborted(task)
end

-- J:abort_among(nodes): every node's wait on the others ends.
do
  local J = new_job(1)
  local t2, t3 = waiting(w[2], { w[3] }), waiting(w[3], { w[1] })
  hn.sleep(0.2)
  local aborts = J:abort_among(w)
  T.eq(#aborts, 3, "one abort per node")
  hn.wait_all(aborts)
  for k, task in ipairs{ t2, t3 } do
    local ok, _, s = task:wait()
    T.eq(ok, false, "wait " .. k .. " fails")
    T.le(s, 10, "wait " .. k .. " fails at the abort")
  end
end

-- J:rounds sees a change by itself (a worker away, through J:set_away, as
-- the fault events do: no hook of the family marks it), drops the round it
-- cut, and runs recover only once every abort of the change is answered.
do
  local J, tries, recovered = new_job(3), 0, {}
  J:rounds{
    members = function() return { 1, 3 } end,
    recover = function()
      local pending = 0
      for _, t in ipairs(J.aborts or {}) do if t:status() ~= "done" then pending = pending + 1 end end
      recovered[#recovered + 1] = pending
    end,
    step = function()
      tries = tries + 1
      if tries == 1 then
        J:set_away(2, true, "is away (test)")
        J:abort_between(w[2], { w[1], w[3] })
        error("wait: aborted", 0)
      end
    end,
    record = function() J.steps = J.steps + 1 end,
  }
  T.eq(tries, 4, "steps tried: the cut one and 3 recorded")
  T.eq(#recovered, 1, "one recovery")
  T.eq(recovered[1], 0, "aborts still unanswered at the recovery")
  J:set_away(2, false, "back (test)")
end

-- J:worker_loops: every worker steps 1..steps on its own; one away from
-- its first step and back later steps again (a new step of its own, none
-- while away); one that stays away does not keep the job from its end.
do
  local J = new_job(4)
  local made, away_steps = { {}, {}, {} }, 0
  J.steps = 0
  local returned = false
  J:worker_loops{
    step = function(i, t)
      made[i][#made[i] + 1] = t
      if not J:alive(i) then away_steps = away_steps + 1 end
      if i == 2 and t == 1 then
        J:set_away(2, true, "is away (test)")
        hn.spawn(function()
          hn.sleep(0.1)
          J:set_away(2, false, "back (test)")
          returned = true
        end)
      end
      if i == 3 and t == 2 then J:set_away(3, true, "is away for good (test)") end
      -- worker 1 goes no further than step 3 before worker 2 is back
      while i == 1 and t == 3 and not returned do hn.sleep(0.01) end
    end,
  }
  T.eq(returned, true, "worker 2 came back before the end")
  T.eq(table.concat(made[1], ","), "1,2,3,4", "worker 1's steps")
  T.eq(table.concat(made[2], ","), "1,2,3,4", "worker 2's steps: it goes on where it was")
  T.eq(table.concat(made[3], ","), "1,2", "worker 3's steps: none while away")
  T.eq(J.steps, 4, "J.steps: the fewest steps of a live worker")
end

-- J:worker_loops with an engine's hooks (ps): own_steps leaves J.steps to
-- the family (here: every step counts one) and ends no worker at `steps`
-- by itself; a step cut while its worker is away goes to cut_short, a live
-- worker's failure to failed (not J:worker_failed: the job goes on), and
-- finished hears of every task's end once.
do
  local J = new_job(6)
  J.steps = 0
  local made, cut, failed, finished = { 0, 0, 0 }, {}, {}, {}
  J:worker_loops{
    own_steps = true,
    step = function(i, t)
      made[i] = made[i] + 1
      if i == 2 and t == 1 and #cut == 0 then
        J:set_away(2, true, "is away (test)")
        hn.spawn(function() hn.sleep(0.05); J:set_away(2, false, "back (test)") end)
        error("wait: aborted", 0)
      end
      if i == 3 and t == 1 then error("step: broken", 0) end
      J.steps = J.steps + 1
      hn.sleep(0.02)
    end,
    cut_short = function(i) cut[#cut + 1] = i end,
    failed = function(i, err) failed[#failed + 1] = i .. ":" .. err end,
    finished = function(i) finished[i] = (finished[i] or 0) + 1 end,
  }
  T.eq(J:stopped(), "steps", "the family's count stopped the job")
  T.eq(J.steps >= 6, true, "J.steps is the family's (the frame does not set it)")
  T.eq(table.concat(cut, ","), "2", "the step cut while away")
  T.eq(table.concat(failed, ","), "3:step: broken", "the live worker's failure, to the family")
  T.eq(made[3], 1, "the failed worker's task ended")
  T.eq(made[2] >= 2, true, "worker 2 stepped again once back")
  T.eq(J.dead[3], nil, "failed replaces J:worker_failed")
  T.eq(string.format("%s,%s,%s", finished[1], finished[2], finished[3]), "1,1,1", "finished: once per task")
end

-- J:abort_lost(node, partners): a partner's wait on a node lost with its
-- machine ends at once (its timeout is 30 s); the lost node itself is
-- asked nothing.
do
  local J = new_job(1)
  local task = waiting(w[2], { w[1] })
  hn.sleep(0.2) -- the wait is in
  J:abort_lost(w[1], { w[1], w[2] })
  T.eq(#J.aborts, 1, "one abort: the partner's, none on the lost node")
  hn.wait_all(J.aborts)
  expect_aborted(task)
end

-- A failed step is the fault's only when a node it involves (the worker,
-- its hubs, its partners) was killed since it began: w3's kill during w1's
-- step leaves w1's own error w1's (not retried: `failed` hears it), while
-- w2, whose step involves w3 (partners), has its failure taken for the
-- kill's and steps again.
do
  local J = new_job(4)
  J.steps = 0
  J:watch_faults{ partners = function(i) return i == 2 and { w[3] } or {} end }
  local failed, tries, killed = {}, { 0, 0 }, false
  J:worker_loops{
    own_steps = true,
    step = function(i, t)
      if i == 3 then -- steps until its kill is heard (its task then ends)
        hn.sleep(0.01)
        return
      end
      tries[i] = tries[i] + 1
      if tries[i] == 1 then
        if i == 1 then
          w[3]:kill()
          killed = true
          hn.sleep(0.05) -- the kill's listeners ran
          error("step: broken", 0)
        end
        while not killed do hn.sleep(0.01) end
        error("send: to w3: connection reset", 0)
      end
      J.steps = J.steps + 1
      hn.sleep(0.01)
    end,
    cut_short = function() end,
    failed = function(i, err) failed[#failed + 1] = i .. ":" .. err end,
  }
  J.closed = true -- its kill listener falls silent
  T.eq(table.concat(failed, ","), "1:step: broken", "w1's own error, though w3 was killed meanwhile")
  T.eq(tries[1], 1, "w1 did not step again")
  T.eq(tries[2] >= 2, true, "w2's failure was the kill's: it stepped again (" .. tries[2] .. " tries)")
  T.eq(J.killed[3], true, "w3 was killed")
  w[3]:restart()
end

-- J:others(i): the other workers, in order.
do
  local J = new_job(1)
  local names = {}
  for _, n in ipairs(J:others(2)) do names[#names + 1] = n.name end
  T.eq(table.concat(names, ","), "w1,w3", "others of worker 2")
end

net:stop()
print("job_frame: ok")
