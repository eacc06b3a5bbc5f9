-- hiernet.algo.schedules: the all-reduce and all-gather schedules, as plain
-- data, with no network in them (hiernet.algo.allreduce runs them; every
-- name here is reachable from it too: ar.ring_schedule, ar.split,
-- ar.SEGMENT_BYTES, ...).
--
-- A reduce schedule is, per peer, a list of operations
--   { "send", to = q, range = {offset, count}, add = bool }   -- a range send
--   { "wait", from = {q, ...}, k = n }                         -- n arrivals from those peers
-- (peers numbered 1..N). A schedule is checked by running it on Lua arrays
-- with random delivery delays (tests/lua/algo_allreduce_schedules.lua).
--
-- Algorithms (S elements, N peers, link latency alpha, bandwidth beta):
--   ring             reduce-scatter then all-gather around the ring, N-1 + N-1
--                    steps of S/N: time 2 (N-1) (alpha + S / (N beta))
--   halving-doubling Rabenseifner: recursive halving reduce-scatter then
--                    recursive doubling all-gather over the largest power of
--                    two p <= N; the N - p extra peers first fold into a
--                    partner and get the result back at the end (any N)
--   tree             binary tree rooted at peer 1: reduce up, broadcast down
--   hierarchical     reduce inside each group to its leader, ring all-reduce
--                    among the leaders, broadcast back inside each group
-- Compressed data cannot be summed on the way: sched.gather_schedule makes
-- all-gathers along the same patterns.
local job = require("hiernet.algo.job")

local sched = {}
local fail = job.fail

