-- Tasks through the real binary: spawn/wait, wait_any, wait_all, queue,
-- sleep timing, errors propagating to their waiter, hn.param defaults.
local hn = require("hiernet")

local t0 = hn.now()
hn.sleep(0.05)
local slept = hn.now() - t0
-- At least 0.05 s; the upper bound only catches a unit slip (0.05 taken
-- as 50 s, say), not a loaded host's delay: the parallel pass holds no
-- wall-clock limit.
assert(slept >= 0.05 and slept < 5, "sleep(0.05) took " .. slept)

local q = hn.queue()
local producer = hn.spawn(function()
  for i = 1, 5 do q:push(i * 10); hn.sleep(0.001) end
  q:push(nil) -- a nil is a value too
  return "produced"
end)
local got = {}
for _ = 1, 5 do got[#got + 1] = q:pop() end
assert(table.concat(got, ",") == "10,20,30,40,50", "queue order: " .. table.concat(got, ","))
assert(q:pop() == nil and q:len() == 0)
assert(producer:wait() == "produced")

local i, v = hn.wait_any{
  hn.spawn(function() hn.sleep(0.2); return "late" end),
  hn.spawn(function() hn.sleep(0.01); return "early" end),
}
assert(i == 2 and v == "early", "wait_any returns the first to finish")

local failing = hn.spawn(function() hn.sleep(0.01); error("worker broke") end)
local ok, err = pcall(failing.wait, failing)
assert(not ok and err:find("worker broke"), "error reaches the waiter: " .. tostring(err))

assert(hn.param("steps", 7) == 7 and math.type(hn.param("steps", 7)) == "integer")
assert(hn.param("name", "x") == "x")
assert(hn.param("flag", false) == false)
