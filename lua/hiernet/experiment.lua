-- hiernet.experiment: what the scenarios that compare algorithms share.
--
--   local ex = require("hiernet.experiment")
--   local backend = ex.backend()            -- --set backend=..., auto falls back to none
--   ...
--   ex.table("results", rows, { "label", "final_accuracy", ... })
--   ex.finish{ scenario = "...", results = rows, ... }   -- summary.json, plots, report page
local hn = require("hiernet")

local ex = {}

-- The backend to use: --set backend=NAME (default "auto"). "auto" on a host
-- that cannot emulate links (no privileges) falls back to "none", said in
-- one line, so a scenario still runs (its links recorded, not emulated).
function ex.backend(default)
  local backend = hn.param("backend", default or "auto")
  if backend == "auto" then
    local can, why = hn.emulation()
    if can == "none" then
      hn.log("links cannot be emulated here (" .. why .. "): running on backend none, links recorded but not emulated")
      return "none"
    end
  end
  return backend
end

-- ex.backend() for a scenario that needs emulated links (partitions,
-- traces, moves): on backend none it says so in one line, writes an empty
-- summary.json and returns nil, and the scenario ends there.
function ex.emulated_backend(scenario, needs)
  local backend = ex.backend()
  if backend ~= "none" then return backend end
  hn.log(string.format("%s: %s need an emulated network; nothing to show on backend none", scenario, needs))
  ex.finish{ scenario = scenario, backend = backend, results = {} }
  return nil
end

local function cell(v)
  if v == nil or v == hn.null then return "-" end
  if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then
    return string.format("%d", v)
  end
  if math.type(v) == "float" then
    if v ~= 0 and (math.abs(v) >= 1e6 or math.abs(v) < 1e-3) then return string.format("%.3g", v) end
    return string.format("%.4g", v)
  end
  return tostring(v)
end

-- The columns of the last table logged: the order ex.finish records.
local last_columns

-- Logs rows (tables) as an aligned table of the given columns.
function ex.table(title, rows, columns)
  last_columns = columns
  local widths, lines = {}, {}
  for c, name in ipairs(columns) do
    widths[c] = #name
    for _, r in ipairs(rows) do widths[c] = math.max(widths[c], #cell(r[name])) end
  end
  local function line(values)
    local parts = {}
    for c, v in ipairs(values) do parts[c] = string.format("%-" .. widths[c] .. "s", v) end
    return table.concat(parts, "  ")
  end
  lines[1] = line(columns)
  for _, r in ipairs(rows) do
    local values = {}
    for c, name in ipairs(columns) do values[c] = cell(r[name]) end
    lines[#lines + 1] = line(values)
  end
  -- hn.log puts it on stderr and in log.txt; printing it as well showed
  -- it twice on a terminal.
  hn.log(title .. "\n  " .. table.concat(lines, "\n  "))
end

-- The summary fields ex.row copies into every row.
local ROW_FIELDS = { "final_accuracy", "best_accuracy", "time_to_target_s", "steps", "updates_applied",
                     "bytes", "wall_s", "compute_share", "prefix", "initial_loss", "final_loss" }

-- Every row of summary.results gets every column of the table logged last
-- and every field ex.row copies: a figure that does not exist (a target not
-- reached, no BSP time to compare with) is written as null, never left
-- out, so a reader can tell "none" from "forgotten".
local function complete_rows(summary)
  local keys = {}
  for _, k in ipairs(ROW_FIELDS) do keys[#keys + 1] = k end
  for _, k in ipairs(summary.columns or {}) do keys[#keys + 1] = k end
  for _, row in ipairs(type(summary.results) == "table" and summary.results or {}) do
    for _, k in ipairs(keys) do
      if row[k] == nil then row[k] = hn.null end
    end
  end
end

-- The scenario's own summary.json (the trainings write <prefix>summary.json),
-- then the plots and the report page of the run. The summary records the
-- columns of the table logged last (`columns`, the report page's order) and
-- its rows hold every one of them (complete_rows). Plotting needs gnuplot;
-- a host without it gets a line saying so, not a failed run.
function ex.finish(summary)
  if summary.columns == nil then summary.columns = last_columns end
  complete_rows(summary)
  hn.write_json("summary", summary)
  if hn.plot and hn.param("plots", true) then
    local ok, err = pcall(hn.report, {})
    if not ok then hn.log("no plots or report page: " .. tostring(err)) end
  end
end

-- A list parameter: --set NAME=a,b,c (commas or spaces), its items as
-- numbers where they are numbers; "all" (or the default "all") gives `all`.
function ex.list_param(name, default, all)
  local v = tostring(hn.param(name, default))
  if v == "all" and all then return all end
  local out = {}
  for item in v:gmatch("[^,%s]+") do out[#out + 1] = tonumber(item) or item end
  return out
end

-- Rows of a CSV of this run's results directory: tables by column (numbers
-- as numbers, empty cells absent), read by hiernet.results' reader.
function ex.read_csv(name)
  local path = hn.results_dir() .. "/" .. name .. ".csv"
  local csv = require("hiernet.results").read_csv(path)
  if not csv then error("experiment.read_csv: no file " .. path, 2) end
  local rows = {}
  for r = 1, csv.n do
    local row = {}
    for i, col in ipairs(csv.columns) do
      local v = csv.cells[i][r]
      if v ~= false then row[col] = v end
    end
    rows[r] = row
  end
  return rows
end

-- Mean of field over rows that have it (nil when none has).
function ex.mean(rows, field)
  local sum, n = 0, 0
  for _, r in ipairs(rows) do
    if type(r[field]) == "number" then sum, n = sum + r[field], n + 1 end
  end
  return n > 0 and sum / n or nil
end

-- Copies the summary fields worth a table row, with a label.
function ex.row(label, s, extra)
  local r = { label = label }
  for _, k in ipairs(ROW_FIELDS) do r[k] = s[k] end
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

return ex