-- Batches the peer runs at most (the peer's limit on commands per batch).
local BATCH_MAX = 256
sched.BATCH_MAX = BATCH_MAX

-- Contiguous ranges of n nearly equal parts of [offset, offset + size)
-- (sizes differ by at most one, the larger first): a ring's chunks, their
-- segments, the parameter servers' shards (ps.shard_ranges).
local function split(offset, size, n)
  local ranges = {}
  for i = 1, n do
    local count = size // n + ((i <= size % n) and 1 or 0)
    ranges[i] = { offset, count }
    offset = offset + count
  end
  return ranges
end
sched.split = split

-- ---- schedules ----

local function new_schedule(n)
  local s = {}
  for r = 1, n do s[r] = {} end
  return s
end

-- A send of a non-empty range and the wait it satisfies on the receiver.
local function transfer(s, from, to, range, add)
  if range[2] == 0 then return end
  s[from][#s[from] + 1] = { "send", to = to, range = range, add = add }
end

local function wait(s, r, from, k)
  if k > 0 then s[r][#s[r] + 1] = { "wait", from = from, k = k } end
end

-- Segments per chunk of a ring: chunks are cut into segments of about this
-- many bytes, and a peer forwards each segment as soon as it has arrived.
-- Without segments a peer's link to its successor idles at every step from
-- the end of its own send until the last byte of its predecessor's chunk has
-- crossed the link (one latency, plus the add); with them the next step's
-- first segment is already queued behind this step's last.
sched.SEGMENT_BYTES = 512 * 1024
local SEGMENTS_MAX = 8

-- How many segments a ring of n peers cuts each chunk of a size-element
-- tensor into: chunks of at least 2 segment sizes are cut, at most into
-- SEGMENTS_MAX, and never into more than a peer's batch holds.
function sched.ring_segments(n, size)
  if n < 2 then return 1 end
  local by_size = (size // n) * 4 // sched.SEGMENT_BYTES
  local by_batch = (BATCH_MAX - 16) // (4 * (n - 1))
  return math.max(1, math.min(by_size, SEGMENTS_MAX, by_batch))
end

-- Ring among the peers listed in `ring` (indices), over [0, size), each
-- chunk in `segs` segments: 2 (n - 1) steps, reduce-scatter then
-- all-gather. At step t a peer sends the chunk that arrived at step t - 1
-- (with its own added, in the reduce-scatter), segment by segment: it waits
-- for segment j of step t - 1, sends segment j of step t, and so on.
local function ring_ops(s, ring, size, segs)
  local n = #ring
  if n < 2 then return end
  local chunks = split(0, size, n)
  local function at(x) return ((x - 1) % n) + 1 end
  local steps = 2 * (n - 1)
  -- The chunk the peer at position pos sends at step t, and whether it adds.
  local function sent(pos, t)
    if t < n - 1 then return chunks[at(pos - t)], true end
    return chunks[at(pos + 1 - (t - (n - 1)))], false
  end
  for pos = 1, n do
    local me, succ, pred = ring[pos], ring[at(pos + 1)], ring[at(pos - 1)]
    for t = 0, steps do
      -- The segments of step t - 1's arrival are those of step t's send.
      local chunk, add = sent(t < steps and pos or pos - 1, math.min(t, steps - 1))
      local parts = split(chunk[1], chunk[2], segs)
      for j = 1, segs do
        if t > 0 then wait(s, me, { pred }, parts[j][2] > 0 and 1 or 0) end
        if t < steps then transfer(s, me, succ, parts[j], add) end
      end
    end
  end
end

function sched.ring_schedule(n, size, segs)
  local s, ring = new_schedule(n), {}
  for r = 1, n do ring[r] = r end
  ring_ops(s, ring, size, segs or sched.ring_segments(n, size))
  return s
end

-- Rabenseifner's halving-doubling for any n.
function sched.halving_doubling_schedule(n, size)
  local s = new_schedule(n)
  local p = 1
  while p * 2 <= n do p = p * 2 end
  local extra = n - p
  -- Peers 1..2*extra pair up: the second of each pair folds into the first.
  local active = {}
  for r = 1, n do
    local z = r - 1
    if z < 2 * extra then
      if z % 2 == 1 then
        transfer(s, r, r - 1, { 0, size }, true)
      else
        wait(s, r, { r + 1 }, size > 0 and 1 or 0)
        active[#active + 1] = r
      end
    else
      active[#active + 1] = r
    end
  end
  -- Recursive halving: at distance d, keep one half, send the other.
  local range = {}
  for i = 1, p do range[i] = { 0, size } end
  local d = p // 2
  local steps = {}
  while d >= 1 do
    for i = 1, p do
      local partner = ((i - 1) ~ d) + 1
      local lo, count = range[i][1], range[i][2]
      local half = count // 2
      local lower, upper = { lo, half }, { lo + half, count - half }
      local keep, give = lower, upper
      if (i - 1) & d ~= 0 then keep, give = upper, lower end
      transfer(s, active[i], active[partner], give, true)
      wait(s, active[i], { active[partner] }, keep[2] > 0 and 1 or 0)
      range[i] = keep
    end
    steps[#steps + 1] = d
    d = d // 2
  end
  -- Recursive doubling: send what I hold, receive the partner's half.
  for j = #steps, 1, -1 do
    local dd = steps[j]
    local new = {}
    for i = 1, p do
      local partner = ((i - 1) ~ dd) + 1
      transfer(s, active[i], active[partner], range[i], false)
      wait(s, active[i], { active[partner] }, range[partner][2] > 0 and 1 or 0)
      local a, b = range[i], range[partner]
      new[i] = { math.min(a[1], b[1]), a[2] + b[2] }
    end
    range = new
  end
  -- The folded peers get the result back.
  for z = 1, 2 * extra - 1, 2 do
    transfer(s, z, z + 1, { 0, size }, false)
    wait(s, z + 1, { z }, size > 0 and 1 or 0)
  end
  return s
end

-- Binary tree rooted at peer 1: children of i are 2i and 2i + 1.
function sched.tree_schedule(n, size)
  local s = new_schedule(n)
  local all = { 0, size }
  for r = 1, n do
    local kids = {}
    for _, c in ipairs{ 2 * r, 2 * r + 1 } do if c <= n then kids[#kids + 1] = c end end
    wait(s, r, kids, size > 0 and #kids or 0)
    if r > 1 then
      transfer(s, r, r // 2, all, true)
      wait(s, r, { r // 2 }, size > 0 and 1 or 0)
    end
    for _, c in ipairs(kids) do transfer(s, r, c, all, false) end
  end
  return s
end

-- groups: lists of peer indices; the first of each is its leader.
function sched.hierarchical_schedule(n, size, groups)
  local s = new_schedule(n)
  local all, leaders = { 0, size }, {}
  for g, members in ipairs(groups) do
    local leader = members[1]
    leaders[g] = leader
    for j = 2, #members do transfer(s, members[j], leader, all, true) end
    wait(s, leader, { table.unpack(members, 2) }, size > 0 and (#members - 1) or 0)
  end
  ring_ops(s, leaders, size, sched.ring_segments(#leaders, size))
  for _, members in ipairs(groups) do
    for j = 2, #members do
      transfer(s, members[1], members[j], all, false)
      wait(s, members[j], { members[1] }, size > 0 and 1 or 0)
    end
  end
  return s
end

sched.algos = { "ring", "halving-doubling", "tree", "hierarchical" }

-- ---- all-gather schedules (compressed training) ----
--
-- Compressed updates cannot be summed on the way, so with compression each
-- peer's update (item r, compressed on peer r) must reach every peer, which
-- adds up all N decompressed. The items travel along the algorithm's own
-- pattern: around the ring, up the tree and back down, by recursive
-- doubling, or to the group leaders, around their ring and back. A schedule
-- is per peer a list of
--   { "send", to = {q, ...}, item = x }   -- item x to those peers
--   { "wait", from = q, items = {x, ...} } -- those items from q
-- and every peer receives every other peer's item exactly once
-- (tests/lua/algo_allreduce_schedules.lua checks it on Lua arrays).

local function gather_send(s, r, to, item)
  if #to > 0 then s[r][#s[r] + 1] = { "send", to = to, item = item } end
end

local function gather_wait(s, r, from, items)
  if #items > 0 then s[r][#s[r] + 1] = { "wait", from = from, items = items } end
end

-- The ring among `ring` (peer indices) passing sets of items: at step t the
-- peer at position pos forwards the set that started at position pos - t.
-- sets[pos]: the items position pos starts with.
local function ring_gather(s, ring, sets)
  local n = #ring
  local function at(x) return ((x - 1) % n) + 1 end
  for pos = 1, n do
    local me, succ, pred = ring[pos], ring[at(pos + 1)], ring[at(pos - 1)]
    for t = 0, n - 2 do
      for _, x in ipairs(sets[at(pos - t)]) do gather_send(s, me, { succ }, x) end
      gather_wait(s, me, pred, sets[at(pos - 1 - t)])
    end
  end
end

function sched.ring_gather_schedule(n)
  local s, ring, sets = new_schedule(n), {}, {}
  for r = 1, n do ring[r], sets[r] = r, { r } end
  ring_gather(s, ring, sets)
  return s
end

-- Binary tree rooted at peer 1: items go up (each peer forwards its
-- subtree's), then down (each peer sends a child what is outside the
-- child's subtree).
function sched.tree_gather_schedule(n)
  local s, sub = new_schedule(n), {}
  for r = n, 1, -1 do
    sub[r] = { r }
    for _, c in ipairs{ 2 * r, 2 * r + 1 } do
      if c <= n then table.move(sub[c], 1, #sub[c], #sub[r] + 1, sub[r]) end
    end
  end
  local function outside(r)
    local inside, out = {}, {}
    for _, x in ipairs(sub[r]) do inside[x] = true end
    for x = 1, n do if not inside[x] then out[#out + 1] = x end end
    return out
  end
  for r = 1, n do
    local kids = {}
    for _, c in ipairs{ 2 * r, 2 * r + 1 } do if c <= n then kids[#kids + 1] = c end end
    for _, c in ipairs(kids) do gather_wait(s, r, c, sub[c]) end
    if r > 1 then
      for _, x in ipairs(sub[r]) do gather_send(s, r, { r // 2 }, x) end
      gather_wait(s, r, r // 2, outside(r))
    end
    for x = 1, n do
      local to = {}
      for _, c in ipairs(kids) do
        local mine = false
        for _, y in ipairs(sub[c]) do if y == x then mine = true end end
        if not mine then to[#to + 1] = c end
      end
      gather_send(s, r, to, x)
    end
  end
  return s
end

-- Recursive doubling over p = 2^floor(log2 n) peers: at distance d = 1, 2,
-- 4, ... each exchanges everything it holds with its partner. The n - p
-- extra peers first hand their item to a partner and get the rest last.
function sched.halving_doubling_gather_schedule(n)
  local s = new_schedule(n)
  local p = 1
  while p * 2 <= n do p = p * 2 end
  local extra = n - p
  local active, held = {}, {}
  for r = 1, n do
    local z = r - 1
    if z < 2 * extra and z % 2 == 1 then
      gather_send(s, r, { r - 1 }, r)
    else
      active[#active + 1] = r
      held[#active] = { r }
      if z < 2 * extra then
        gather_wait(s, r, r + 1, { r + 1 })
        held[#active][2] = r + 1
      end
    end
  end
  local d = 1
  while d < p do
    local new = {}
    for i = 1, p do
      local partner = ((i - 1) ~ d) + 1
      for _, x in ipairs(held[i]) do gather_send(s, active[i], { active[partner] }, x) end
      gather_wait(s, active[i], active[partner], held[partner])
      new[i] = table.move(held[partner], 1, #held[partner], #held[i] + 1, table.move(held[i], 1, #held[i], 1, {}))
    end
    held, d = new, d * 2
  end
  for z = 1, 2 * extra - 1, 2 do
    local rest = {}
    for x = 1, n do if x ~= z + 1 then rest[#rest + 1] = x end end
    for _, x in ipairs(rest) do gather_send(s, z, { z + 1 }, x) end
    gather_wait(s, z + 1, z, rest)
  end
  return s
end

-- Members hand their item to their leader (the first of the group), the
-- leaders pass their groups' items around their ring, and each leader
-- sends its members every item but their own.
function sched.hierarchical_gather_schedule(n, groups)
  local s, leaders, sets = new_schedule(n), {}, {}
  for g, members in ipairs(groups) do
    local leader = members[1]
    leaders[g], sets[g] = leader, { leader }
    for j = 2, #members do
      gather_send(s, members[j], { leader }, members[j])
      sets[g][#sets[g] + 1] = members[j]
    end
    for j = 2, #members do gather_wait(s, leader, members[j], { members[j] }) end
  end
  ring_gather(s, leaders, sets)
  for _, members in ipairs(groups) do
    for x = 1, n do
      local to = {}
      for j = 2, #members do if members[j] ~= x then to[#to + 1] = members[j] end end
      gather_send(s, members[1], to, x)
    end
    for j = 2, #members do
      local rest = {}
      for x = 1, n do if x ~= members[j] then rest[#rest + 1] = x end end
      gather_wait(s, members[j], members[1], rest)
    end
  end
  return s
end

function sched.gather_schedule(algo, n, groups)
  if algo == "ring" then return sched.ring_gather_schedule(n) end
  if algo == "halving-doubling" then return sched.halving_doubling_gather_schedule(n) end
  if algo == "tree" then return sched.tree_gather_schedule(n) end
  if algo == "hierarchical" then return sched.hierarchical_gather_schedule(n, groups) end
  fail("allreduce: unknown algo '%s' (%s)", tostring(algo), table.concat(sched.algos, ", "))
end

-- The reduce schedule of `algo` (sched.algos) for n peers over size
-- elements; groups (lists of peer indices) for "hierarchical".
function sched.schedule(algo, n, size, groups)
  if algo == "ring" then return sched.ring_schedule(n, size) end
  if algo == "halving-doubling" then return sched.halving_doubling_schedule(n, size) end
  if algo == "tree" then return sched.tree_schedule(n, size) end
  if algo == "hierarchical" then return sched.hierarchical_schedule(n, size, groups) end
  fail("allreduce: unknown algo '%s' (%s)", tostring(algo), table.concat(sched.algos, ", "))
end

return sched
