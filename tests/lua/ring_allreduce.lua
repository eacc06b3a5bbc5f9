-- Ring all-reduce of three peers on the none backend, written with the peer
-- primitives an algorithm library uses: each peer runs the whole algorithm
-- as one batch of range sends (add = true in the reduce-scatter, plain in
-- the all-gather) and waits for the arrival from its predecessor. The
-- batch first writes its input "x" (fresh peers, nothing made before; r2
-- computes at 1/20 of the speed, so the others reach the ring while it
-- still writes) and tells its predecessor it is ready; a peer sends only
-- after its successor's token. Checks: every peer ends with the
-- element-wise sum of the three inputs (all three bit-identical, within
-- float rounding of the sum computed here), each peer's batch returns one
-- result per command, the waits saw their predecessor, node handles work
-- inside the batch's nested tables.
local hn = require("hiernet")
local net = hn.network{ name = "ring", backend = "none" }
local n, m = 3, 1000 -- peers, elements per chunk
local nodes = {}
for i = 1, n do nodes[i] = net:node("r" .. i, { speed = i == 2 and 0.05 or nil }) end
net:start()

local function near(x, want, tol, what)
  assert(math.abs(x - want) <= tol, string.format("%s: got %.9g, want %.9g", what, x, want))
end

-- Peer i's input (seeded normal numbers, different per peer), written in
-- its ring batch: kept in "in", copied into "x"; then the ready token
-- to the predecessor (which adds into this x) and the wait for the
-- successor's (this peer adds into its x).
local PREP = 6
local function prep(i)
  local prev, next_node = nodes[(i - 1) % n + 1], nodes[(i + 1) % n + 1]
  return {
    { "tensor", { name = "in", size = n * m, fill = "normal", seed = i + 1, std = 3 } },
    { "scale", { x = "in", alpha = 1 } },
    { "copy", { src = "in", dst = "x" } },
    { "tensor", { name = "token", size = 1 } },
    { "send", { tensor = "token", to = prev, as = "ready" } },
    { "wait", { tensor = "ready", timeout = 30 } },
  }, next_node
end

local function chunk(k) return { (k % n) * m, m } end

-- The whole ring for peer i (0-based) as one batch: reduce-scatter, then
-- all-gather; arrivals all land in "x", one per step from the predecessor.
local function ring_batch(i)
  local cmds, next_node = prep(i)
  assert(#cmds == PREP)
  for s = 0, n - 2 do
    if s > 0 then cmds[#cmds + 1] = { "wait", { tensor = "x", timeout = 30 } } end
    cmds[#cmds + 1] = { "send", { tensor = "x", to = next_node, range = chunk(i - s), add = true } }
  end
  cmds[#cmds + 1] = { "wait", { tensor = "x", timeout = 30 } }
  for s = 0, n - 2 do
    cmds[#cmds + 1] = { "send", { tensor = "x", to = next_node, range = chunk(i + 1 - s) } }
    cmds[#cmds + 1] = { "wait", { tensor = "x", timeout = 30 } }
  end
  return cmds
end

local tasks = {}
for i = 0, n - 1 do
  tasks[i + 1] = hn.spawn(function()
    local cmds = ring_batch(i)
    local r = nodes[i + 1]:batch(cmds)
    assert(#r.results == #cmds, string.format("peer %d: %d results for %d commands", i, #r.results, #cmds))
    return r
  end)
end
local results = hn.wait_all(tasks)

for i = 0, n - 1 do
  local prev = nodes[(i - 1) % n + 1].name
  local succ = nodes[(i + 1) % n + 1].name
  local token = results[i + 1].results[PREP]
  assert(token.arrived[1] == "ready" and token.from[1] == succ, "peer " .. i .. ": the token of " .. succ)
  for k = PREP + 1, #results[i + 1].results do
    local res = results[i + 1].results[k]
    if res.arrived then
      assert(#res.arrived == 1 and res.arrived[1] == "x", "a wait claims one arrival on x")
      assert(res.from[1] == prev, "arrivals come from the predecessor " .. prev .. ", not " .. res.from[1])
    else
      assert(res.bytes == m * 4 and res.transfers == 1, "a chunk send moves one chunk")
    end
  end
end

-- Every peer holds the sum; the three are identical.
local out, inputs = {}, {}
for i, node in ipairs(nodes) do
  out[i] = node:read{ tensor = "x" }.values
  inputs[i] = node:read{ tensor = "in" }.values
end
for e = 1, n * m do
  local want = inputs[1][e] + inputs[2][e] + inputs[3][e]
  near(out[1][e], want, 1e-5 * (1 + math.abs(want)), "element " .. e)
  assert(out[2][e] == out[1][e] and out[3][e] == out[1][e], "peers disagree at element " .. e)
end
-- Versions: 2 (n - 1) receives per peer (range and add: one each).
for _, node in ipairs(nodes) do
  local v = node:norm{ x = "x" }.version
  assert(v == 1 + 2 * (n - 1), "version after the ring: " .. v)
end
hn.log(string.format("ring all-reduce of %d x %d floats on %d peers: %.2f ms (batch on r1)",
  n, m, n, results[1].ms))
net:stop()
