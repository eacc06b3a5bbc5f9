-- Scenario half of tools/bench/primitives: the peer primitives of the
-- algorithm library against their plain counterparts, measured alternately
-- in one run on the none backend (loopback). Prints "result KEY VALUE".
--   1. A 16 MB add-receive (send{add = true}, summed as it arrives) next to
--      a plain receive of the same tensor; and a range add next to a plain
--      range receive: medians over REPS alternated sends.
--   2. Round trips: a one-command batch next to the same command as a
--      request of its own (CALLS each, alternated); one batch of CALLS
--      commands next to CALLS pipelined requests.
--   --set mb=16 reps=51 calls=100
local hn = require("hiernet")
local mb = hn.param("mb", 16)
local reps = hn.param("reps", 51)
local calls = hn.param("calls", 100)
local net = hn.network{ name = "prims", backend = "none" }
local a, b = net:node("a"), net:node("b")
net:start()

local function result(key, value) print(string.format("result %s %s", key, tostring(value))) end
local function median(t) table.sort(t) return t[#t // 2 + 1] end

local n = mb * 1024 * 1024 // 4
a:tensor{ name = "x", size = n, fill = "uniform", seed = 1 }
b:tensor{ name = "acc", size = n }
b:tensor{ name = "dst", size = n }
-- Warm-up: connections, the receiver's tensors and spares, staging buffers.
for _ = 1, 3 do
  a:send{ tensor = "x", to = b }
  a:send{ tensor = "x", to = b, as = "acc", add = true }
  a:send{ tensor = "x", to = b, as = "dst", range = { 0, n } }
  a:send{ tensor = "x", to = b, as = "acc", range = { 0, n }, add = true }
end
local plain, add, rplain, radd = {}, {}, {}, {}
for i = 1, reps do
  plain[i] = a:send{ tensor = "x", to = b }.ms
  add[i] = a:send{ tensor = "x", to = b, as = "acc", add = true }.ms
  rplain[i] = a:send{ tensor = "x", to = b, as = "dst", range = { 0, n } }.ms
  radd[i] = a:send{ tensor = "x", to = b, as = "acc", range = { 0, n }, add = true }.ms
end
result("add_mb", mb)
result("plain_ms", string.format("%.3f", median(plain)))
result("add_ms", string.format("%.3f", median(add)))
result("range_plain_ms", string.format("%.3f", median(rplain)))
result("range_add_ms", string.format("%.3f", median(radd)))

-- Round trips of a worker command (norm of a small tensor), alone and as a
-- one-command batch.
a:tensor{ name = "small", size = 16, fill = 1 }
local now = hn.now
local single, batched = {}, {}
for _ = 1, 50 do a:norm{ x = "small" } a:batch{ { "norm", { x = "small" } } } end
for i = 1, calls do
  local t0 = now()
  a:norm{ x = "small" }
  single[i] = (now() - t0) * 1e6
  t0 = now()
  a:batch{ { "norm", { x = "small" } } }
  batched[i] = (now() - t0) * 1e6
end
result("calls", calls)
result("request_us", string.format("%.1f", median(single)))
result("batch1_us", string.format("%.1f", median(batched)))
-- CALLS commands: one batch, or CALLS requests in flight at once.
local cmds = {}
for i = 1, calls do cmds[i] = { "norm", { x = "small" } } end
local big, piped = {}, {}
for i = 1, 21 do
  local t0 = now()
  a:batch(cmds)
  big[i] = (now() - t0) * 1e6 / calls
  t0 = now()
  local tasks = {}
  for k = 1, calls do tasks[k] = hn.spawn(function() return a:norm{ x = "small" } end) end
  hn.wait_all(tasks)
  piped[i] = (now() - t0) * 1e6 / calls
end
result("batchN_us_per_command", string.format("%.2f", median(big)))
result("pipelined_us_per_command", string.format("%.2f", median(piped)))
net:stop()
