-- hn.plot() and hn.report() at the end of a scenario: the run writes
-- steps.csv / eval.csv through hn.record and its summary.json, then plots
-- its own results directory, writes its report page, plots again through
-- require("hiernet.plot").run with other options, and gets a clear error
-- for a directory that holds no results.
local hn = require("hiernet")
local core = require("hiernet.core")
if not core._which("gnuplot") then
  print("SKIP: gnuplot is not installed (tools/setup installs gnuplot-nox)")
  os.exit(77)
end
local out = assert(os.getenv("HIERNET_TEST_OUT"), "HIERNET_TEST_OUT is not set")

local net = hn.network{ name = "plots", backend = "none" }
local a = net:node("a", { tier = "edge" })
local b = net:node("b", { tier = "terminal" })
net:link(a, b, { bw = "10Mbit", delay = "1ms" })
net:start()
local steps = hn.record("steps", { "time", "worker", "step", "loss", "compute_ms", "comm_ms", "wait_ms",
                                   "staleness", "lr", "k", "bytes" })
local eval = hn.record("eval", { "time", "step", "accuracy", "loss" })
for s = 1, 20 do
  for _, w in ipairs({ "a", "b" }) do
    steps:add{ time = s * 0.1, worker = w, step = s, loss = 2 / s, compute_ms = 5, comm_ms = 2, wait_ms = 1,
               staleness = s % 3, bytes = 100 }
  end
  if s % 5 == 0 then eval:add{ time = s * 0.1, step = s, accuracy = s / 25, loss = 2 / s } end
end
local f = assert(io.open(out .. "/summary.json", "w"))
f:write('{"algorithm": "toy", "mode": "async", "final_accuracy": 0.8, "best_accuracy": 0.8, ' ..
        '"time_to_target_s": null, "steps": 40, "updates_applied": 40, "bytes": 4000, "wall_s": 2, ' ..
        '"compute_share": 0.6, "prefix": ""}')
f:close()
net:stop()

local function exists(path)
  local h = io.open(path, "rb")
  if h then h:close() end
  return h ~= nil
end

-- hn.plot(): this run's directory, DIR/plots, both formats.
local files, skipped = hn.plot()
local want = { "accuracy_time", "accuracy_steps", "loss_steps", "time_per_worker", "staleness" }
assert(#files == 2 * #want, "hn.plot wrote " .. #files .. " files: " .. table.concat(files, " "))
for _, name in ipairs(want) do
  for _, ext in ipairs({ "png", "svg" }) do
    local path = out .. "/plots/" .. name .. "." .. ext
    assert(exists(path), "missing " .. path)
  end
end
local skipped_names = table.concat(skipped, ",")
assert(skipped_names == "k_time,links", "skipped: " .. skipped_names)

-- hn.report(): the page, with the summary row of this run.
local page = hn.report{ format = "png" }
assert(page == out .. "/index.html", "page at " .. tostring(page))
local h = assert(io.open(page))
local html = h:read("a")
h:close()
assert(html:find("<td>toy</td>", 1, true), "the summary row is missing")
assert(html:find("not reached", 1, true), "time to target null is not shown as not reached")
assert(html:find("data:image/png;base64,", 1, true), "no embedded plot")
assert(not html:find("<script", 1, true), "a script in the page")

-- The module with options of its own.
local svgs = require("hiernet.plot").run{ dirs = { out }, out = out .. "/svg only", format = "svg" }
assert(#svgs == #want, "svg only: " .. #svgs)
for _, path in ipairs(svgs) do assert(path:match("%.svg$") and exists(path), path) end

-- Errors are Lua errors naming the directory and the option.
local ok, err = pcall(hn.plot, { dirs = { out .. "/plots" } })
assert(not ok and err:find("hiernet.plot: '" .. out .. "/plots' is not a results directory (no run.json)", 1, true),
       tostring(err))
ok, err = pcall(hn.plot, { format = "jpeg" })
assert(not ok and err:find("format must be png, svg or both, got 'jpeg'", 1, true), tostring(err))
ok, err = pcall(hn.report, { dirs = { out, out }, colour = "red" })
assert(not ok and err:find("unknown option 'colour'", 1, true), tostring(err))
