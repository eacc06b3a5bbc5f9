-- Ring all-reduce of three peers on the none backend, written with the peer
-- primitives an algorithm library uses: each peer runs the whole algorithm
-- as one batch of range sends (add = true in the reduce-scatter, plain in
-- the all-gather) and waits for the arrival from its predecessor. Checks:
-- every peer ends with the element-wise sum of the three inputs (all three
-- bit-identical, within float rounding of the sum computed here), each
-- peer's batch returns one result per command, the waits saw their
-- predecessor, node handles work inside the batch's nested tables.
local hn = require("hiernet")
local net = hn.network{ name = "ring", backend = "none" }
local n, m = 3, 1000 -- peers, elements per chunk
local nodes = {}
for i = 1, n do nodes[i] = net:node("r" .. i) end
net:start()

local function near(x, want, tol, what)
  assert(math.abs(x - want) <= tol, string.format("%s: got %.9g, want %.9g", what, x, want))
end

-- Inputs: seeded normal numbers, different per peer.
local inputs = {}
for i, node in ipairs(nodes) do
  local r = node:tensor{ name = "x", size = n * m, fill = "normal", seed = i, std = 3 }
  assert(r.version == 1, "a new tensor is version 1")
  inputs[i] = node:read{ tensor = "x" }.values
end

local function chunk(k) return { (k % n) * m, m } end

-- The whole ring for peer i (0-based) as one batch: reduce-scatter, then
-- all-gather; arrivals all land in "x", one per step from the predecessor.
local function ring_batch(i)
  local next_node = nodes[(i + 1) % n + 1]
  local cmds = {}
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
  for _, res in ipairs(results[i + 1].results) do
    if res.arrived then
      assert(#res.arrived == 1 and res.arrived[1] == "x", "a wait claims one arrival on x")
      assert(res.from[1] == prev, "arrivals come from the predecessor " .. prev .. ", not " .. res.from[1])
    else
      assert(res.bytes == m * 4 and res.transfers == 1, "a chunk send moves one chunk")
    end
  end
end

-- Every peer holds the sum; the three are identical.
local out = {}
for i, node in ipairs(nodes) do out[i] = node:read{ tensor = "x" }.values end
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
