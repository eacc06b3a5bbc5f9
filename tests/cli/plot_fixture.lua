-- plot_fixture.lua — a results directory shaped like an algorithm run's, for
-- the plot and report tests: a small network (started on backend none, so
-- run.json holds its topology), then synthetic <prefix>steps.csv, eval.csv,
-- summary.json and links.csv as the algorithm library and the user backend
-- write them, and with --set scenario=true a scenario's own summary.json as
-- hiernet.experiment's finish writes it (use prefixes then). Deterministic (no randomness); --set changes the numbers.
--   hiernet run plot_fixture.lua --out DIR [--set prefixes=bsp_,asp_] [--set lr=0.1] DIR
local hn = require("hiernet")
local dir = ...
local prefixes = hn.param("prefixes", "")
local workers = hn.param("workers", 4)
local steps = hn.param("steps", 60)
local lr = hn.param("lr", 0.05)
local with_links = hn.param("links", true)
local note = hn.param("note", "plain")
local tier = hn.param("tier", "cloud")
local scenario = hn.param("scenario", false) -- also the scenario's own summary.json

local net = hn.network{ name = "fixture", backend = "none" }
local ps = net:node("ps", { tier = tier })
local sw = net:switch("sw")
net:link(ps, sw, { bw = "1Gbit", delay = "5ms" })
for w = 1, workers do
  net:node("w" .. w, { tier = "terminal", speed = 0.5 + w / 10 })
  net:link("w" .. w, sw, { bw = "20Mbit", delay = "2ms", loss = "0.1%" })
end
net:start()
net:stop()

local function write(name, text)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(text)
  f:close()
end

local function json_string(v)
  return '"' .. v:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

-- Samples per steps.csv row and the training set's size: 4 workers x 60
-- steps make 4 epochs; trainings start 3 s apart on the run's clock (1, 4,
-- 7, ...: summary.json's start_s), within links.csv's 10 s.
local BATCH, TRAIN_SAMPLES = 16, 960

local function algo(prefix, index)
  local async = prefix:find("asp") ~= nil
  local rec = hn.record(prefix .. "steps", { "time", "worker", "step", "loss", "compute_ms", "comm_ms",
                                            "wait_ms", "staleness", "lr", "k", "bytes", "samples" })
  local eval = hn.record(prefix .. "eval", { "time", "step", "accuracy", "loss" })
  local t = 0
  for s = 1, steps do
    for w = 1, workers do
      t = t + 0.01 * w / index
      local loss = 2.3 * math.exp(-s * lr / (1 + index)) + 0.05 * ((s * w) % 7) / 7
      rec:add{ time = t, worker = "w" .. w, step = s, loss = loss, compute_ms = 10 + 2 * w,
               comm_ms = 4 + w, wait_ms = async and 0 or (workers - w) * 1.5,
               staleness = async and ((s + w) % 4) or nil, lr = lr,
               k = (prefix:find("ada") and math.min(workers, 1 + s // 15)) or nil, bytes = 4000,
               samples = BATCH }
    end
    if s % 10 == 0 then
      eval:add{ time = t, step = s, accuracy = 0.9 - 0.8 * math.exp(-s * lr / 3) - 0.02 * index,
                loss = 2.3 * math.exp(-s * lr / 2) }
    end
  end
  write(prefix .. "summary.json", string.format(
    '{"algorithm": "%s", "mode": "%s", "parameters": {"lr": %g, "workers": %d, "note": %s}, ' ..
    '"final_accuracy": 0.87, "best_accuracy": 0.88, "time_to_target_s": %s, "steps": %d, ' ..
    '"updates_applied": %d, "bytes": %d, "wall_s": %g, "compute_share": 0.61, "prefix": "%s", ' ..
    '"train_samples": %d, "epochs": %g, "start_s": %g}',
    prefix == "" and "psgd" or prefix:gsub("_$", ""), async and "async" or "sync", lr, workers, json_string(note),
    index == 1 and "12.5" or "null", steps * workers, steps * workers, steps * workers * 4000, t, prefix,
    TRAIN_SAMPLES, steps * workers * BATCH / TRAIN_SAMPLES, 1 + 3 * (index - 1)))
end

local list = {}
for p in (prefixes .. ","):gmatch("([^,]*),") do list[#list + 1] = p end
for i, p in ipairs(list) do algo(p, i) end

if with_links then
  local links = hn.record("links", { "time_s", "network", "link", "dir", "up", "packets", "bytes",
                                      "delivered", "delivered_bytes", "drops_loss", "drops_queue",
                                      "drops_down", "queue_peak", "queue_len", "bw_bps" })
  local total = {} -- cumulative bytes per link direction, as linkd counts them
  for second = 1, 10 do
    for w = 1, workers do
      for _, d in ipairs({ "ab", "ba" }) do
        -- bytes per second, below the 20 Mbit/s of the link
        local rate = (d == "ab" and 2.0e6 or 0.5e6) * w / workers * (0.7 + 0.3 * math.sin(second + w))
        local key = w .. d
        total[key] = (total[key] or 0) + math.floor(rate)
        -- w1's uplink follows a trace (20, then 5, then 12 Mbit/s): the
        -- one direction the link rate figure draws
        local bw = (w == 1 and d == "ba") and (second <= 4 and 20e6 or second <= 7 and 5e6 or 12e6) or 20e6
        links:add{ time_s = second, network = "fixture", link = "w" .. w .. "-sw", dir = d, up = 1,
                   packets = second * 100, bytes = total[key], delivered = second * 99,
                   delivered_bytes = total[key] - second, drops_loss = 1, drops_queue = 0,
                   drops_down = 0, queue_peak = 3, queue_len = 0, bw_bps = bw }
      end
    end
  end
end

if scenario then
  -- shaped like sync_models': top-level figures, a table of results with a
  -- null (a target not reached), nested tables and big byte counts
  hn.write_json("summary", {
    scenario = "plot_fixture", seconds = 40, target_accuracy = 0.7,
    comm_compute_ratio = { ["10Gbit"] = 0.035512345, ["3Mbit"] = 21.8 },
    columns = { "label", "ratio", "time_to_target_s", "speedup_vs_bsp", "bytes" },
    results = {
      { label = "bsp @ 10Gbit", ratio = 0.035512345, time_to_target_s = 1.8, speedup_vs_bsp = 1.0,
        bytes = 281000000, steps = 120, prefix = "bsp_", fault_times = { cut = 6.02, heal = 15 } },
      { label = "asp @ 3Mbit", ratio = 21.8, time_to_target_s = hn.null, speedup_vs_bsp = hn.null,
        bytes = 411000000, steps = 1596, prefix = "asp_", fault_times = { cut = 6.1, heal = 15.2 } },
    },
  })
end
