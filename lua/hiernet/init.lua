-- hiernet: the module every scenario requires (local hn = require("hiernet")).
-- The C core provides tasks, parameters, records and networks; this file adds
-- what is best written in Lua on top of the core's wake-token primitives.
local core = require("hiernet.core")

local hn = {}
for name, fn in pairs(core) do
  if name:sub(1, 1) ~= "_" then hn[name] = fn end
end

-- hn.at(t, fn, ...): a task that runs fn(...) at run time t (seconds on
-- hn.now()'s clock, emulated under dilation); a time already past runs it at
-- once. Returns the task, like hn.spawn.
function hn.at(t, fn, ...)
  if type(t) ~= "number" or t ~= t then
    error(("hn.at: the time must be a number of seconds, got %s"):format(tostring(t)), 2)
  end
  if type(fn) ~= "function" then
    error(("hn.at: expected a function to run, got %s"):format(type(fn)), 2)
  end
  return hn.spawn(function(...)
    local wait = t - hn.now()
    if wait > 0 then hn.sleep(wait) end
    return fn(...)
  end, ...)
end

-- hn.queue(): an unbounded FIFO between tasks; pop() waits while it is empty.
local Queue = {}
Queue.__index = Queue

function hn.queue()
  return setmetatable({ items = {}, head = 1, tail = 0, waiters = {}, whead = 1, wtail = 0 }, Queue)
end

function Queue:push(value)
  self.tail = self.tail + 1
  self.items[self.tail] = value
  -- Wake one waiting task; a waiter that has moved on refuses the wake.
  while self.whead <= self.wtail do
    local token = self.waiters[self.whead]
    self.waiters[self.whead] = nil
    self.whead = self.whead + 1
    if core._wake(token) then break end
  end
end

function Queue:pop()
  while self.head > self.tail do
    self.wtail = self.wtail + 1
    self.waiters[self.wtail] = core._prepare()
    core._park()
  end
  local value = self.items[self.head]
  self.items[self.head] = nil
  self.head = self.head + 1
  return value
end

function Queue:len()
  return self.tail - self.head + 1
end

-- hn.plot{dirs=, out=, format=} / hn.report{...}: hiernet.plot and
-- hiernet.report on this run's results directory unless dirs are given.
-- run.json is rewritten first, so the topology and the parameters read so
-- far are current. Without a results directory (hiernet draw) they do
-- nothing and return an empty list.
local function current_run_options(opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  if o.dirs == nil then
    local dir = core.results_dir()
    if not dir then return nil end
    o.dirs = { dir }
  end
  if core.results_dir() then core._write_run_json() end
  return o
end

function hn.plot(opts)
  local o = current_run_options(opts)
  if not o then return {} end
  return require("hiernet.plot").run(o)
end

function hn.report(opts)
  local o = current_run_options(opts)
  if not o then return nil, {} end
  return require("hiernet.report").run(o)
end

return hn
