-- concurrent_start: tests/lua/concurrent_start.lua on an emulated backend
-- (two networks started at once from two tasks; a third task's 50 ms sleeps
-- must not be held up by either start). Args: backend=kernel|user, plus
-- owned=/regdir= from lib.sh.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
H.args(...)
local scenario = assert(loadfile(dir .. "../../lua/concurrent_start.lua"))
scenario(H.a.backend, function(net) H.own(net, { unique = true }) end)
