-- hiernet.algo.allreduce on real peers (backend none): every algorithm gives
-- every peer the element-wise sum (to 1e-5) for N = 2..9 and sizes that N
-- does not divide, into a tensor new to the peers and still being written
-- when the all-reduce starts, one peer 20 times slower; data-parallel
-- training over each algorithm learns.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "ar", backend = "none" }
local edges = { net:node("e1", { tier = "edge" }), net:node("e2", { tier = "edge" }) }
local cloud = net:node("cloud", { tier = "cloud" })
net:link(cloud, edges[1]); net:link(cloud, edges[2])
local peers = {}
for i = 1, 9 do
  -- p2 computes at 1/20 of the speed: the others' all-reduce traffic meets
  -- its tensors while it still writes them
  peers[i] = net:node("p" .. i, { tier = "terminal", speed = i == 2 and 0.05 or nil })
  net:link(edges[(i - 1) % 2 + 1], peers[i])
end
net:start()

-- Default groups: the terminals under each edge.
local groups = ar.default_groups(peers)
T.eq(#groups, 2, "default groups")
T.eq(table.concat(groups[1], ","), "1,3,5,7,9", "group under e1")

-- Starts writing a tensor `name` new to every peer of list (random data,
-- then a copy: a batch queued before the all-reduce, so that the
-- all-reduce meets a target still being written, slowest on p2). Returns
-- a function that waits for the writes and gives the element-wise sum.
local function write(list, size, seed, name)
  local tasks, mine = {}, name .. ".mine"
  for r = 1, #list do
    tasks[r] = hn.spawn(function()
      list[r]:batch{ { "tensor", { name = mine, size = size, fill = "uniform", low = -1, high = 1, seed = seed + r } },
                     { "scale", { x = mine, alpha = 1 } }, { "copy", { src = mine, dst = name } } }
    end)
  end
  hn.sleep(0) -- the writes' batches go out before the all-reduce's commands
  return function()
    hn.wait_all(tasks)
    local want = {}
    for r = 1, #list do
      for e, v in ipairs(T.read_all(list[r], mine, size)) do want[e] = (want[e] or 0) + v end
    end
    return want
  end
end

-- Every peer's `name` equals want element by element (to 1e-5).
local function check_sum(list, size, want, what, name)
  for r = 1, #list do
    local got = T.read_all(list[r], name, size)
    for e = 1, size do
      if math.abs(got[e] - want[e]) > 1e-5 * math.max(1, math.abs(want[e])) then
        error(string.format("%s: peer %d element %d: %.7g, the sum is %.7g", what, r, e - 1, got[e], want[e]))
      end
    end
  end
end

local checked = 0
for n = 2, 9 do
  local size = 1000 * n + n + 1 -- not divisible by n
  local list = table.move(peers, 1, n, 1, {})
  for _, algo in ipairs(ar.algos) do
    local name = string.format("g.%s.%d", algo, n)
    local sum = write(list, size, 100 * n, name)
    ar.allreduce{ peers = list, tensor = name, algo = algo, size = size }
    check_sum(list, size, sum(), string.format("%s N=%d", algo, n), name)
    checked = checked + 1
  end
end
T.eq(checked, 32, "all-reduces checked")

-- Explicit groups: the sum too. The same groups given to a flat algo are
-- accepted (they shape only "hierarchical"), so a script may pass them to
-- every algo.
local three = { peers[1], peers[2], peers[3] }
local explicit = { { peers[1] }, { peers[2], peers[3] } }
for _, algo in ipairs(ar.algos) do
  local name = "g.groups." .. algo
  local sum = write(three, 10, 7, name)
  ar.allreduce{ peers = three, tensor = name, algo = algo, groups = explicit, size = 10 }
  check_sum(three, 10, sum(), algo .. " with explicit groups", name)
end
-- (size given: no peer has a "g" here, the options are refused before)
local ok, err = pcall(ar.allreduce, { peers = { peers[1], peers[2] }, tensor = "g", algo = "hierarchical",
                                      groups = { { peers[1] } }, size = 10 })
assert(not ok and err:find("peer 'p2' is in no group"), tostring(err))
ok, err = pcall(ar.allreduce, { peers = { peers[1], peers[2] }, tensor = "g", algo = "ring",
                                groups = { { peers[1], peers[9] } }, size = 10 })
assert(not ok and err:find("node 'p9' is not one of the peers"), tostring(err))
ok, err = pcall(ar.allreduce, { peers = { peers[1], peers[2] }, tensor = "g", algo = "butterfly", size = 10 })
assert(not ok and err:find("expected one of ring"), tostring(err))
-- before / after: a command list per peer, no more lists than peers.
ok, err = pcall(ar.plan, { peers = { peers[1], peers[2] }, tensor = "g", size = 10, before = "grad" })
assert(not ok and err:find("option 'before': expected a list of command lists, one per peer", 1, true), tostring(err))
ok, err = pcall(ar.plan, { peers = { peers[1], peers[2] }, tensor = "g", size = 10, after = { {}, {}, {} } })
assert(not ok and err:find("option 'after': entry 3, but there are 2 peers", 1, true), tostring(err))

-- A ring whose chunks go in segments (ar.SEGMENT_BYTES each): 3 peers,
-- chunks of 262145 elements (just over 1 MB): 2 segments each, into a
-- tensor "gs" still being written when the ring starts (p2 at 1/20). The
-- sum is made and compared on the peers (3 x 786k elements are slow to
-- read).
do
  local size = 3 * 262145
  T.eq(ar.ring_segments(3, size), 2, "segments of a 1 MB chunk")
  local tasks = {}
  for r = 1, 3 do
    tasks[r] = hn.spawn(function()
      three[r]:batch{ { "tensor", { name = "gs.mine", size = size, fill = "uniform", low = -1, high = 1, seed = 50 + r } },
                      { "scale", { x = "gs.mine", alpha = 1 } }, { "copy", { src = "gs.mine", dst = "gs" } } }
      if r > 1 then three[r]:send{ tensor = "gs.mine", to = three[1], as = "in." .. r } end
    end)
  end
  hn.sleep(0) -- the writes go out before the ring's commands
  ar.allreduce{ peers = three, tensor = "gs", algo = "ring", size = size }
  hn.wait_all(tasks)
  three[1]:batch{ { "copy", { src = "gs.mine", dst = "want" } }, { "axpy", { y = "want", x = "in.2" } },
                  { "axpy", { y = "want", x = "in.3" } } }
  three[1]:send{ tensor = "want", to = { three[2], three[3] } }
  local scale = three[1]:norm{ x = "want" }.value
  for r = 1, 3 do
    local d = three[r]:batch{ { "copy", { src = "gs", dst = "diff" } }, { "axpy", { y = "diff", x = "want", alpha = -1 } },
                              { "norm", { x = "diff" } } }.results[3].value
    T.le(d, 1e-6 * scale, "segmented ring: peer " .. r .. ": |gs - sum|")
  end
end

-- Training over every algorithm learns; all workers end with the same
-- model. The same groups go to every algo (they shape "hierarchical").
local workers = table.move(peers, 1, 4, 1, {})
local groups = { { workers[1], workers[3] }, { workers[2], workers[4] } }
local function same_models(algo)
  local a = workers[1]:norm{ x = "w" }.value
  for i = 2, 4 do T.near(workers[i]:norm{ x = "w" }.value, a, 1e-5, algo .. ": worker " .. i .. "'s model") end
end
local dense = {}
for _, algo in ipairs(ar.algos) do
  local s = ar.train{ workers = workers, algo = algo, groups = groups, model = T.model, dataset = T.dataset,
                      batch = 32, steps = 40, worker_opt = { lr = 0.2 }, prefix = algo:gsub("-", "_") .. "_",
                      eval_limit = 300, progress = false }
  T.learned(s, 0.5, "allreduce.train " .. algo)
  T.eq(s.updates_applied, 40 * 4, algo .. ": updates")
  same_models(algo)
  dense[algo] = s
end
-- With compression (and error feedback) the compressed updates are
-- all-gathered along each algo's pattern: every algo learns, and the
-- copies stay equal. Bytes: an all-gather moves N - 1 compressed updates
-- per peer against a ring's 2 (N - 1) / N dense ones: int8 (a quarter)
-- on 4 workers is 0.5 of it plus headers, topk 10% (8 bytes an element)
-- 0.4, sign 1/16; so at most 0.6 of the same algo uncompressed.
local methods = { ring = { method = "int8" }, ["halving-doubling"] = { method = "topk", ratio = 0.1 },
                  tree = { method = "sign" }, hierarchical = { method = "int8" } }
for _, algo in ipairs(ar.algos) do
  local c = ar.train{ workers = workers, algo = algo, groups = groups, model = T.model, dataset = T.dataset,
                      batch = 32, steps = 40, worker_opt = { lr = 0.2 }, compress = methods[algo],
                      prefix = algo:gsub("-", "_") .. "_" .. methods[algo].method .. "_", eval_limit = 300,
                      progress = false }
  T.learned(c, 0.6, "allreduce.train " .. algo .. " " .. methods[algo].method)
  T.le(c.bytes, 0.6 * dense[algo].bytes, algo .. " " .. methods[algo].method .. ": bytes against uncompressed")
  same_models(algo .. " " .. methods[algo].method)
end
local ok2, err2
ok2, err2 = pcall(ar.train, { workers = workers, algo = "ring", model = T.model, dataset = T.dataset, steps = 5,
                              eval_node = peers[#peers] })
assert(not ok2 and err2:find("must be one of the workers"), tostring(err2))
print("algo_allreduce: ok")
