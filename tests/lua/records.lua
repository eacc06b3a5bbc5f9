-- hn.record writes a CSV with a header and one flushed row per add; values
-- are formatted, missing columns stay empty, unknown columns are errors.
local hn = require("hiernet")
local out = assert(os.getenv("HIERNET_TEST_OUT"), "HIERNET_TEST_OUT is set by ctest")

local rec = hn.record("metrics", { "step", "loss", "note" })
rec:add{ step = 1, loss = 0.25, note = "a,b" }
rec:add{ step = 2 }
-- Flushed per row: readable while the run goes on.
local f = assert(io.open(out .. "/metrics.csv"))
local text = f:read("a")
f:close()
assert(text == 'step,loss,note\n1,0.25,"a,b"\n2,,\n', "csv content: " .. text)

local ok, err = pcall(rec.add, rec, { steps = 3 })
assert(not ok and err:find("unknown column 'steps'"), tostring(err))
ok, err = pcall(hn.record, "metrics", { "x" })
assert(not ok and err:find("already exists"), tostring(err))
ok, err = pcall(hn.record, "../escape", { "x" })
assert(not ok and err:find("not a valid file name"), tostring(err))

hn.log("log line", "from the scenario", 42)
local log = assert(io.open(out .. "/log.txt")):read("a")
assert(log:find("%] log line from the scenario 42\n"), "log.txt holds the line: " .. log)
local run = assert(io.open(out .. "/run.json")):read("a")
assert(run:find('"status": "running"'), "run.json says running while the run goes on")
