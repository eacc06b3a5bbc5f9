-- hiernet.report: a self-contained HTML page of one or more runs.
--
--   local report = require("hiernet.report")
--   local page, plots = report.run{ dirs = { "results/a" } }     -- results/a/index.html
--
-- The page holds the scenario's own figures (its summary.json: every field,
-- and its `results` as a table; a null time to target reads "not reached"
-- where there was a target), the summary table (one row per training:
-- every <prefix>summary.json of one, named by its label option where it
-- had one; a time to target shows "not reached" when the training had a
-- target and a dash when it had none), the plots (hiernet.plot, written to OUT/plots/ and
-- embedded), the topology of every network (run.json's topology drawn by
-- topo/dot.c, the code of `hiernet draw`, and laid out by Graphviz's dot)
-- and each run's facts and parameters. Self-contained: images are data:
-- URIs, the style sheet is inline, there is no script, and a
-- Content-Security-Policy forbids loading anything else. Every text that
-- comes from a results directory is HTML-escaped.
local core = require("hiernet.core")
local results = require("hiernet.results")
local plot = require("hiernet.plot")

local report = {}

local DOT_TIMEOUT_S = 60 -- Graphviz on thousands of nodes: give up rather than hang
local fmt = string.format

-- ---- HTML text ----

local ESCAPES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", ESCAPES))
end

local function format_bytes(b)
  for _, u in ipairs({ { 1e12, "TB" }, { 1e9, "GB" }, { 1e6, "MB" }, { 1e3, "kB" } }) do
    if b >= u[1] then return fmt("%.1f %s", b / u[1], u[2]) end
  end
  return fmt("%.0f B", b)
end

-- A share as a percentage: whole from 10 % on, below with two significant
-- digits, so that a small share (0.2 %, 0.05 %) never reads as none.
local function format_percent(v)
  local p = v * 100
  if p == 0 or math.abs(p) >= 10 then return fmt("%.0f %%", p) end
  return fmt("%.2g %%", p)
end

local DASH = "\u{2014}"

-- What an absent time to target means: not reached when the training (or
-- the scenario) had a target, else that there was none.
local function no_time_to_target(...)
  for _, t in ipairs({ ... }) do
    if type(t) == "table" and results.number(t.target_accuracy) then return "not reached" end
  end
  return DASH
end

-- One summary cell: key, heading, formatter (its title has the exact
-- value) and what an absent value shows (a dash when not given; a
-- function of the summary).
local CELLS = {
  { "final_accuracy", "final accuracy", function(v) return fmt("%.4f", v) end },
  { "best_accuracy", "best accuracy", function(v) return fmt("%.4f", v) end },
  { "time_to_target_s", "time to target", function(v) return fmt("%.1f s", v) end, no_time_to_target },
  { "steps", "steps", function(v) return fmt("%.0f", v) end },
  { "updates_applied", "updates", function(v) return fmt("%.0f", v) end },
  { "bytes", "bytes", format_bytes },
  { "wall_s", "wall time", function(v) return fmt("%.1f s", v) end },
  { "compute_share", "compute share", format_percent },
  -- what learned: "real <model>", "surrogate <model>" beside a profiled
  -- model, or "none (timing only)" (docs/lua-api.md "Profiled compute")
  { "learning", "learning", tostring },
}

-- The formatter of each CELLS key, which a value of that key gets
-- wherever the page shows it.
local CELL_FORMAT = {}
for _, c in ipairs(CELLS) do CELL_FORMAT[c[1]] = c[3] end

local NULL = results.null

-- A number as a table shows it: a CELLS key's own way; else integers whole
-- (bytes from 10 kB on in kB/MB/...), others to four significant digits.
local function format_number(key, v)
  if v ~= v or v == math.huge or v == -math.huge then return tostring(v) end
  if CELL_FORMAT[key] then return CELL_FORMAT[key](v) end
  local whole = math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 2 ^ 53)
  if whole and tostring(key):find("bytes") and math.abs(v) >= 1e4 then return format_bytes(v) end
  if whole then return fmt("%d", v) end
  if v ~= 0 and (math.abs(v) >= 1e6 or math.abs(v) < 1e-3) then return fmt("%.3g", v) end
  return fmt("%.4g", v)
end

