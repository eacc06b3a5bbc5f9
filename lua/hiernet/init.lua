-- hiernet: the module every scenario requires (local hn = require("hiernet")).
-- The C core provides tasks, parameters, records and networks; this file adds
-- what is best written in Lua on top of the core's wake-token primitives.
local core = require("hiernet.core")

local hn = {}
for name, fn in pairs(core) do
  if name:sub(1, 1) ~= "_" then hn[name] = fn end
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

return hn
