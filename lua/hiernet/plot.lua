-- hiernet.plot: plots of one or more results directories through gnuplot.
--
--   local plot = require("hiernet.plot")
--   local files, skipped = plot.run{ dirs = { "results/a", "results/b" }, out = "cmp", format = "both" }
--   local data, starts = plot.data{ dirs = { "results/a" }, x = "epochs" }  -- the numbers, undrawn
--
-- For every run and every training (algorithm prefix) in it (see
-- hiernet.results), on shared axes so that runs and trainings compare:
-- accuracy over time and over x (eval.csv), training loss over x
-- (steps.csv: mean over workers per step, then a centred moving average
-- over 2% of the steps), where x is steps (the default), time, epochs or
-- training samples; compute / comm / wait time per worker (stacked bars of
-- the means), staleness histogram (share of steps), k over time (when the
-- k column has values) and link throughput over time (links.csv, the
-- busiest link directions, as a share of each link's bw when every one has
-- a bw; it is on the run's clock, and marks where each training of a run
-- with several starts). A figure without any data is skipped (listed in
-- `skipped`), never drawn empty. Files: NAME.png / NAME.svg in `out`
-- (created if missing).
--
-- gnuplot runs on a script and data files written into a scratch directory
-- inside `out`, as its working directory: the script names only files this
-- module chose, so no path given by the user reaches gnuplot's parser, and
-- labels are quoted for it. Finished images are renamed into `out`; the
-- scratch directory is removed (by the run's teardown if interrupted).
local core = require("hiernet.core")
local results = require("hiernet.results")

local plot = {}

local GNUPLOT_TIMEOUT_S = 120
local MAX_LINK_SERIES = 8 -- more lines than this make the link figure unreadable
local MAX_POINTS = 2000 -- per line: a 960-pixel plot shows no more, and SVGs stay small
local WIDTH, HEIGHT = 960, 540

local fmt = string.format

-- ---- gnuplot text ----

-- A gnuplot single-quoted string: '' is a quote; control characters
-- (a newline would end the command) become spaces.
local function q(s)
  return "'" .. tostring(s):gsub("%c", " "):gsub("'", "''") .. "'"
end

local function num(x)
  return fmt("%.10g", x)
end

local number = results.number

-- ---- series ----

-- Every algorithm of every run, labelled for the legend: the training's
-- label (results.training_label), preceded by the run's label when several
-- runs are compared.
local function all_series(runs)
  local list = {}
  for _, run in ipairs(runs) do
    for _, algo in ipairs(run.algos) do
      local parts = {}
      if #runs > 1 then parts[#parts + 1] = run.label end
      local name = results.training_label(algo)
      if name ~= "" then parts[#parts + 1] = name end
      if #parts == 0 then parts[1] = run.label end
      list[#list + 1] = { run = run, algo = algo, label = table.concat(parts, " ") }
    end
  end
  return list
end

-- Two columns of a CSV as parallel arrays xs, ys of the rows where both
-- are numbers, sorted by x (rows of equal x keep their order). Results
-- are written in time order, so the sort is mostly skipped; arrays rather
-- than a table per point keep a million-row steps.csv cheap.
local function xy_arrays(csv, xname, yname)
  local cx, cy = results.column(csv, xname), results.column(csv, yname)
  local xs, ys, sorted = {}, {}, true
  if not cx or not cy then return xs, ys end
  for i = 1, csv.n do
    local x, y = number(cx[i]), number(cy[i])
    if x and y then
      local m = #xs + 1
      if m > 1 and x < xs[m - 1] then sorted = false end
      xs[m], ys[m] = x, y
    end
  end
  if sorted then return xs, ys end
  local order = {}
  for i = 1, #xs do order[i] = i end
  table.sort(order, function(a, b) return xs[a] < xs[b] or (xs[a] == xs[b] and a < b) end)
  local sx, sy = {}, {}
  for i, k in ipairs(order) do sx[i], sy[i] = xs[k], ys[k] end
  return sx, sy
end

-- Points {x, y} of a line, at most MAX_POINTS: every k-th one, and the last.
local function points_of(xs, ys)
  local n, points = #xs, {}
  local step = math.max(1, math.ceil(n / MAX_POINTS))
  for i = 1, n, step do points[#points + 1] = { xs[i], ys[i] } end
  if n > 0 and (n - 1) % step ~= 0 then points[#points + 1] = { xs[n], ys[n] } end
  return points
end

-- Adds the line {label, points} of xs, ys to lines unless it is empty.
local function add_line(lines, label, xs, ys)
  local points = points_of(xs, ys)
  if #points > 0 then lines[#lines + 1] = { label = label, points = points } end
end

-- ---- the x axis of the progress figures ----

-- The axes the accuracy and loss figures can have (option x), with their
-- label: the records' own step and time columns, the training samples done
-- (steps.csv's samples column summed in row order) and epochs (those samples
-- over the training set's size).
local AXES = { steps = "step", time = "time (s)", epochs = "epoch", samples = "training samples" }
local AXIS_WORDS = { steps = "steps", time = "time", epochs = "epochs", samples = "training samples" }

-- {steps = sorted steps, values = ...} of a steps.csv: per step the largest
-- value of `column` among its rows, summed over the rows so far when
-- cumulative; then a running maximum, so that a step never maps below an
-- earlier one. nil without the columns, or without a sample counted (a
-- run from before steps.csv had samples).
local function by_step(steps, column, cumulative)
  local cs, cv = results.column(steps, "step"), results.column(steps, column)
  if not cs or not cv then return nil end
  local at, keys, total = {}, {}, 0
  for i = 1, steps.n do
    local s, v = number(cs[i]), number(cv[i])
    if cumulative then
      total = total + (v or 0)
      v = total
    end
    if s and v then
      if not at[s] then keys[#keys + 1] = s end
      at[s] = math.max(at[s] or v, v)
    end
  end
  if #keys == 0 or (cumulative and total <= 0) then return nil end
  table.sort(keys)
  local values, top = {}, -math.huge
  for i, s in ipairs(keys) do
    top = math.max(top, at[s])
    values[i] = top
  end
  return { steps = keys, values = values }
end

-- The value of the largest step <= s (0 before the first: nothing done yet).
local function at_step(map, s)
  local keys, lo, hi, found = map.steps, 1, #map.steps, 0
  while lo <= hi do
    local mid = (lo + hi) // 2
    if keys[mid] <= s then
      found, lo = map.values[mid], mid + 1
    else
      hi = mid - 1
    end
  end
  return found
end

-- The size of the training set: summary.json's train_samples, else (runs
-- that lack it) its samples over its epochs.
local function train_samples(algo, samples)
  local s = algo.summary or {}
  if number(s.train_samples) and s.train_samples > 0 then return s.train_samples end
  if number(s.epochs) and s.epochs > 0 then return samples / s.epochs end
  return nil
end

-- A function from a step of this training to x, or nil when its records
-- do not say (no samples column, no training set size).
local function step_axis(algo, x)
  if x == "steps" then return function(s) return s end end
  local map = by_step(algo.steps, x == "time" and "time" or "samples", x ~= "time")
  if not map then return nil end
  local scale = 1
  if x == "epochs" then
    local n = train_samples(algo, map.values[#map.values])
    if not n then return nil end
    scale = 1 / n
  end
  return function(s) return at_step(map, s) * scale end
end

-- xs mapped through to_x in place (empty when there is no mapping).
local function map_steps(xs, to_x)
  if not to_x then return {} end
  for i = 1, #xs do xs[i] = to_x(xs[i]) end
  return xs
end

-- Accuracy (eval.csv) over x: its own time column, else its step mapped.
-- A training's label in the accuracy figures: a surrogate's accuracy
-- (summary.json learning = "surrogate <model>") is that model's, not the
-- profiled model's, and the legend says so.
local function accuracy_label(s)
  local learning = s.algo.summary and s.algo.summary.learning
  if type(learning) == "string" and learning:find("^surrogate ") then
    return s.label .. " (" .. learning .. ")"
  end
  return s.label
end

local function accuracy_lines(series, x)
  local lines = {}
  for _, s in ipairs(series) do
    if x == "time" then
      add_line(lines, accuracy_label(s), xy_arrays(s.algo.eval, "time", "accuracy"))
    else
      local steps, ys = xy_arrays(s.algo.eval, "step", "accuracy")
      add_line(lines, accuracy_label(s), map_steps(steps, step_axis(s.algo, x)), ys)
    end
  end
  return lines
end

-- Mean of y per distinct x, by increasing x.
local function mean_by_x(xs, ys)
  local sum, count, keys = {}, {}, {}
  for i = 1, #xs do
    local x = xs[i]
    if sum[x] then
      sum[x], count[x] = sum[x] + ys[i], count[x] + 1
    else
      sum[x], count[x], keys[#keys + 1] = ys[i], 1, x
    end
  end
  table.sort(keys)
  local means = {}
  for i, x in ipairs(keys) do means[i] = sum[x] / count[x] end
  return keys, means
end

-- Centred moving average over 2% of the values, by prefix sums (O(n)).
local function smooth(ys)
  local half = math.floor(#ys / 100)
  if half == 0 then return ys end
  local prefix, out = { [0] = 0 }, {}
  for i = 1, #ys do prefix[i] = prefix[i - 1] + ys[i] end
  for i = 1, #ys do
    local lo, hi = math.max(1, i - half), math.min(#ys, i + half)
    out[i] = (prefix[hi] - prefix[lo - 1]) / (hi - lo + 1)
  end
  return out
end

-- Loss over x: the mean over workers per step, smoothed, at the step's x.
local function loss_lines(series, x)
  local lines = {}
  for _, s in ipairs(series) do
    local steps, means = mean_by_x(xy_arrays(s.algo.steps, "step", "loss"))
    add_line(lines, s.label, map_steps(steps, step_axis(s.algo, x)), smooth(means))
  end
  return lines
end

-- k only where it changes (and at the end): a step line needs no more.
local function k_lines(series)
  local lines = {}
  for _, s in ipairs(series) do
    local ts, ks = xy_arrays(s.algo.steps, "time", "k")
    local cx, cy = {}, {}
    for i = 1, #ts do
      if i == 1 or i == #ts or ks[i] ~= ks[i - 1] then cx[#cx + 1], cy[#cy + 1] = ts[i], ks[i] end
    end
    local points = points_of(cx, cy)
    if #points > 0 then lines[#lines + 1] = { label = s.label, points = points } end
  end
  return lines
end

-- ---- compute / comm / wait per worker ----

local PARTS = { { "compute_ms", "compute", "#4c72b0" }, { "comm_ms", "comm", "#dd8452" },
                { "wait_ms", "wait", "#8c8c8c" } }

-- "w10" after "w9": digits compare as numbers.
local function natural_less(a, b)
  local function key(s) return (s:gsub("%d+", function(d) return ("0"):rep(32 - #d) .. d end)) end
  return key(a) < key(b)
end

-- {worker -> {compute=, comm=, wait=}} means of one series (ms per step).
local function worker_means(steps)
  local workers = results.column(steps, "worker")
  if not workers then return nil end
  local sums, order = {}, {}
  for p, part in ipairs(PARTS) do
    local values = results.column(steps, part[1]) or {}
    for i = 1, steps.n do
      local w, v = workers[i], number(values[i])
      if w and v then
        if not sums[w] then sums[w] = {}; order[#order + 1] = w end
        local cell = sums[w][p] or { 0, 0 }
        sums[w][p] = { cell[1] + v, cell[2] + 1 }
      end
    end
  end
  local means = {}
  for _, w in ipairs(order) do
    means[w] = {}
    for p = 1, #PARTS do
      local cell = sums[w][p]
      means[w][p] = cell and cell[1] / cell[2] or 0
    end
  end
  return means, order
end

local function worker_bars(series)
  local bars, all, seen = {}, {}, {}
  for _, s in ipairs(series) do
    local means, order = worker_means(s.algo.steps)
    if means and #order > 0 then
      bars[#bars + 1] = { label = s.label, means = means }
      for _, w in ipairs(order) do
        if not seen[w] then seen[w] = true; all[#all + 1] = w end
      end
    end
  end
  table.sort(all, natural_less)
  return bars, all
end

-- ---- staleness histogram ----

local function staleness_bars(series)
  local bars = {}
  for _, s in ipairs(series) do
    local values = results.column(s.algo.steps, "staleness") or {}
    local count, total = {}, 0
    for i = 1, (s.algo.steps and s.algo.steps.n or 0) do
      local v = number(values[i])
      if v and v >= 0 then
        v = math.floor(v + 0.5)
        count[v] = (count[v] or 0) + 1
        total = total + 1
      end
    end
    if total > 0 then
      local points = {}
      for v, c in pairs(count) do points[#points + 1] = { v, c / total } end
      table.sort(points, function(a, b) return a[1] < b[1] end)
      bars[#bars + 1] = { label = s.label, points = points }
    end
  end
  return bars
end

-- ---- link throughput (links.csv) ----

local function format_rate(bps)
  for _, u in ipairs({ { 1e12, "Tbit" }, { 1e9, "Gbit" }, { 1e6, "Mbit" }, { 1e3, "Kbit" } }) do
    if bps >= u[1] then return fmt("%g%s", bps / u[1], u[2]) end
  end
  return fmt("%gbit", bps)
end

-- Per link direction of one run: samples {t, cumulative bytes}.
local function link_samples(run)
  local csv = run.links
  local t = results.column(csv, "time_s")
  local bytes = results.column(csv, "delivered_bytes") or results.column(csv, "bytes")
  local nets, links, dirs = results.column(csv, "network"), results.column(csv, "link"),
                            results.column(csv, "dir")
  if not (t and bytes and links) then return {} end
  local groups, order = {}, {}
  for i = 1, csv.n do
    if number(t[i]) and number(bytes[i]) and links[i] then
      local key = (nets and nets[i] or "") .. "\0" .. links[i] .. "\0" .. (dirs and dirs[i] or "")
      if not groups[key] then
        groups[key] = { network = nets and nets[i] or "", link = links[i],
                        dir = dirs and dirs[i] or "", samples = {} }
        order[#order + 1] = key
      end
      local g = groups[key].samples
      g[#g + 1] = { t[i], bytes[i] }
    end
  end
  local list = {}
  for _, key in ipairs(order) do list[#list + 1] = groups[key] end
  return list
end

-- Bits per second between consecutive samples, at the later one.
local function link_rates(g)
  table.sort(g.samples, function(a, b) return a[1] < b[1] end)
  local points = {}
  for i = 2, #g.samples do
    local dt = g.samples[i][1] - g.samples[i - 1][1]
    local db = g.samples[i][2] - g.samples[i - 1][2]
    if dt > 0 and db >= 0 then points[#points + 1] = { g.samples[i][1], db * 8 / dt } end
  end
  local first, last = g.samples[1], g.samples[#g.samples]
  return points, last[2] - first[2]
end

local function link_lines(runs)
  local lines = {}
  for _, run in ipairs(runs) do
    for _, g in ipairs(run.links and link_samples(run) or {}) do
      local points, total = link_rates(g)
      local topo = results.topology_link(run, g.network, g.link)
      local bw = topo and tonumber(topo.bw_bps) or 0
      local label = g.link .. " " .. g.dir .. (bw > 0 and (" (" .. format_rate(bw) .. ")") or "")
      if #runs > 1 then label = run.label .. " " .. label end
      if #points > 0 and total > 0 then
        lines[#lines + 1] = { label = label, points = points, total = total, bw = bw }
      end
    end
  end
  table.sort(lines, function(a, b) return a.total > b.total end)
  for i = #lines, MAX_LINK_SERIES + 1, -1 do lines[i] = nil end
  local share = #lines > 0
  for _, l in ipairs(lines) do share = share and l.bw > 0 end
  for _, l in ipairs(lines) do
    local xs, ys = {}, {}
    for i, p in ipairs(l.points) do xs[i], ys[i] = p[1], share and 100 * p[2] / l.bw or p[2] / 1e6 end
    l.points = points_of(xs, ys)
  end
  return lines, share
end

-- Per link direction whose rate limit changed during a run (a trace, a
-- l:set): the rate in force at each sample (links.csv bw_bps) in Mbit/s,
-- those with the most changes first, at most MAX_LINK_SERIES of them.
local function rate_lines(runs)
  local lines = {}
  for _, run in ipairs(runs) do
    local csv = run.links
    local t, bw = csv and results.column(csv, "time_s"), csv and results.column(csv, "bw_bps")
    local links, dirs = csv and results.column(csv, "link"), csv and results.column(csv, "dir")
    local groups, order = {}, {}
    for i = 1, (t and bw and links) and csv.n or 0 do
      if number(t[i]) and number(bw[i]) then
        local key = links[i] .. " " .. (dirs and dirs[i] or "")
        local g = groups[key]
        if not g then
          g = { label = #runs > 1 and (run.label .. " " .. key) or key, xs = {}, ys = {}, changes = 0 }
          groups[key], order[#order + 1] = g, key
        end
        if #g.ys > 0 and g.ys[#g.ys] ~= bw[i] / 1e6 then g.changes = g.changes + 1 end
        g.xs[#g.xs + 1], g.ys[#g.ys + 1] = t[i], bw[i] / 1e6
      end
    end
    for _, key in ipairs(order) do
      if groups[key].changes > 0 then lines[#lines + 1] = groups[key] end
    end
  end
  table.sort(lines, function(a, b)
    if a.changes ~= b.changes then return a.changes > b.changes end
    return natural_less(a.label, b.label)
  end)
  for i = #lines, MAX_LINK_SERIES + 1, -1 do lines[i] = nil end
  for _, l in ipairs(lines) do l.points = points_of(l.xs, l.ys) end
  return lines
end

-- ---- where the trainings start ----

-- Every training of each run that has several, by its start on the run's
-- clock (summary.json's start_s): {x = seconds, label = its label, after
-- the run's when several runs are compared}, sorted by time.
local function training_starts(runs)
  local marks = {}
  for _, run in ipairs(runs) do
    local list = {}
    for _, algo in ipairs(run.algos) do
      local t = algo.summary and number(algo.summary.start_s)
      if t then
        local label = results.training_label(algo)
        list[#list + 1] = { x = t, label = #runs > 1 and (run.label .. " " .. label) or label }
      end
    end
    if #list > 1 then
      for _, m in ipairs(list) do marks[#marks + 1] = m end
    end
  end
  table.sort(marks, function(a, b) return a.x < b.x end)
  return marks
end

-- ---- script writing ----

-- Writes the points of one series into the scratch directory; returns its name.
local function data_file(ctx, rows)
  ctx.n_data = ctx.n_data + 1
  local name = fmt("d%d.dat", ctx.n_data)
  local f = assert(io.open(ctx.tmp .. "/" .. name, "w"))
  for _, row in ipairs(rows) do
    local cells = {}
    for i, v in ipairs(row) do cells[i] = num(v) end
    f:write(table.concat(cells, " "), "\n")
  end
  f:close()
  return name
end

local function titled(ctx, title)
  return #ctx.runs == 1 and (title .. ": " .. ctx.runs[1].label) or title
end

-- Common settings of one figure.
local function preamble(ctx, fig)
  local s = { "reset", "set grid", "set key outside below noenhanced",
              "set title " .. q(titled(ctx, fig.title)) .. " noenhanced",
              "set xlabel " .. q(fig.xlabel), "set ylabel " .. q(fig.ylabel) }
  return s
end

-- A dashed vertical line and a label at the start of every training of a
-- run with several (ctx.markers), so that its traffic reads as its own;
-- the x range stretched to hold a start outside the lines' (a training
-- starts before the first rate of links.csv, its second sample).
local function marker_commands(ctx, s, lines)
  if #ctx.markers == 0 then return end
  local lo, hi = math.huge, -math.huge
  for _, l in ipairs(lines) do
    lo, hi = math.min(lo, l.points[1][1]), math.max(hi, l.points[#l.points][1])
  end
  local first, last = ctx.markers[1].x, ctx.markers[#ctx.markers].x
  if first < lo or last > hi then
    s[#s + 1] = fmt("set xrange [%s:%s]", first < lo and num(first) or "*", last > hi and num(last) or "*")
  end
  for i, m in ipairs(ctx.markers) do
    s[#s + 1] = fmt("set arrow %d from %s, graph 0 to %s, graph 1 nohead back dt 2 lw 1 lc rgb '#606060'",
                    i, num(m.x), num(m.x))
    s[#s + 1] = fmt("set label %d %s at %s, graph 0.98 right rotate by 90 offset -0.8,0 front " ..
                    "font ',8' textcolor rgb '#404040' noenhanced", i, q(m.label .. " starts"), num(m.x))
  end
end

local function lines_plot(ctx, fig, lines, style)
  local s = preamble(ctx, fig)
  if fig.ymin then s[#s + 1] = fmt("set yrange [%s:*]", num(fig.ymin)) end
  if fig.markers then marker_commands(ctx, s, lines) end
  local parts = {}
  for i, l in ipairs(lines) do
    parts[i] = fmt("%s using 1:2 with %s lw 2 title %s", q(data_file(ctx, l.points)), style, q(l.label))
  end
  s[#s + 1] = "plot " .. table.concat(parts, ", \\\n  ")
  s.keys = #lines
  return s
end

local FILLS = { "solid 0.85", "pattern 4", "pattern 5", "pattern 6", "pattern 7", "pattern 1", "pattern 2" }

-- The stacked boxes of one series: per part, rows x y xlow xhigh ylow yhigh.
local function worker_rows(bar, workers, offset, width)
  local rows = {}
  for p in ipairs(PARTS) do rows[p] = {} end
  for i, w in ipairs(workers) do
    local m = bar.means[w]
    if m then
      local x, base = i + offset, 0
      for p in ipairs(PARTS) do
        rows[p][#rows[p] + 1] = { x, base + m[p] / 2, x - width * 0.45, x + width * 0.45, base, base + m[p] }
        base = base + m[p]
      end
    end
  end
  return rows
end

-- Clustered stacked bars: x = worker number, one bar per series, side by
-- side. The key lists the parts by colour and, when several series are
-- compared, each series by its fill (keyed through empty NaN plots: a keyed
-- boxxyerror draws no readable swatch).
local function worker_plot(ctx, fig, bars, workers)
  local s = preamble(ctx, fig)
  local tics, step = {}, math.max(1, math.ceil(#workers / 40))
  for i, w in ipairs(workers) do
    if (i - 1) % step == 0 then tics[#tics + 1] = fmt("%s %d", q(w), i) end
  end
  s[#s + 1] = "set xtics (" .. table.concat(tics, ", ") .. ")" .. (#workers > 8 and " rotate by -45" or "")
  if #workers > 8 then s[#s + 1] = "set xlabel offset 0,-1" end -- clear of the slanted names
  s[#s + 1] = fmt("set xrange [0.4:%s]", num(#workers + 0.6))
  s[#s + 1] = "set yrange [0:*]"
  local width, parts = 0.8 / #bars, {}
  for b, bar in ipairs(bars) do
    local rows = worker_rows(bar, workers, (b - (#bars + 1) / 2) * width, width)
    for p, part in ipairs(PARTS) do
      parts[#parts + 1] = fmt("%s using 1:2:3:4:5:6 with boxxyerror fs %s border lc rgb %s fc rgb %s notitle",
                              q(data_file(ctx, rows[p])), FILLS[(b - 1) % #FILLS + 1], q(part[3]), q(part[3]))
    end
  end
  for _, part in ipairs(PARTS) do
    parts[#parts + 1] = fmt("NaN with boxes fs solid 0.85 lc rgb %s fc rgb %s title %s", q(part[3]), q(part[3]), q(part[2]))
  end
  for b = 1, #bars > 1 and #bars or 0 do
    parts[#parts + 1] = fmt("NaN with boxes fs %s lc rgb '#505050' fc rgb '#505050' title %s",
                            FILLS[(b - 1) % #FILLS + 1], q(bars[b].label))
  end
  s[#s + 1] = "plot " .. table.concat(parts, ", \\\n  ")
  s.keys = #PARTS + (#bars > 1 and #bars or 0)
  return s
end

local function histogram_plot(ctx, fig, bars)
  local s = preamble(ctx, fig)
  local max = 0
  for _, bar in ipairs(bars) do max = math.max(max, bar.points[#bar.points][1]) end
  s[#s + 1] = fmt("set xrange [-0.6:%s]", num(max + 0.6))
  if max <= 30 then s[#s + 1] = "set xtics 1" end
  s[#s + 1] = "set yrange [0:*]"
  s[#s + 1] = "set offsets 0, 0, graph 0.08, 0"
  s[#s + 1] = "set style fill solid 0.8 border"
  local width, parts = 0.8 / #bars, {}
  for b, bar in ipairs(bars) do
    local rows = {}
    for i, p in ipairs(bar.points) do rows[i] = { p[1] + (b - (#bars + 1) / 2) * width, p[2], width } end
    parts[b] = fmt("%s using 1:2:3 with boxes title %s", q(data_file(ctx, rows)), q(bar.label))
  end
  s[#s + 1] = "plot " .. table.concat(parts, ", \\\n  ")
  s.keys = #bars
  return s
end

-- The bars a scenario asks for in its summary.json under `key`: a list of
-- {label = series, points = {{x, y}, ...}} (`speedup_bars`,
-- scenarios/paper_speedup.lua: one series per synchronization model, x the
-- paper's row, y the speed-up over BSP; `bound_bars`,
-- scenarios/incast.lua: one series per variant, x the workers, y the step
-- time over the α-β bound; `cut_bars`, scenarios/split_tiers.lua: the
-- predicted and the measured series, x a cut's rank, y seconds per step).
-- Every run's bars, its label first when several
-- runs are drawn.
local function scenario_bars(key)
  return function(_, runs)
    local bars = {}
    for _, run in ipairs(runs) do
      local list = run.scenario_summary and run.scenario_summary[key]
      for _, bar in ipairs(type(list) == "table" and list or {}) do
        if type(bar.points) == "table" and #bar.points > 0 then
          local label = #runs > 1 and (run.label .. " " .. tostring(bar.label)) or tostring(bar.label)
          bars[#bars + 1] = { label = label, points = bar.points }
        end
      end
    end
    return bars
  end
end

-- ---- the figures ----

local function accuracy_figure(x)
  return { name = "accuracy_" .. x, title = "Test accuracy over " .. AXIS_WORDS[x], xlabel = AXES[x],
           ylabel = "accuracy", ymin = 0, lines = function(ctx) return accuracy_lines(ctx.series, x) end }
end

local function loss_figure(x)
  return { name = "loss_" .. x, title = "Training loss over " .. AXIS_WORDS[x] .. " (mean over workers, smoothed)",
           xlabel = AXES[x], ylabel = "loss", lines = function(ctx) return loss_lines(ctx.series, x) end }
end

local LINK_SHARE, LINK_RATE = "throughput (% of the link's bw)", "throughput (Mbit/s)"

local OTHER_FIGURES = {
  { name = "time_per_worker", title = "Time per step by worker", xlabel = "worker",
    ylabel = "ms per step (mean)", bars = worker_bars },
  { name = "staleness", title = "Staleness of applied updates", xlabel = "staleness (steps)",
    ylabel = "share of steps", histogram = staleness_bars },
  { name = "speedup", title = "Speed-up over BSP (time to the target accuracy)", xlabel = "setting (row)",
    ylabel = "speed-up over BSP", histogram = scenario_bars("speedup_bars") },
  { name = "step_vs_bound", title = "Step time against the α-β bound", xlabel = "workers",
    ylabel = "step time / bound", histogram = scenario_bars("bound_bars") },
  { name = "cut_time", title = "Time per step by cut: predicted and measured", xlabel = "cut (rank by prediction)",
    ylabel = "s per step", histogram = scenario_bars("cut_bars") },
  { name = "k_time", title = "k over time", xlabel = "time (s)", ylabel = "k", style = "steps",
    lines = function(ctx) return k_lines(ctx.series) end },
  -- links.csv is on the run's clock: where each training starts shows there
  { name = "links", title = "Link throughput", xlabel = "time (s)", ymin = 0, style = "lines",
    markers = true, lines = function(ctx) return link_lines(ctx.runs) end },
  { name = "link_rate", title = "Link rate over time (the rate in force)", xlabel = "time (s)",
    ylabel = "rate (Mbit/s)", ymin = 0, style = "steps", markers = true,
    lines = function(ctx) return rate_lines(ctx.runs) end },
}

-- The figures with the progress figures over x: accuracy over time, and
-- accuracy and loss over x (or loss alone, over time).
local function figures_over(x)
  local list = { accuracy_figure("time") }
  if x ~= "time" then list[#list + 1] = accuracy_figure(x) end
  list[#list + 1] = loss_figure(x)
  for _, fig in ipairs(OTHER_FIGURES) do list[#list + 1] = fig end
  return list
end

-- Figure name -> title, for the report: every figure of every axis.
plot.titles = {}
for x in pairs(AXES) do
  for _, fig in ipairs(figures_over(x)) do plot.titles[fig.name] = fig.title end
end

-- The gnuplot commands of one figure, or nil when it has no data.
local function figure_script(ctx, fig)
  if fig.lines then
    local lines, share = fig.lines(ctx)
    if #lines == 0 then return nil end
    if fig.name == "links" then
      fig = setmetatable({ ylabel = share and LINK_SHARE or LINK_RATE }, { __index = fig })
    end
    return lines_plot(ctx, fig, lines, fig.style or "linespoints pt 7 ps 0.5")
  elseif fig.bars then
    local bars, workers = fig.bars(ctx.series)
    return #bars > 0 and worker_plot(ctx, fig, bars, workers) or nil
  end
  local bars = fig.histogram(ctx.series, ctx.runs)
  return #bars > 0 and histogram_plot(ctx, fig, bars) or nil
end

local TERMINALS = {
  png = "set terminal pngcairo size %d,%d noenhanced font ',10' background '#ffffff'",
  svg = "set terminal svg size %d,%d dynamic noenhanced font 'sans,10' background '#ffffff'",
}
local KEY_ROW = 18 -- pixels per key entry beyond the first four, so the plot keeps its height

local function write_script(ctx, figures, formats)
  local text = { "set encoding utf8" }
  for _, ext in ipairs(formats) do
    for _, f in ipairs(figures) do
      text[#text + 1] = fmt(TERMINALS[ext], WIDTH, HEIGHT + math.max(0, f.script.keys - 4) * KEY_ROW)
      text[#text + 1] = "set output " .. q(f.name .. "." .. ext)
      for _, line in ipairs(f.script) do text[#text + 1] = line end -- reset keeps the terminal
      text[#text + 1] = "set output"
    end
  end
  local f = assert(io.open(ctx.tmp .. "/plot.gp", "w"))
  f:write(table.concat(text, "\n"), "\n")
  f:close()
end

local function gnuplot_path()
  local path = core._which("gnuplot")
  if not path then
    results.tool_error(3, "gnuplot is not installed (Debian package gnuplot-nox; tools/setup installs it)")
  end
  return path
end

-- Runs gnuplot in the scratch directory and moves the images into out.
local function render(ctx, figures, formats, out)
  write_script(ctx, figures, formats)
  local status, stdout, stderr = core._host_run({ ctx.gnuplot, "plot.gp" },
                                                { cwd = ctx.tmp, timeout = GNUPLOT_TIMEOUT_S })
  if status ~= 0 then
    local why = status and ("exit status " .. status) or stdout
    results.tool_error(1, "gnuplot failed (%s): %s", why, (stderr:match("[^\n]*%S[^\n]*") or ""))
  end
  local files = {}
  for _, ext in ipairs(formats) do
    for _, f in ipairs(figures) do
      local name = f.name .. "." .. ext
      local kind, size = core._stat(ctx.tmp .. "/" .. name)
      if kind ~= "file" or size == 0 then results.tool_error(1, "gnuplot wrote no %s", name) end
      local ok, err = os.rename(ctx.tmp .. "/" .. name, out .. "/" .. name)
      if not ok then results.tool_error(1, "cannot write %s/%s: %s", out, name, err) end
      files[#files + 1] = out .. "/" .. name
    end
  end
  return files
end

local FORMATS = { png = { "png" }, svg = { "svg" }, both = { "png", "svg" } }

local OPTIONS = { dirs = true, out = true, format = true, x = true }
local DATA_OPTIONS = { dirs = true, x = true }

-- The x axis of the progress figures: option x (default steps).
local function check_x(x)
  if x ~= nil and not AXES[x] then
    results.tool_error(2, "x must be steps, time, epochs or samples, got '%s'", tostring(x))
  end
  return x or "steps"
end

-- Options a table of known keys only, with dirs a non-empty array.
local function check_keys(o, known)
  if type(o) ~= "table" then results.tool_error(2, "options must be a table") end
  for k in pairs(o) do
    if not known[k] then results.tool_error(2, "unknown option '%s'", tostring(k)) end
  end
  if type(o.dirs) ~= "table" or #o.dirs == 0 then results.tool_error(2, "dirs must be a non-empty array of directories") end
end

-- Checks the options of plot.run / report.run; returns the image formats
-- and the x axis.
function plot.check_options(o)
  check_keys(o, OPTIONS)
  local format = o.format or "both"
  if not FORMATS[format] then results.tool_error(2, "format must be png, svg or both, got '%s'", tostring(format)) end
  local x = check_x(o.x)
  if #o.dirs > 1 and not o.out then
    results.tool_error(2, "several directories are compared into one place: give --out OUTDIR")
  end
  return FORMATS[format], x
end

local function new_context(runs, x)
  return { runs = runs, series = all_series(runs), x = x, markers = training_starts(runs), n_data = 0 }
end

-- The plots of already loaded runs into out, with the progress figures
-- over x (default steps); returns files, skipped figure names.
function plot.render_runs(runs, out, formats, x)
  local ctx = new_context(runs, x or "steps")
  ctx.gnuplot = gnuplot_path()
  local figures, skipped = {}, {}
  local ok, err = core._mkdir_p(out)
  if not ok then results.tool_error(2, "%s", err) end
  ctx.tmp = core._mkdtemp(out)
  local done, files = pcall(function()
    for _, fig in ipairs(figures_over(ctx.x)) do
      local script = figure_script(ctx, fig)
      if script then
        figures[#figures + 1] = { name = fig.name, script = script }
      else
        skipped[#skipped + 1] = fig.name
      end
    end
    return #figures > 0 and render(ctx, figures, formats, out) or {}
  end)
  core._rmtemp(ctx.tmp)
  if not done then error(files, 0) end
  -- An image of a figure that now has no data would pass for this run's.
  for _, name in ipairs(skipped) do
    for _, ext in ipairs({ "png", "svg" }) do os.remove(out .. "/" .. name .. "." .. ext) end
  end
  return files, skipped
end

-- plot.run{dirs=, out=, format="both", x="steps"} -> files written, figures
-- skipped. out defaults to DIR/plots for one directory and is required for
-- several. Raises tool errors (tables with code and msg); see plot.run for
-- strings.
function plot.run_tool(o)
  local formats, x = plot.check_options(o)
  local runs = results.load_all(o.dirs)
  return plot.render_runs(runs, o.out or (runs[1].dir .. "/plots"), formats, x)
end

-- Errors of fn(o) raised as "hiernet.plot: message" strings.
local function lua_errors(fn, o)
  local ok, a, b = pcall(fn, o)
  if ok then return a, b end
  if type(a) == "table" and a.tool_error then error("hiernet.plot: " .. a.msg, 3) end
  error(a, 0)
end

-- Like run_tool, with errors raised as "hiernet.plot: message" strings.
function plot.run(o)
  local files, skipped = lua_errors(plot.run_tool, o)
  return files, skipped
end

-- plot.data{dirs=, x=} -> the numbers the line figures draw, without
-- drawing: {figure name -> {{label=, points = {{x, y}, ...}}, ...}} (each
-- line thinned as plotted; a figure without data absent), and the
-- training starts marked on the links figure ({{x=, label=}, ...}).
function plot.data(o)
  local data, markers = lua_errors(function()
    check_keys(o, DATA_OPTIONS)
    local x = check_x(o.x)
    local ctx = new_context(results.load_all(o.dirs), x)
    local by_figure = {}
    for _, fig in ipairs(figures_over(x)) do
      local lines = fig.lines and fig.lines(ctx) or {}
      if #lines > 0 then by_figure[fig.name] = lines end
    end
    return by_figure, ctx.markers
  end, o)
  return data, markers
end

-- ---- hiernet plot ----

plot.usage = [[
usage: hiernet plot DIR [DIR...] [--out OUTDIR] [--format png|svg|both]
                    [--x steps|time|epochs|samples]

Plots the results directories of runs: accuracy over time and over steps,
training loss over steps, compute / comm / wait time per worker, staleness,
k over time and link throughput, each training of each run a series on
shared axes (labelled by its label option, else its algorithm or prefix).
Link throughput is on the run's clock and marks where each training of a
run with several starts. Images go to DIR/plots/ for one directory;
comparing several needs --out. Prints the files written, one per line.

options:
  --out OUTDIR      where the images go (created if missing)
  --format F        png, svg or both (default both)
  --x AXIS          the x axis of the accuracy and loss figures: steps (the
                    default), time, epochs or samples (training samples
                    done, from steps.csv's samples column); accuracy over
                    time is drawn whatever the axis
]]

-- Parses the command line of a tool: DIR... [--out X] [--format F] [--x A] [--help].
-- Returns the options, or nil and the exit code when it answered --help.
local TOOL_OPTIONS = { out = true, format = true, x = true }

function plot.parse_args(cmd, usage, args)
  local o, i = { dirs = {} }, 1
  while i <= #args do
    local a = args[i]
    local key, value = a:match("^%-%-(%w+)=(.*)$")
    key = key or a:match("^%-%-(%w+)$")
    if a == "--help" or a == "-h" then
      io.stdout:write(usage)
      return nil, 0
    elseif key and TOOL_OPTIONS[key] then
      if not value then
        i = i + 1
        value = args[i]
        if not value then results.tool_error(2, "%s needs a value (see hiernet %s --help)", a, cmd) end
      end
      o[key] = value
    elseif a:sub(1, 2) == "--" then
      results.tool_error(2, "unknown option '%s' (see hiernet %s --help)", a, cmd)
    else
      o.dirs[#o.dirs + 1] = a
    end
    i = i + 1
  end
  if #o.dirs == 0 then results.tool_error(2, "missing DIR (see hiernet %s --help)", cmd) end
  return o
end

-- Runs fn(args) for a command; a tool error prints "hiernet CMD: msg" and
-- gives its exit code, any other error propagates (exit 1, traceback).
function plot.cli(cmd, fn, ...)
  local ok, code = pcall(fn, { ... })
  if ok then return code end
  if type(code) == "table" and code.tool_error then
    io.stderr:write("hiernet ", cmd, ": ", code.msg, "\n")
    return code.code
  end
  error(code, 0)
end

function plot._cli(...)
  return plot.cli("plot", function(args)
    local o, code = plot.parse_args("plot", plot.usage, args)
    if not o then return code end
    local files, skipped = plot.run_tool(o)
    for _, f in ipairs(files) do io.stdout:write(f, "\n") end
    if #files == 0 then
      io.stderr:write("hiernet plot: nothing to plot (no steps.csv, eval.csv or links.csv data)\n")
    end
    return 0
  end, ...)
end

return plot
