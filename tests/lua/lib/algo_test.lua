-- Shared by the algorithm tests (tests/lua/algo_*.lua and others): a small synthetic
-- problem, networks on backend none, and checks that say what failed.
--   local T = dofile(<this dir> .. "/lib/algo_test.lua")
local hn = require("hiernet")

local T = {}

-- Four Gaussian classes in 16 dimensions: a model learns it in tens of steps.
T.dataset = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600 }
T.model = "mlp:16-32-4"

-- A network of backend none: `server` (unless no_server) and workers w1..wn.
function T.network(name, n_workers, o)
  o = o or {}
  local net = hn.network{ name = name, backend = "none" }
  local server = not o.no_server and net:node("server", { tier = "cloud" }) or nil
  local workers = {}
  for i = 1, n_workers do
    workers[i] = net:node("w" .. i, { tier = "terminal", speed = o.speeds and o.speeds[i] or nil })
    if server then net:link(server, workers[i]) end
  end
  net:start()
  return net, server, workers
end

-- A training's options: a copy of `base` with `extra`'s fields set over it.
function T.with(base, extra)
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

function T.eq(got, want, what)
  if got ~= want then error(string.format("%s: got %s, want %s", what, tostring(got), tostring(want)), 2) end
end

function T.le(got, limit, what)
  if not (got <= limit) then error(string.format("%s: %s is more than %s", what, tostring(got), tostring(limit)), 2) end
end

function T.near(got, want, rel, what)
  local tol = rel * math.max(1, math.abs(want))
  if not (math.abs(got - want) <= tol) then
    error(string.format("%s: got %.9g, want %.9g (tolerance %g)", what, got, want, tol), 2)
  end
end

-- fn(...) raises an error whose text holds `pattern` (plain text).
function T.fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error matching " .. pattern, 2) end
  if not tostring(err):find(pattern, 1, true) then
    error("error '" .. tostring(err) .. "' lacks '" .. pattern .. "'", 2)
  end
end

-- The loss fell to at most `factor` of where it started.
function T.learned(s, factor, what)
  if not (s.final_loss <= factor * s.initial_loss) then
    error(string.format("%s: loss %.4f -> %.4f, not below %.2f x the start", what, s.initial_loss,
                        s.final_loss, factor), 2)
  end
end

-- Rows of a CSV of the run's results directory, as tables by column.
T.csv = require("hiernet.experiment").read_csv

-- Every value of a tensor (small tensors), read in pieces of 65536.
function T.read_all(node, tensor, size)
  local out = {}
  for off = 0, size - 1, 65536 do
    local vals = node:read{ tensor = tensor, range = { off, math.min(65536, size - off) } }.values
    for _, v in ipairs(vals) do out[#out + 1] = v end
  end
  return out
end

-- Fault schedules on a training's progress (its at_start clock), not on
-- wall-clock times that a loaded host stretches.
-- T.wait_for(clock, what, cond) waits until cond() holds; the training
-- ending first is an error, and so is no such progress within LIVENESS_S
-- (a liveness bound for a training that hangs, far beyond any step).
T.LIVENESS_S = 30
function T.wait_for(clock, what, cond)
  local t0 = hn.now()
  while not cond() do
    if clock.done() then error(what .. ": the training ended first", 0) end
    if hn.now() - t0 > T.LIVENESS_S then error(string.format("%s: not within %d s", what, T.LIVENESS_S), 0) end
    hn.sleep(0.005)
  end
end

-- Waits until worker `name` has made n more steps than now.
function T.after_steps(clock, name, n, what)
  local from = clock.steps_of(name)
  T.wait_for(clock, what, function() return clock.steps_of(name) >= from + n end)
end

-- An at_start function running body(clock, at) and keeping its error in
-- at.err (a task's error would not reach the test); at.finished is set at
-- its end, and with stop = true the training is stopped there.
function T.schedule(body, stop)
  local at = {}
  return function(clock)
    local ok, err = pcall(body, clock, at)
    if not ok then at.err = tostring(err) end
    at.finished = true
    if stop then clock.stop("schedule done") end
  end, at
end

-- Waits (main task) for a schedule to finish, after its training returned.
function T.schedule_done(at, what)
  local t0 = hn.now()
  while not at.finished do
    if hn.now() - t0 > T.LIVENESS_S then error(what .. ": the fault schedule did not finish", 2) end
    hn.sleep(0.01)
  end
  if at.err then error(what .. ": fault schedule: " .. at.err, 2) end
end

-- A page's example is a module as written: the first code block of the
-- section `title` of docs/<page> must be the module tests/lua/<module>
-- from the line starting with `marker` on, so that the recipe cannot drift.
function T.doc_example(page, title, module, marker)
  local here = debug.getinfo(1, "S").source:match("^@(.*/)") .. "../"
  local function slurp(path)
    local f = assert(io.open(path, "r"))
    local text = f:read("a")
    f:close()
    return text
  end
  local text = slurp(here .. "../../docs/" .. page)
  local section = text:match("## " .. title:gsub("%p", "%%%0") .. "\n(.-)\n## ")
  local code = section and section:match("```lua\n(.-)```")
  assert(code, string.format("docs/%s: no code block in '%s'", page, title))
  local body = slurp(here .. module)
  local from = body:find(marker, 1, true)
  assert(from, string.format("tests/lua/%s: no line '%s'", module, marker))
  T.eq(code, body:sub(from), string.format("docs/%s's example and tests/lua/%s", page, module))
end

return T
