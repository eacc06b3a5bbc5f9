-- hiernet.results: reads a run's results directory for plots and reports.
--
--   local results = require("hiernet.results")
--   local run = results.load("results/demo-20250101-120000")
--   run.info (run.json), run.label, run.algos[i].prefix / .steps / .eval / .summary, run.links
--   results.training_label(run.algos[1]) -> its label option, else its algorithm or prefix
--   run.scenario_summary (the scenario's own summary.json, or nil)
--   results.column(run.algos[1].steps, "loss") -> {2.3, 2.1, false, ...}
--
-- An algorithm's files are <prefix>steps.csv, <prefix>eval.csv and
-- <prefix>summary.json, prefix "" for a run of one algorithm or e.g. "bsp_"
-- when a scenario compares several. A summary.json (prefix "") without an
-- `algorithm` is not an algorithm's but the scenario's own (what
-- hiernet.experiment's finish writes: its figures and a `results` list);
-- it is kept apart as run.scenario_summary, with JSON null read as
-- results.null so that a field that is null still shows. Reading is
-- tolerant: a missing file or
-- column, an empty file or an unparsable cell gives no values there, never
-- an error. Only a directory without a readable run.json is refused, with
-- a tool error ({tool_error = true, code = 2, msg = ...}; see plot.lua).
local core = require("hiernet.core")

local results = {}

function results.tool_error(code, fmt, ...)
  error({ tool_error = true, code = code, msg = string.format(fmt, ...) }, 0)
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- ---- CSV (RFC 4180, as controller/record.c writes it) ----

-- One quoted field starting at pos (the opening quote); returns text, next pos.
local function quoted_field(text, pos)
  local parts, i = {}, pos + 1
  while true do
    local q = text:find('"', i, true)
    if not q then -- unterminated (a truncated file): take the rest
      parts[#parts + 1] = text:sub(i)
      return table.concat(parts), #text + 1
    end
    parts[#parts + 1] = text:sub(i, q - 1)
    if text:sub(q + 1, q + 1) ~= '"' then return table.concat(parts), q + 1 end
    parts[#parts + 1] = '"'
    i = q + 2
  end
end

-- One record starting at pos; returns its cells and the position after it.
local function csv_record(text, pos)
  local row = {}
  while true do
    local cell
    if text:sub(pos, pos) == '"' then
      cell, pos = quoted_field(text, pos)
      local stop = text:find("[,\r\n]", pos) or #text + 1
      pos = stop -- anything between the closing quote and the separator is dropped
    else
      local stop = text:find("[,\r\n]", pos) or #text + 1
      cell, pos = text:sub(pos, stop - 1), stop
    end
    row[#row + 1] = cell
    local sep = text:sub(pos, pos)
    if sep == "," then
      pos = pos + 1
    else
      if sep == "\r" then pos = pos + 1 end
      if text:sub(pos, pos) == "\n" then pos = pos + 1 end
      return row, pos
    end
  end
end

-- Columns that hold names, kept as text ("1" stays "1", "0x10" stays "0x10").
local TEXT_COLUMNS = { worker = true, network = true, link = true, dir = true }

-- A cell as stored: false when empty, the text in a text column, else a
-- number when it reads as one (or the text).
local function cell_value(cell, is_text)
  if cell == "" then return false end
  if is_text then return cell end
  return tonumber(cell) or cell
end

local function store_row(csv, cells)
  local r = csv.n + 1
  csv.n = r
  for c, col in ipairs(csv.cells) do col[r] = cell_value(cells[c] or "", csv.text[c]) end
end

-- One line without quotes straight into the columns (the common case,
-- kept tight: steps.csv may have a million lines).
local function store_line(csv, line)
  local r, cells, text, c = csv.n + 1, csv.cells, csv.text, 0
  csv.n = r
  for cell in line:gmatch("[^,]*") do
    c = c + 1
    local col = cells[c]
    if col then
      if cell == "" then
        col[r] = false
      elseif text[c] then
        col[r] = cell
      else
        col[r] = tonumber(cell) or cell
      end
    end
  end
  for k = c + 1, #cells do cells[k][r] = false end
end

-- Reads path: nil when the file does not exist, else {columns = {...},
-- index = {name -> column number}, n = rows, cells = {column -> {value
-- by row}}}, stored column by column so that a million-row steps.csv stays
-- a few arrays of numbers. An empty file gives no columns and no rows.
function results.read_csv(path)
  local text = read_file(path)
  if not text then return nil end
  local csv = { columns = {}, index = {}, n = 0, cells = {}, text = {} }
  local pos, n = 1, #text
  if n == 0 then return csv end
  csv.columns, pos = csv_record(text, pos)
  for i, name in ipairs(csv.columns) do
    csv.index[name] = csv.index[name] or i
    csv.cells[i], csv.text[i] = {}, TEXT_COLUMNS[name] or false
  end
  while pos <= n do
    local quote = text:find('"', pos, true)
    if not quote then -- no quoted cell in the rest: line by line
      for line in text:gmatch("[^\r\n]+", pos) do store_line(csv, line) end
      break
    end
    local stop = text:find("\n", pos, true) or n + 1
    if quote < stop then -- this record has quoted cells, maybe over several lines
      local cells
      cells, pos = csv_record(text, pos)
      store_row(csv, cells)
    else
      local line = text:sub(pos, stop - 1):gsub("\r$", "")
      if line ~= "" then store_line(csv, line) end
      pos = stop + 1
    end
  end
  return csv
end

-- The values of one column, by row: numbers (or text in a name column),
-- false where empty; nil when the column does not exist.
function results.column(csv, name)
  local i = csv and csv.index[name]
  return i and csv.cells[i] or nil
end

-- The finite number in a cell, or nil ("1e999" reads as infinity).
function results.number(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge and v or nil
end

-- ---- a results directory ----

-- JSON null in a scenario summary (an algorithm's summary reads it as nil).
results.null = setmetatable({}, { __tostring = function() return "null" end })

local function read_json(path, null)
  local text = read_file(path)
  if not text then return nil, path .. ": cannot read" end
  local value, err = core._json_decode(text, null)
  if err then return nil, path .. ": " .. err end
  return value
end

-- The value with every results.null in it turned back into nil.
local function strip_null(v)
  if v == results.null then return nil end
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = strip_null(x) end
  end
  return v
end

-- Whether a summary.json of prefix "" is the scenario's own: an algorithm's
-- summary always names its algorithm.
local function is_scenario_summary(summary)
  return type(summary) == "table" and type(summary.algorithm) ~= "string"
end

-- Algorithm prefixes present in the directory: "" first, then sorted.
local function find_prefixes(dir)
  local names = core._list_dir(dir) or {}
  local seen, prefixes = {}, {}
  for _, name in ipairs(names) do
    for _, suffix in ipairs({ "steps.csv", "eval.csv", "summary.json" }) do
      if name:sub(-#suffix) == suffix then
        local prefix = name:sub(1, #name - #suffix)
        local valid = prefix == "" or prefix:match("^[%w][%w_.-]*_$")
        if valid and not seen[prefix] then
          seen[prefix] = true
          prefixes[#prefixes + 1] = prefix
        end
      end
    end
  end
  table.sort(prefixes)
  return prefixes
end

-- One algorithm's files; for prefix "" also the scenario's own summary,
-- returned second (then the algorithm has no summary).
local function load_algo(dir, prefix, warnings)
  local a = { prefix = prefix, name = prefix:gsub("_$", "") }
  a.steps = results.read_csv(dir .. "/" .. prefix .. "steps.csv")
  a.eval = results.read_csv(dir .. "/" .. prefix .. "eval.csv")
  local path = dir .. "/" .. prefix .. "summary.json"
  local scenario_summary
  if core._stat(path) then
    local summary, err = read_json(path, results.null)
    if type(summary) ~= "table" or summary == results.null then
      warnings[#warnings + 1] = err or (path .. ": not a JSON object")
    elseif prefix == "" and is_scenario_summary(summary) then
      scenario_summary = summary
    else
      a.summary = strip_null(summary)
    end
  end
  if a.name == "" and a.summary and type(a.summary.algorithm) == "string" then
    a.name = a.summary.algorithm
  end
  return a, scenario_summary
end

-- What a training is called in plots and reports: its `label` train option
-- (summary.json's parameters.label, or a label field), else the name above:
-- the prefix without its "_", or the algorithm for prefix "". Second: true
-- when it is a label given.
function results.training_label(algo)
  local s = algo.summary or {}
  local params = type(s.parameters) == "table" and s.parameters or {}
  for _, label in ipairs({ params.label, s.label }) do
    if type(label) == "string" and label ~= "" then return label, true end
  end
  return algo.name, false
end

local function strip_slashes(dir)
  local s = dir:gsub("/+$", "")
  return s == "" and "/" or s
end

-- Loads one results directory; raises a tool error (exit 2) when dir has no
-- run.json. Warnings (an unreadable summary.json) go to run.warnings.
function results.load(dir)
  dir = strip_slashes(dir)
  if core._stat(dir) ~= "dir" or not core._stat(dir .. "/run.json") then
    results.tool_error(2, "'%s' is not a results directory (no run.json)", dir)
  end
  local info, err = read_json(dir .. "/run.json")
  if type(info) ~= "table" then
    results.tool_error(2, "%s", err or (dir .. "/run.json: not a JSON object"))
  end
  local run = { dir = dir, info = info, warnings = {}, algos = {} }
  for _, prefix in ipairs(find_prefixes(dir)) do
    local algo, scenario_summary = load_algo(dir, prefix, run.warnings)
    run.scenario_summary = run.scenario_summary or scenario_summary
    -- the scenario's summary.json alone is no algorithm of the run
    if algo.steps or algo.eval or algo.summary then run.algos[#run.algos + 1] = algo end
  end
  run.links = results.read_csv(dir .. "/links.csv")
  local scenario = type(info.scenario) == "string" and info.scenario or "run"
  run.scenario = (scenario:match("([^/]+)$") or "run"):gsub("%.lua$", "")
  return run
end

-- The --set parameters of a run as "k=v" texts, sorted by name.
local function set_params(info)
  local set, list = type(info.set) == "table" and info.set or {}, {}
  for k, v in pairs(set) do list[#list + 1] = tostring(k) .. "=" .. tostring(v) end
  table.sort(list)
  return list
end

-- Labels every run: its scenario and --set parameters; runs that would
-- still look alike get their directory's name too.
function results.label_runs(runs)
  local count = {}
  for _, run in ipairs(runs) do
    local parts = { run.scenario }
    for _, p in ipairs(set_params(run.info)) do parts[#parts + 1] = p end
    run.label = table.concat(parts, " ")
    count[run.label] = (count[run.label] or 0) + 1
  end
  for _, run in ipairs(runs) do
    if count[run.label] > 1 then run.label = run.label .. " (" .. run.dir:match("([^/]+)$") .. ")" end
  end
end

-- Loads every directory (in order) and labels the runs.
function results.load_all(dirs)
  local runs = {}
  for i, dir in ipairs(dirs) do runs[i] = results.load(dir) end
  results.label_runs(runs)
  return runs
end

-- The link "a-b" of network `network` in a run's topology, or nil.
function results.topology_link(run, network, link)
  for _, net in ipairs(type(run.info.topology) == "table" and run.info.topology or {}) do
    if type(net) == "table" and net.name == network and type(net.links) == "table" then
      for _, l in ipairs(net.links) do
        if type(l) == "table" and tostring(l.a) .. "-" .. tostring(l.b) == link then return l end
      end
    end
  end
  return nil
end

return results
