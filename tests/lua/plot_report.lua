-- hn.plot() and hn.report() at the end of a scenario: the run writes
-- steps.csv / eval.csv through hn.record and its summary.json, and a
-- second training's b_steps.csv / b_eval.csv / b_summary.json (a label, a
-- target, a small compute share, no train_samples), then plots its own
-- results directory, writes its report page, plots again through
-- require("hiernet.plot").run with other options, checks the numbers
-- plot.data gives for each x axis and the training starts against values
-- computed here, and gets a clear error for a directory that holds no
-- results.
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
local COLUMNS = { "time", "worker", "step", "loss", "compute_ms", "comm_ms", "wait_ms", "staleness", "lr", "k",
                  "bytes", "samples" }
-- Training 1: steps 1..20 of 2 workers, 8 samples a row, 80 training
-- samples: step s ends after 16 s samples, s / 5 epochs.
local steps = hn.record("steps", COLUMNS)
local eval = hn.record("eval", { "time", "step", "accuracy", "loss" })
for s = 1, 20 do
  for _, w in ipairs({ "a", "b" }) do
    steps:add{ time = s * 0.1, worker = w, step = s, loss = 2 / s, compute_ms = 5, comm_ms = 2, wait_ms = 1,
               staleness = s % 3, bytes = 100, samples = 8 }
  end
  if s % 5 == 0 then eval:add{ time = s * 0.1, step = s, accuracy = s / 25, loss = 2 / s } end
end
-- Training 2 (prefix b_): steps 1..10 of one worker, 10 samples a row; its
-- summary has 1 epoch and no train_samples, so 100 training samples.
local b_steps = hn.record("b_steps", COLUMNS)
local b_eval = hn.record("b_eval", { "time", "step", "accuracy", "loss" })
for s = 1, 10 do
  b_steps:add{ time = s * 0.5, worker = "a", step = s, loss = 1 / s, compute_ms = 1, samples = 10 }
end
b_eval:add{ time = 5, step = 10, accuracy = 0.5, loss = 0.1 }
local function write(name, text)
  local f = assert(io.open(out .. "/" .. name, "w"))
  f:write(text)
  f:close()
end
write("summary.json", '{"algorithm": "toy", "mode": "async", "final_accuracy": 0.8, "best_accuracy": 0.8, ' ..
      '"time_to_target_s": null, "steps": 40, "updates_applied": 40, "bytes": 4000, "wall_s": 2, ' ..
      '"compute_share": 0.6, "prefix": "", "train_samples": 80, "epochs": 4, "start_s": 1.5}')
write("b_summary.json", '{"algorithm": "toy2", "mode": "sync", "final_accuracy": 0.5, "best_accuracy": 0.5, ' ..
      '"target_accuracy": 0.9, "time_to_target_s": null, "steps": 10, "wall_s": 5, "compute_share": 0.002, ' ..
      '"prefix": "b_", "epochs": 1, "start_s": 4.25, "parameters": {"label": "second <run>", "lr": 0.1}}')
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
assert(skipped_names == "speedup,step_vs_bound,cut_time,k_time,links,link_rate", "skipped: " .. skipped_names)

