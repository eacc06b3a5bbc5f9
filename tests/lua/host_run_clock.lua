-- A host program's timeout counts from the call, not from the loop's cached
-- clock: Lua that blocked before the call (here os.execute, 1.5 s) left
-- that clock 1.5 s old, and a 1 s timeout started from it expired at once,
-- killing a program that ends in milliseconds. Needs nothing but the binary.
local core = require("hiernet.core")

assert(os.execute("sleep 1.5"), "sleep 1.5 failed")
local status, out, err = core._host_run({ "true" }, { timeout = 1 })
assert(status == 0, "true ended with " .. tostring(status) .. ": " .. tostring(out) .. " " .. tostring(err))
