-- Scenario half of tools/bench/algorithms (--set part=overhead|allreduce|mnist).
-- Prints "result KEY VALUE" lines for the script.
local hn = require("hiernet")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")

local part = hn.param("part", "overhead")

local function result(key, value)
  print(string.format("result %s %s", key, tostring(value)))
end

local function median(list)
  local t = table.move(list, 1, #list, 1, {})
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

local function read_csv(name)
  local f = assert(io.open(hn.results_dir() .. "/" .. name .. ".csv"))
  local header, rows = nil, {}
  for line in f:lines() do
    local cells = {}
    for cell in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = cell end
    if not header then header = cells else
      local row = {}
      for i, c in ipairs(header) do row[c] = tonumber(cells[i]) or cells[i] end
      rows[#rows + 1] = row
    end
  end
  f:close()
  return rows
end

-- ---- 1. orchestration overhead of BSP: 8 workers, a tiny model ----
-- Per step: the step's time minus its critical path, which is the slowest
-- worker's pull + compute + push and the server's apply (all as the peers
-- measured them). What remains is the controller: Lua, the control channel,
-- the scheduling of the tasks.
if part == "overhead" then
  local n, steps = hn.param("workers", 8), hn.param("steps", 300)
  local net = hn.network{ name = "overhead", backend = "none" }
  local server = net:node("server")
  local workers = {}
  for i = 1, n do workers[i] = net:node("w" .. i) end
  net:start()
  local s = ps.train{ server = server, workers = workers, mode = "bsp", model = "logreg:16-4",
                      dataset = { name = "synthetic", n = 4000, dim = 16, classes = 4 }, batch = 8,
                      steps = steps, eval_every = steps, progress = false }
  local slowest = {}
  for _, row in ipairs(read_csv("steps")) do
    local path = row.compute_ms + row.comm_ms
    slowest[row.step] = math.max(slowest[row.step] or 0, path)
  end
  local critical = s.server_apply_ms
  for _, v in pairs(slowest) do critical = critical + v end
  local per_step_ms = s.wall_s * 1000 / s.steps
  result("workers", n)
  result("steps", s.steps)
  result("step_ms", string.format("%.4f", per_step_ms))
  result("critical_ms", string.format("%.4f", critical / s.steps))
  result("overhead_ms", string.format("%.4f", per_step_ms - critical / s.steps))
end

-- ---- 2. all-reduce of 16 MB on a switch with 1 Gbit / 1 ms links ----
if part == "allreduce" then
  local n, mb, reps = hn.param("nodes", 4), hn.param("mb", 16), hn.param("reps", 5)
  local bw, delay = hn.param("bw", "1Gbit"), hn.param("delay", "1ms")
  local net = hn.network{ name = "ar" .. n, backend = hn.param("backend", "user") }
  local sw = net:switch("sw")
  local peers = {}
  for i = 1, n do
    peers[i] = net:node("n" .. i)
    net:link(sw, peers[i], { bw = bw, delay = delay })
  end
  net:start()
  local size = mb * 1024 * 1024 // 4
  for i, p in ipairs(peers) do p:tensor{ name = "g", size = size, fill = "uniform", seed = i } end
  for _, algo in ipairs(ar.algos) do
    local times = {}
    for r = 0, reps do
      local res = ar.allreduce{ peers = peers, tensor = "g", algo = algo, size = size }
      if r > 0 then times[#times + 1] = res.ms end -- the first warms the connections up
    end
    result(algo:gsub("-", "_") .. "_ms", string.format("%.1f", median(times)))
  end
  -- The gloo anchor runs from inside the same nodes (tools/bench/gloo_allreduce.py).
  -- Both read whether or not the anchor runs: a --set nobody reads is an error.
  local gloo, python = hn.param("gloo", ""), hn.param("python", "/usr/bin/python3")
  if gloo ~= "" then
    local port = 29500
    local procs = {}
    for i, p in ipairs(peers) do
      procs[i] = p:spawn{ python, gloo, "--rank", tostring(i - 1), "--world", tostring(n),
                          "--master", peers[1].addr, "--port", tostring(port), "--mb", tostring(mb),
                          "--reps", tostring(reps) }
    end
    local out = {}
    for i, pr in ipairs(procs) do
      local status, so, se = pr:wait()
      if status ~= 0 then error("gloo rank " .. (i - 1) .. " failed: " .. tostring(se)) end
      out[i] = so
    end
    local ms = tonumber(out[1]:match("median_ms ([%d.]+)"))
    result("gloo_ms", string.format("%.1f", ms))
  end
end

-- ---- 3. Fashion-MNIST, mlp:784-128-10, 4 workers, to 0.85 ----
if part == "mnist" then
  local mode = hn.param("mode", "bsp")
  local net = hn.network{ name = "mnist", backend = "none" }
  local server = net:node("server")
  local workers = {}
  for i = 1, 4 do workers[i] = net:node("w" .. i) end
  net:start()
  local extra = ({ ssp = { staleness = 3 }, ["adaptive-k"] = {} })[mode] or {}
  local o = { server = server, workers = workers, mode = mode, model = "mlp:784-128-10",
              dataset = { name = "fashion-mnist" }, batch = 64, seconds = hn.param("seconds", 300),
              target_accuracy = 0.85, eval_every = hn.param("eval_every", 10), eval_limit = 0,
              final_eval_limit = 0, worker_opt = { method = "sgd", lr = hn.param("lr", 0.1) },
              progress = false }
  for k, v in pairs(extra) do o[k] = v end
  local s = ps.train(o)
  result("mode", mode)
  result("time_to_target_s", s.time_to_target_s and string.format("%.2f", s.time_to_target_s) or -1)
  result("steps_to_target", s.steps_to_target or -1)
  result("final_accuracy", string.format("%.4f", s.final_accuracy))
  result("updates", s.updates_applied)
end
