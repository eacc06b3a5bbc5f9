-- dilation_max, the bound on dilation "auto", on backend none: a bad value
-- named in one line; the first network's bound is the run's and another is
-- refused; a fixed dilation after it is refused (it could not bound
-- anything), as dilation_max after a fixed dilation is (tests/lua/
-- dilation.lua); a bound named after a network started is refused; and
-- run.json's dilation has no "max" while the run is not auto.
local hn = require("hiernet")

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

local ok, err = pcall(hn.network, { name = "bad", backend = "none", dilation_max = 0 })
check(not ok and err:find("network 'bad': dilation_max must be a number from 1 to 1000, got 0", 1, true),
      "dilation_max 0: %s", tostring(err))
hn.network{ name = "most", backend = "none", dilation_max = 8 }
ok, err = pcall(hn.network, { name = "most2", backend = "none", dilation_max = 6 })
check(not ok and err:find("network 'most2': dilation_max 6 differs from the run's 8", 1, true),
      "second dilation_max: %s", tostring(err))
ok, err = pcall(hn.network, { name = "fixed", backend = "none", dilation = 4 })
check(not ok and err:find([[network 'fixed': dilation 4 is fixed, but an earlier network's dilation_max 8 bounds dilation "auto"]], 1, true),
      "a fixed dilation after dilation_max: %s", tostring(err))
local same = hn.network{ name = "same", backend = "none", dilation_max = 8 } -- the same bound: fine
local w = same:node("w")
same:start()
ok, err = pcall(hn.network, { name = "late", backend = "none", dilation_max = 4 })
check(not ok and err:find("network 'late': dilation_max 4 differs from the run's 8", 1, true),
      "a bound named after a start: %s", tostring(err))
require("hiernet.core")._write_run_json() -- as hn.report does
local f = assert(io.open(hn.results_dir() .. "/run.json"))
local text = f:read("a")
f:close()
check(text:find([["mode": "fixed"]], 1, true) and not text:find([["max":]], 1, true),
      "run.json's dilation of a run that is not auto: %s", text:match([["dilation": {[^}]*}]]) or "none")
check(w ~= nil, "node")
same:stop()
