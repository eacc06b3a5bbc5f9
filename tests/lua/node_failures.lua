-- Node failures and restarts: a killed peer fails the calls pending on it
-- and every later call, naming the node; restart gives a fresh peer (no
-- tensors) that answers; restarting from a task woken by a reply or by the
-- failure of its call is safe (the scheduler never runs scenario code inside
-- the callback that woke it).
local hn = require("hiernet")
local net = hn.network{ name = "fail", backend = "none" }
local a = net:node("a")
local b = net:node("b")
net:start()

a:tensor{ name = "x", size = 4, fill = 1 }
a:ping()
a:restart() -- right after a reply
assert(a:stats().tensors == 0, "a restarted peer starts empty")

-- Two calls in flight when the node dies: both fail, naming node and command.
-- The peer is stopped first, so that neither call can be answered in time.
os.execute("kill -STOP " .. a:stats().pid)
local first = hn.spawn(function()
  local ok, err = pcall(a.ping, a)
  a:restart() -- from the task the failure woke
  return ok, err
end)
local second = hn.spawn(function() return pcall(a.stats, a) end)
hn.yield()
a:kill()
local ok1, err1 = first:wait()
local ok2, err2 = second:wait()
assert(not ok1 and err1:find("node 'a': ping:", 1, true) and err1:find("signal 9", 1, true), tostring(err1))
assert(not ok2 and err2:find("node 'a'", 1, true), tostring(err2))
assert(a:ping().ms >= 0, "the restarted peer answers")

-- Repeated kill / restart cycles; the other node is never disturbed.
b:tensor{ name = "y", size = 2, fill = 3 }
for i = 1, 3 do
  a:kill()
  local ok, err = pcall(a.ping, a)
  assert(not ok and err:find("node 'a'", 1, true), "call after kill " .. i .. ": " .. tostring(err))
  a:restart()
  assert(a:stats().pid > 0)
end
assert(math.abs(b:norm{ x = "y" }.value - 3 * math.sqrt(2)) < 1e-5, "b kept its tensor")
net:stop()