-- hn.report(): the page, with a summary row per training.
local page = hn.report{ format = "png" }
assert(page == out .. "/index.html", "page at " .. tostring(page))
local h = assert(io.open(page))
local html = h:read("a")
h:close()
assert(html:find("data:image/png;base64,", 1, true), "no embedded plot")
assert(not html:find("<script", 1, true), "a script in the page")
-- The cells of each row of the summary table (training, mode, final and
-- best accuracy, time to target, steps, updates, bytes, wall time,
-- compute share, parameters).
local section = assert(html:match('<section id="summary">(.-)</section>'), "no summary section")
local rows = {}
for row in section:gmatch("<tr>(.-)</tr>") do
  local cells = {}
  for cell in row:gmatch("<td[^>]*>(.-)</td>") do cells[#cells + 1] = cell end
  if #cells > 0 then rows[#rows + 1] = cells end
end
assert(#rows == 2, "summary rows: " .. #rows)
local DASH = "\u{2014}"
local function cell_is(row, i, want, what)
  assert(rows[row][i] == want, string.format("%s: got %q, want %q", what, tostring(rows[row][i]), want))
end
cell_is(1, 1, "toy", "a training without a label: its algorithm")
cell_is(1, 5, DASH, "time to target without a target")
cell_is(1, 10, "60 %", "compute share 0.6")
cell_is(2, 1, "second &lt;run&gt;", "a training with a label: the label")
assert(section:find('title="algorithm toy2, files b_*"', 1, true), "the labelled row's title names algorithm and files")
cell_is(2, 5, "not reached", "time to target with a target not reached")
cell_is(2, 10, "0.2 %", "compute share 0.002")

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

-- The numbers of the line figures for each x axis, against the records above.
local plot = require("hiernet.plot")
local function near(got, want, what)
  assert(math.abs(got - want) <= 1e-9 * math.max(1, math.abs(want)),
         string.format("%s: got %.12g, want %.12g", what, got, want))
end
-- line: the points of one legend entry; want: {{x, y}, ...}
local function check_line(data, figure, label, want)
  local line
  for _, l in ipairs(data[figure] or {}) do
    if l.label == label then line = l end
  end
  assert(line, figure .. ": no line " .. label)
  assert(#line.points == #want, string.format("%s %s: %d points, want %d", figure, label, #line.points, #want))
  for i, p in ipairs(want) do
    near(line.points[i][1], p[1], figure .. " " .. label .. " x " .. i)
    near(line.points[i][2], p[2], figure .. " " .. label .. " y " .. i)
  end
end
-- axis -> x of training 1's step s, of training 2's step s
local AXIS = {
  steps = { function(s) return s end, function(s) return s end },
  time = { function(s) return s * 0.1 end, function(s) return s * 0.5 end },
  samples = { function(s) return 16 * s end, function(s) return 10 * s end },
  epochs = { function(s) return 16 * s / 80 end, function(s) return 10 * s / 100 end },
}
for x, to_x in pairs(AXIS) do
  local data, starts = plot.data{ dirs = { out }, x = x }
  local acc, loss, b_loss = {}, {}, {}
  for s = 5, 20, 5 do acc[#acc + 1] = { x == "time" and s * 0.1 or to_x[1](s), s / 25 } end
  for s = 1, 20 do loss[s] = { to_x[1](s), 2 / s } end
  for s = 1, 10 do b_loss[s] = { to_x[2](s), 1 / s } end
  check_line(data, "accuracy_" .. x, "toy", acc)
  check_line(data, "accuracy_" .. x, "second <run>", { { x == "time" and 5 or to_x[2](10), 0.5 } })
  check_line(data, "loss_" .. x, "toy", loss)
  check_line(data, "loss_" .. x, "second <run>", b_loss)
  -- the trainings' starts on the run's clock, by time
  assert(#starts == 2, x .. ": starts " .. #starts)
  near(starts[1].x, 1.5, "start of toy")
  assert(starts[1].label == "toy", starts[1].label)
  near(starts[2].x, 4.25, "start of the second training")
  assert(starts[2].label == "second <run>", starts[2].label)
end
-- --x on the module: the figures of that axis, and a bad axis named.
local files = plot.run{ dirs = { out }, out = out .. "/epochs", format = "svg", x = "epochs" }
local names = {}
for i, path in ipairs(files) do names[i] = path:match("([^/]+)%.svg$") end
assert(table.concat(names, ",") == "accuracy_time,accuracy_epochs,loss_epochs,time_per_worker,staleness",
       "x = epochs: " .. table.concat(names, ","))
ok, err = pcall(plot.data, { dirs = { out }, x = "weeks" })
assert(not ok and err:find("hiernet.plot: x must be steps, time, epochs or samples, got 'weeks'", 1, true), tostring(err))
ok, err = pcall(plot.data, { dirs = { out }, out = out .. "/x" })
assert(not ok and err:find("hiernet.plot: unknown option 'out'", 1, true), tostring(err))
