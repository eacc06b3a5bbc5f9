-- hiernet.algo.allreduce on real peers (backend none): every algorithm gives
-- every peer the element-wise sum (to 1e-5) for N = 2..9 and sizes that N
-- does not divide; data-parallel training over each algorithm learns.
local hn = require("hiernet")
local ar = require("hiernet.algo.allreduce")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "ar", backend = "none" }
local edges = { net:node("e1", { tier = "edge" }), net:node("e2", { tier = "edge" }) }
local cloud = net:node("cloud", { tier = "cloud" })
net:link(cloud, edges[1]); net:link(cloud, edges[2])
local peers = {}
for i = 1, 9 do
  peers[i] = net:node("p" .. i, { tier = "terminal" })
  net:link(edges[(i - 1) % 2 + 1], peers[i])
end
net:start()

-- Default groups: the terminals under each edge.
local groups = ar.default_groups(peers)
T.eq(#groups, 2, "default groups")
T.eq(table.concat(groups[1], ","), "1,3,5,7,9", "group under e1")

local checked = 0
for n = 2, 9 do
  local size = 1000 * n + n + 1 -- not divisible by n
  local list = table.move(peers, 1, n, 1, {})
  for _, algo in ipairs(ar.algos) do
    local want = {}
    local tasks = {}
    for r = 1, n do
      tasks[r] = hn.spawn(function()
        list[r]:tensor{ name = "g", size = size, fill = "uniform", low = -1, high = 1, seed = 100 * n + r }
        return T.read_all(list[r], "g", size)
      end)
    end
    for _, values in ipairs(hn.wait_all(tasks)) do
      for e, v in ipairs(values) do want[e] = (want[e] or 0) + v end
    end
    local res = ar.allreduce{ peers = list, tensor = "g", algo = algo }
    assert(res.bytes > 0, algo .. ": no bytes moved")
    for r = 1, n do
      local got = T.read_all(list[r], "g", size)
      for e = 1, size do
        if math.abs(got[e] - want[e]) > 1e-5 * math.max(1, math.abs(want[e])) then
          error(string.format("%s N=%d: peer %d element %d: %.7g, the sum is %.7g", algo, n, r, e - 1,
                              got[e], want[e]))
        end
      end
    end
    checked = checked + 1
  end
end
T.eq(checked, 32, "all-reduces checked")

-- Explicit groups, and errors naming what is wrong.
ar.allreduce{ peers = { peers[1], peers[2], peers[3] }, tensor = "g", algo = "hierarchical",
              groups = { { peers[1] }, { peers[2], peers[3] } }, size = 10 }
local ok, err = pcall(ar.allreduce, { peers = { peers[1], peers[2] }, tensor = "g", algo = "hierarchical",
                                      groups = { { peers[1] } } })
assert(not ok and err:find("peer 'p2' is in no group"), tostring(err))
ok, err = pcall(ar.allreduce, { peers = { peers[1], peers[2] }, tensor = "g", algo = "butterfly" })
assert(not ok and err:find("expected one of ring"), tostring(err))

-- Training over every algorithm learns; all workers end with the same model.
local workers = table.move(peers, 1, 4, 1, {})
for _, algo in ipairs(ar.algos) do
  local s = ar.train{ workers = workers, algo = algo, model = T.model, dataset = T.dataset, batch = 32,
                      steps = 40, worker_opt = { lr = 0.2 }, prefix = algo:gsub("-", "_") .. "_",
                      eval_limit = 300, progress = false }
  T.learned(s, 0.5, "allreduce.train " .. algo)
  T.eq(s.updates_applied, 40 * 4, algo .. ": updates")
  local a = workers[1]:norm{ x = "w" }.value
  for i = 2, 4 do T.near(workers[i]:norm{ x = "w" }.value, a, 1e-5, algo .. ": worker " .. i .. "'s model") end
end
-- With compression the updates travel compressed around the ring.
local c = ar.train{ workers = workers, algo = "ring", model = T.model, dataset = T.dataset, batch = 32,
                    steps = 40, worker_opt = { lr = 0.2 }, compress = { method = "int8" },
                    prefix = "ring_int8_", progress = false }
T.learned(c, 0.6, "allreduce.train ring int8")
local ok2, err2 = pcall(ar.train, { workers = workers, algo = "tree", model = T.model, dataset = T.dataset,
                                    steps = 5, compress = { method = "int8" } })
assert(not ok2 and err2:find("algo 'tree' would not be used"), tostring(err2))
ok2, err2 = pcall(ar.train, { workers = workers, algo = "ring", model = T.model, dataset = T.dataset, steps = 5,
                              eval_node = peers[#peers] })
assert(not ok2 and err2:find("must be one of the workers"), tostring(err2))
print("algo_allreduce: ok")