-- Any JSON value (a summary's, run.json's, a parameter) as short text:
-- null as a dash, objects as {k=v, ...} and arrays as [v, ...], numbers as
-- above.
local function format_value(key, v)
  if v == nil or v == NULL then return DASH end
  if type(v) == "number" then return format_number(key, v) end
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if math.type(a) and math.type(b) then return a < b end
    return tostring(a) < tostring(b)
  end)
  local parts, array = {}, #keys == #v
  for i, k in ipairs(keys) do
    parts[i] = (array and "" or (tostring(k) .. "=")) .. format_value(k, v[k])
  end
  return (array and "[" or "{") .. table.concat(parts, ", ") .. (array and "]" or "}")
end

-- A table cell of a value, its exact number in the title; `missing` is
-- shown for an absent one (default a dash).
local function value_cell(key, v, missing)
  local exact = type(v) == "number" and fmt("%.10g", v) or (v == NULL and "null" or "")
  local class = (type(v) == "number" or v == NULL or missing) and " class=\"num\"" or ""
  local shown = (v == nil and missing) or format_value(key, v)
  return fmt("<td%s title=\"%s\">%s</td>", class, esc(exact), esc(shown))
end

-- The columns of the results rows: the scenario's own order (`columns`,
-- the table it printed) first, then every other key, sorted.
local function result_columns(summary, rows)
  local list, seen = {}, {}
  local function add(k)
    if type(k) == "string" and not seen[k] then seen[k], list[#list + 1] = true, k end
  end
  add("label")
  for _, k in ipairs(type(summary.columns) == "table" and summary.columns or {}) do add(k) end
  local rest = {}
  for _, r in ipairs(rows) do
    for k in pairs(type(r) == "table" and r or {}) do
      if type(k) == "string" and not seen[k] then seen[k], rest[#rest + 1] = true, k end
    end
  end
  table.sort(rest)
  for _, k in ipairs(rest) do list[#list + 1] = k end
  local present = {}
  for _, k in ipairs(list) do
    for _, r in ipairs(rows) do
      if type(r) == "table" and r[k] ~= nil then present[#present + 1] = k; break end
    end
  end
  return present
end

local function scenario_results_table(summary, out)
  local rows = summary.results
  local cols = result_columns(summary, rows)
  local head = {}
  for i, k in ipairs(cols) do head[i] = "<th>" .. esc(k) .. "</th>" end
  out[#out + 1] = "<div class=\"wide\"><table class=\"results\"><tr>" .. table.concat(head) .. "</tr>"
  for _, r in ipairs(rows) do
    local cells = {}
    for i, k in ipairs(cols) do
      local v = type(r) == "table" and r[k] or nil
      -- null: shown as a dash, or as "not reached" for a time to a target
      local missing
      if k == "time_to_target_s" and (v == nil or v == NULL) then v, missing = nil, no_time_to_target(r, summary) end
      cells[i] = value_cell(k, v, missing)
    end
    out[#out + 1] = "<tr>" .. table.concat(cells) .. "</tr>"
  end
  out[#out + 1] = "</table></div>"
end

local function is_row_list(v)
  if type(v) ~= "table" or v == NULL or #v == 0 then return false end
  for _, r in ipairs(v) do
    if type(r) ~= "table" or r == NULL then return false end
  end
  return true
end

-- Every field of the scenario's summary.json but its results (a table of
-- their own) and its column order.
local function scenario_fields_table(summary, out)
  local keys = {}
  for k in pairs(summary) do
    local table_of_its_own = (k == "results" and is_row_list(summary.results)) or k == "columns"
    if type(k) == "string" and not table_of_its_own then keys[#keys + 1] = k end
  end
  table.sort(keys)
  if #keys == 0 then return end
  out[#out + 1] = "<table class=\"kv\">"
  for _, k in ipairs(keys) do
    out[#out + 1] = "<tr><th>" .. esc(k) .. "</th>" .. value_cell(k, summary[k]) .. "</tr>"
  end
  out[#out + 1] = "</table>"
end

-- The scenario-level figures of every run that has them (its summary.json).
local function scenario_section(runs, out)
  local any = false
  for _, run in ipairs(runs) do any = any or run.scenario_summary ~= nil end
  if not any then return end
  out[#out + 1] = "<section id=\"scenario\"><h2>Scenario results</h2>"
  for _, run in ipairs(runs) do
    local summary = run.scenario_summary
    if summary then
      if #runs > 1 then out[#out + 1] = "<h3>" .. esc(run.label) .. "</h3>" end
      local before = #out
      scenario_fields_table(summary, out)
      if is_row_list(summary.results) then scenario_results_table(summary, out) end
      if #out == before then -- not an object with fields (an array, say): as text
        out[#out + 1] = "<p>" .. esc(format_value("summary", summary)) .. "</p>"
      end
    end
  end
  out[#out + 1] = "</section>"
end

-- ---- sections ----

-- The training's cell: its label option when it has one (the algorithm
-- and the files' prefix in the title), else the algorithm and the prefix.
local function training_cell(algo)
  local s = algo.summary
  local algorithm = type(s.algorithm) == "string" and s.algorithm or algo.name
  local label, given = results.training_label(algo)
  local prefix_note = algo.prefix ~= "" and (" <span class=\"prefix\">(" .. esc(algo.prefix) .. ")</span>") or ""
  if not given then return "<td>" .. esc(algorithm) .. prefix_note .. "</td>" end
  local files = algo.prefix ~= "" and (", files " .. algo.prefix .. "*") or ""
  return fmt("<td title=\"%s\">%s</td>", esc("algorithm " .. algorithm .. files), esc(label))
end

-- A training's TCP account (summary.json tcp: emulated backends) as one
-- cell: RTOs, retransmissions, the worker steps that waited an RTO, and the
-- queue that dropped most; its warning in the title.
local function tcp_cell(t)
  if type(t) ~= "table" or type(t.rtos) ~= "number" then return "<td></td>" end -- backend none: no account
  local text = fmt("%d RTOs, %d retrans, %.0f %% of steps waited an RTO", t.rtos, t.retrans or 0,
                   100 * (t.rto_step_share or 0))
  if type(t.queue_link) == "string" and type(t.queue_drops) == "number" then
    text = text .. fmt("; %s dropped %d", t.queue_link, t.queue_drops)
  end
  local title = type(t.warning) == "string" and t.warning or ""
  return fmt("<td title=\"%s\">%s%s</td>", esc(title), type(t.warning) == "string" and "\u{26a0} " or "", esc(text))
end

local function summary_section(runs, out)
  out[#out + 1] = "<section id=\"summary\"><h2>Summary</h2>"
  local head = { "<tr>" }
  if #runs > 1 then head[#head + 1] = "<th>run</th>" end
  head[#head + 1] = "<th>training</th><th>mode</th>"
  for _, c in ipairs(CELLS) do head[#head + 1] = "<th>" .. esc(c[2]) .. "</th>" end
  head[#head + 1] = "<th>TCP</th><th>parameters</th></tr>"
  local rows = {}
  for _, run in ipairs(runs) do
    for _, algo in ipairs(run.algos) do
      local s = algo.summary
      if s then
        local row = { "<tr>" }
        if #runs > 1 then row[#row + 1] = "<td>" .. esc(run.label) .. "</td>" end
        row[#row + 1] = training_cell(algo)
        row[#row + 1] = "<td>" .. esc(s.mode ~= nil and format_value("mode", s.mode) or "") .. "</td>"
        for _, c in ipairs(CELLS) do
          local missing = c[4] and c[4](s) or ""
          row[#row + 1] = value_cell(c[1], s[c[1]], missing)
        end
        row[#row + 1] = tcp_cell(s.tcp)
        row[#row + 1] = "<td>" .. esc(s.parameters ~= nil and format_value("parameters", s.parameters) or "") .. "</td></tr>"
        rows[#rows + 1] = table.concat(row)
      end
    end
  end
  if #rows == 0 then
    out[#out + 1] = "<p class=\"note\">No algorithm summary (no &lt;prefix&gt;summary.json of a training) in these results.</p>"
  else
    out[#out + 1] = "<table>" .. table.concat(head) .. table.concat(rows, "\n") .. "</table>"
  end
  out[#out + 1] = "</section>"
end

local function image_uri(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("a")
  f:close()
  local kind = path:match("%.svg$") and "image/svg+xml" or "image/png"
  return "data:" .. kind .. ";base64," .. core._base64(bytes)
end

local TITLES = plot.titles

local function plots_section(files, skipped, out)
  out[#out + 1] = "<section id=\"plots\"><h2>Plots</h2>"
  local by_name = {}
  for _, f in ipairs(files) do
    local name, ext = f:match("([^/]+)%.(%a+)$")
    if ext == "png" or not by_name[name] then by_name[name] = f end
  end
  for _, f in ipairs(files) do
    local name = f:match("([^/]+)%.%a+$")
    if by_name[name] == f then
      out[#out + 1] = fmt("<figure><img src=\"%s\" alt=\"%s\"><figcaption>%s</figcaption></figure>",
                          image_uri(f), esc(TITLES[name] or name), esc(TITLES[name] or name))
    end
  end
  if #skipped > 0 then
    local names = {}
    for i, s in ipairs(skipped) do names[i] = esc(TITLES[s] or s) end
    out[#out + 1] = "<p class=\"note\">Not plotted (no data): " .. table.concat(names, "; ") .. ".</p>"
  end
  out[#out + 1] = "</section>"
end

-- Each distinct network drawing once: {dot=, networks={"run: name", ...}} in order.
local function distinct_networks(runs)
  local list, index = {}, {}
  for _, run in ipairs(runs) do
    for _, net in ipairs(type(run.info.topology) == "table" and run.info.topology or {}) do
      local dot, err
      if type(net) == "table" then dot, err = core._topology_dot(net) else err = "not a JSON object" end
      local key = dot or ("error:" .. err)
      if not index[key] then
        index[key] = #list + 1
        list[#list + 1] = { dot = dot, err = err, name = type(net) == "table" and tostring(net.name) or "?",
                            runs = {} }
      end
      local entry = list[index[key]]
      entry.runs[#entry.runs + 1] = run.label
    end
  end
  return list
end

-- SVG of one DOT text through Graphviz (in the scratch directory), or nil, why.
local function draw(ctx, dot, i)
  if not ctx.dot_path then return nil, "Graphviz's dot is not installed (Debian package graphviz)" end
  local name = fmt("topology%d.dot", i)
  local f = assert(io.open(ctx.tmp .. "/" .. name, "w"))
  f:write(dot)
  f:close()
  local status, svg, err = core._host_run({ ctx.dot_path, "-Tsvg", name }, { cwd = ctx.tmp, timeout = DOT_TIMEOUT_S })
  if status ~= 0 then return nil, "dot failed: " .. (status and (err:match("[^\n]+") or "") or svg) end
  return svg
end

local function topology_section(ctx, runs, out)
  out[#out + 1] = "<section id=\"topology\"><h2>Topology</h2>"
  local nets = distinct_networks(runs)
  if #nets == 0 then out[#out + 1] = "<p class=\"note\">No network was started in these runs.</p>" end
  for i, net in ipairs(nets) do
    local caption = fmt("network %s (%s)", net.name, table.concat(net.runs, "; "))
    local svg, why = nil, net.err
    if net.dot then svg, why = draw(ctx, net.dot, i) end
    if svg then
      out[#out + 1] = fmt("<figure><img src=\"data:image/svg+xml;base64,%s\" alt=\"%s\"><figcaption>%s</figcaption></figure>",
                          core._base64(svg), esc(caption), esc(caption))
    else
      out[#out + 1] = fmt("<p class=\"note\">%s: not drawn: %s</p>", esc(caption), esc(why))
      ctx.warnings[#ctx.warnings + 1] = "topology not drawn: " .. why
    end
  end
  out[#out + 1] = "</section>"
end

local RUN_FACTS = { "scenario", "status", "error", "start_time", "end_time", "wall_s", "backend", "seed", "versions" }

local function run_section(run, out)
  local info = run.info
  out[#out + 1] = "<article><h3>" .. esc(run.label) .. "</h3><table class=\"kv\">"
  out[#out + 1] = "<tr><th>results</th><td>" .. esc(run.dir) .. "</td></tr>"
  for _, key in ipairs(RUN_FACTS) do
    if info[key] ~= nil then
      out[#out + 1] = "<tr><th>" .. esc(key) .. "</th><td>" .. esc(format_value(key, info[key])) .. "</td></tr>"
    end
  end
  out[#out + 1] = "</table><h4>Parameters</h4>"
  local params, set = type(info.params) == "table" and info.params or {}, type(info.set) == "table" and info.set or {}
  local names = {}
  for k in pairs(params) do names[#names + 1] = tostring(k) end
  table.sort(names)
  if #names == 0 then out[#out + 1] = "<p class=\"note\">none</p>" end
  if #names > 0 then
    out[#out + 1] = "<table class=\"kv\">"
    for _, k in ipairs(names) do
      out[#out + 1] = fmt("<tr><th>%s</th><td>%s%s</td></tr>", esc(k), esc(format_value(k, params[k])),
                          set[k] ~= nil and " <span class=\"prefix\">(--set)</span>" or "")
    end
    out[#out + 1] = "</table>"
  end
  for _, w in ipairs(run.warnings) do out[#out + 1] = "<p class=\"note\">" .. esc(w) .. "</p>" end
  out[#out + 1] = "</article>"
end

local STYLE = [[
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 12em; } figure { margin: 1.5em 0; } figcaption { color: #555; font-size: .9em; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
div.wide { overflow-x: auto; } table.results td, table.results th { white-space: nowrap; }
.note { color: #8a5a00; } .prefix { color: #777; font-size: .85em; } .meta { color: #666; }
]]

local function page(ctx, runs, files, skipped)
  local title = #runs == 1 and ("hiernet run report: " .. runs[1].label)
                or fmt("hiernet comparison of %d runs", #runs)
  local out = { "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
    "<title>" .. esc(title) .. "</title><style>" .. STYLE .. "</style></head><body>",
    "<h1>" .. esc(title) .. "</h1>",
    "<p class=\"meta\">Written by hiernet " .. esc(core.version) .. " on " .. esc(os.date("!%Y-%m-%d %H:%M:%S UTC")) .. ".</p>" }
  scenario_section(runs, out)
  summary_section(runs, out)
  plots_section(files, skipped, out)
  topology_section(ctx, runs, out)
  out[#out + 1] = "<section id=\"runs\"><h2>Runs</h2>"
  for _, run in ipairs(runs) do run_section(run, out) end
  out[#out + 1] = "</section></body></html>"
  return table.concat(out, "\n") .. "\n"
end

-- report.run_tool{dirs=, out=, format=, x=} -> path of index.html, plot files,
-- warnings. The page goes to OUT (default: the one DIR), plots to OUT/plots.
function report.run_tool(o)
  local formats, x = plot.check_options(o)
  local runs = results.load_all(o.dirs)
  local dir = o.out or runs[1].dir
  local files, skipped = plot.render_runs(runs, dir .. "/plots", formats, x)
  local ctx = { dot_path = core._which("dot"), warnings = {}, tmp = core._mkdtemp(dir) }
  local ok, err = pcall(function()
    local f = assert(io.open(ctx.tmp .. "/index.html", "w"))
    f:write(page(ctx, runs, files, skipped))
    f:close()
    local moved, why = os.rename(ctx.tmp .. "/index.html", dir .. "/index.html")
    if not moved then results.tool_error(1, "cannot write %s/index.html: %s", dir, why) end
  end)
  core._rmtemp(ctx.tmp)
  if not ok then error(err, 0) end
  return dir .. "/index.html", files, ctx.warnings
end

-- Like run_tool, with errors raised as "hiernet.report: message" strings.
function report.run(o)
  local ok, path, files, warnings = pcall(report.run_tool, o)
  if ok then return path, files, warnings end
  if type(path) == "table" and path.tool_error then error("hiernet.report: " .. path.msg, 2) end
  error(path, 0)
end

report.usage = [[
usage: hiernet report DIR [DIR...] [--out OUTDIR] [--format png|svg|both]
                      [--x steps|time|epochs|samples]

Writes a self-contained HTML page (index.html: no network access needed)
of one run, or of several runs compared: the scenario's own figures (its
summary.json), the summary table of every algorithm, the plots of hiernet
plot, the topology drawn by Graphviz, and each run's facts and parameters. The page goes to DIR/index.html and the
plots to DIR/plots/ for one directory; comparing several needs --out, which
then holds index.html and plots/. Prints the page's path.

options:
  --out OUTDIR      where the page (and plots/) go (created if missing)
  --format F        image files written: png, svg or both (default both)
  --x AXIS          the x axis of the accuracy and loss plots: steps (the
                    default), time, epochs or samples (see hiernet plot)
]]

function report._cli(...)
  return plot.cli("report", function(args)
    local o, code = plot.parse_args("report", report.usage, args)
    if not o then return code end
    local path, _, warnings = report.run_tool(o)
    for _, w in ipairs(warnings) do io.stderr:write("hiernet report: warning: ", w, "\n") end
    io.stdout:write(path, "\n")
    return 0
  end, ...)
end

return report
