-- The all-reduce schedules of hiernet.algo.allreduce run on Lua arrays with
-- random delivery delays (no peers): for N = 2..9, sizes not divisible by N
-- and every algorithm, every peer must end with the exact element-wise sum
-- (integer data, so the check is exact), whatever order messages arrive in;
-- and the all-gathers of compressed training give every peer every other
-- peer's item exactly once along each algorithm's pattern.
local ar = require("hiernet.algo.allreduce")

-- Takes the next message to deliver out of flight: the oldest of a random
-- pair's (one connection per pair keeps its order).
local function take_message(flight, rng)
  local m = flight[rng(#flight)]
  for j, f in ipairs(flight) do
    if f.from == m.from and f.to == m.to then return table.remove(flight, j) end
  end
end

-- Steps every peer (try_run(r): true when it moved) and delivers one
-- message at a time (deliver(m)) until nothing moves any more.
local function run_until_quiet(n, try_run, flight, rng, deliver)
  while true do
    local moved = false
    for r = 1, n do moved = try_run(r) or moved end
    if #flight > 0 then
      deliver(take_message(flight, rng))
      moved = true
    end
    if not moved then return end
  end
end

-- Peer r ran its whole schedule.
local function check_finished(schedule, pc, r)
  if pc[r] <= #schedule[r] then error(string.format("peer %d stuck at operation %d of %d", r, pc[r], #schedule[r])) end
end

-- Runs schedule over data (data[r] an array), delivering in-flight messages
-- in a random order (but in order between one sender and one receiver, as
-- one connection does). A wait claims arrivals from its senders in arrival order.
local function simulate(schedule, data, rng)
  local n = #schedule
  local pc, flight, arrived = {}, {}, {}
  for r = 1, n do pc[r], arrived[r] = 1, {} end
  local function try_run(r)
    local ops, moved = schedule[r], false
    while pc[r] <= #ops do
      local op = ops[pc[r]]
      if op[1] == "send" then
        local off, count = op.range[1], op.range[2]
        local values = {}
        for e = 1, count do values[e] = data[r][off + e] end
        flight[#flight + 1] = { to = op.to, from = r, off = off, values = values, add = op.add }
      else
        local from = {}
        for _, q in ipairs(op.from) do from[q] = true end
        local got = {}
        for j, a in ipairs(arrived[r]) do
          if not a.claimed and from[a.from] and #got < op.k then got[#got + 1] = j end
        end
        if #got < op.k then break end
        for _, j in ipairs(got) do arrived[r][j].claimed = true end
      end
      pc[r], moved = pc[r] + 1, true
    end
    return moved
  end
  run_until_quiet(n, try_run, flight, rng, function(m)
    for e, v in ipairs(m.values) do
      local i = m.off + e
      data[m.to][i] = m.add and (data[m.to][i] + v) or v
    end
    table.insert(arrived[m.to], { from = m.from })
  end)
  for r = 1, n do
    check_finished(schedule, pc, r)
    for _, a in ipairs(arrived[r]) do
      if not a.claimed then error(string.format("peer %d: an arrival from %d was never waited for", r, a.from)) end
    end
  end
end

local function check_algo(algo, n, size, groups, seed, segs)
  math.randomseed(seed)
  local data, want = {}, {}
  for i = 1, size do want[i] = 0 end
  for r = 1, n do
    data[r] = {}
    for i = 1, size do
      data[r][i] = math.random(-1000, 1000)
      want[i] = want[i] + data[r][i]
    end
  end
  local schedule = segs and ar.ring_schedule(n, size, segs) or ar.schedule(algo, n, size, groups)
  simulate(schedule, data, function(m) return math.random(m) end)
  for r = 1, n do
    for i = 1, size do
      if data[r][i] ~= want[i] then
        error(string.format("%s N=%d size=%d: peer %d element %d is %d, the sum is %d", algo, n, size, r,
                            i, data[r][i], want[i]))
      end
    end
  end
  local sends = 0
  for r = 1, n do for _, op in ipairs(schedule[r]) do if op[1] == "send" then sends = sends + 1 end end end
  return sends
end

-- Random groups of 1..N peers covering them all.
local function random_groups(n)
  local order = {}
  for r = 1, n do order[r] = r end
  for i = n, 2, -1 do local j = math.random(i); order[i], order[j] = order[j], order[i] end
  local groups, i = {}, 1
  while i <= n do
    local size = math.random(1, n - i + 1)
    groups[#groups + 1] = table.move(order, i, i + size - 1, 1, {})
    i = i + size
  end
  return groups
end

local checked = 0
for n = 2, 9 do
  for _, size in ipairs{ 1, n - 1, n + 1, 7 * n + 3, 100 } do
    for trial = 1, 3 do
      local seed = n * 1000 + size * 10 + trial
      for _, algo in ipairs{ "ring", "halving-doubling", "tree" } do
        check_algo(algo, n, size, nil, seed)
        checked = checked + 1
      end
      math.randomseed(seed)
      check_algo("hierarchical", n, size, random_groups(n), seed)
      checked = checked + 1
    end
  end
end

-- The ring in segments (a peer forwards each segment as soon as it has
-- arrived): more segments than some chunks have elements, too.
for n = 2, 9 do
  for _, size in ipairs{ 1, n + 1, 7 * n + 3, 100 } do
    for _, segs in ipairs{ 2, 3, 8 } do
      check_algo("ring", n, size, nil, n * 100 + size + segs, segs)
      checked = checked + 1
    end
  end
end
assert(check_algo("ring", 5, 100, nil, 1, 4) == 5 * 2 * 4 * 4, "ring: 2 (N-1) sends per segment")
-- Segments: 1 for small tensors, more for large ones, within a batch.
assert(ar.ring_segments(4, 1000) == 1, "a small tensor is not cut")
assert(ar.ring_segments(8, 4 * 1024 * 1024) == 4, "16 MB over 8 peers: 2 MB chunks in 4 segments")
assert(ar.ring_segments(4, 64 * 1024 * 1024) == 8, "at most 8 segments")
assert(ar.ring_segments(64, 64 * 1024 * 1024) * 4 * 63 <= 256, "a peer's commands fit a batch")

-- ---- all-gather schedules (compressed training) ----

-- Runs an all-gather schedule with random delivery (in order per pair):
-- every peer must end holding every item, receive none twice, and send
-- only items it holds. Returns the number of item sends.
local function simulate_gather(schedule, rng)
  local n = #schedule
  local pc, flight, holds, pending, sends = {}, {}, {}, {}, 0
  for r = 1, n do pc[r], holds[r], pending[r] = 1, { [r] = true }, {} end
  local function try_run(r)
    local ops, moved = schedule[r], false
    while pc[r] <= #ops do
      local op = ops[pc[r]]
      if op[1] == "send" then
        if not holds[r][op.item] then error(string.format("peer %d sends item %d it does not hold", r, op.item)) end
        for _, q in ipairs(op.to) do
          flight[#flight + 1] = { from = r, to = q, item = op.item }
          sends = sends + 1
        end
      else
        for _, x in ipairs(op.items) do
          if pending[r][x] ~= op.from then return moved end
        end
        for _, x in ipairs(op.items) do pending[r][x], holds[r][x] = nil, true end
      end
      pc[r], moved = pc[r] + 1, true
    end
    return moved
  end
  run_until_quiet(n, try_run, flight, rng, function(m)
    if holds[m.to][m.item] or pending[m.to][m.item] then
      error(string.format("peer %d gets item %d twice", m.to, m.item))
    end
    pending[m.to][m.item] = m.from
  end)
  for r = 1, n do
    check_finished(schedule, pc, r)
    for x = 1, n do
      if not holds[r][x] then error(string.format("peer %d never got item %d", r, x)) end
    end
  end
  return sends
end

local gathered = 0
for n = 1, 9 do
  for trial = 1, 3 do
    math.randomseed(n * 31 + trial)
    local rng = function(m) return math.random(m) end
    for _, algo in ipairs{ "ring", "halving-doubling", "tree" } do
      local sends = simulate_gather(ar.gather_schedule(algo, n), rng)
      -- every peer receives each other peer's item once
      assert(sends == n * (n - 1), string.format("%s N=%d: %d item sends, want %d", algo, n, sends, n * (n - 1)))
      gathered = gathered + 1
    end
    simulate_gather(ar.gather_schedule("hierarchical", n, random_groups(n)), rng)
    gathered = gathered + 1
  end
end
assert(gathered == 9 * 3 * 4, "gather schedules checked")

-- The ring moves 2 (N-1) chunks per peer: 2 (N-1) sends each.
assert(check_algo("ring", 5, 100, nil, 1) == 5 * 2 * 4, "ring: 2 (N-1) sends per peer")
-- Halving-doubling on a power of two: 2 log2 N sends per peer.
assert(check_algo("halving-doubling", 8, 100, nil, 1) == 8 * 2 * 3, "halving-doubling: 2 log N sends per peer")
-- Tree: one send up per non-root, one down per non-root.
assert(check_algo("tree", 7, 100, nil, 1) == 2 * 6, "tree: 2 (N-1) sends")

print(string.format("algo_allreduce_schedules: %d schedules and %d all-gathers checked", checked, gathered))
