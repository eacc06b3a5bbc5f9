-- Every family's summary has every field docs/algorithms.md lists (its
-- "Metrics" section, read here, so the page and the code cannot drift
-- apart): summary.json holds each key, JSON null where not reached (no
-- target_accuracy given here, so time_to_target_s and steps_to_target are
-- null); the returned table has the same values, nil where the JSON is null.
local hn = require("hiernet")
local core = require("hiernet.core")
local ps = require("hiernet.algo.ps")
local ar = require("hiernet.algo.allreduce")
local dc = require("hiernet.algo.decentral")
local hier = require("hiernet.algo.hier")
local topo = require("hiernet.topo")
local here = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(here .. "lib/algo_test.lua")

-- The field names between the backquotes after "`<prefix>summary.json`:".
local function documented_fields()
  local f = assert(io.open(here .. "../../docs/algorithms.md"))
  local page = f:read("a")
  f:close()
  local list = page:match("`<prefix>summary%.json`:%s*`([^`]*)`")
  assert(list, "docs/algorithms.md: no `<prefix>summary.json`: `field, ...` list")
  local names = {}
  for name in list:gmatch("[%w_]+") do names[#names + 1] = name end
  assert(#names >= 20, "docs/algorithms.md lists only " .. #names .. " summary fields")
  return names
end

local function read_summary(prefix)
  local f = assert(io.open(hn.results_dir() .. "/" .. prefix .. "summary.json"))
  local json = assert(core._json_decode(f:read("a"), hn.null))
  f:close()
  return json
end

local FIELDS = documented_fields()

local function check(s, family)
  local json = read_summary(s.prefix)
  for _, k in ipairs(FIELDS) do
    local v = json[k]
    if v == nil then error(string.format("%s: summary.json lacks '%s'", family, k)) end
    if v == hn.null then
      T.eq(s[k], nil, family .. ": returned " .. k .. " (JSON null)")
    elseif type(v) ~= "table" then
      T.eq(s[k], v, family .. ": returned " .. k)
    end
  end
  -- Not reached (no target given): null, not missing.
  T.eq(json.time_to_target_s, hn.null, family .. ": time_to_target_s")
  T.eq(json.steps_to_target, hn.null, family .. ": steps_to_target")
  T.eq(json.target_accuracy, hn.null, family .. ": target_accuracy")
  T.eq(json.algorithm, family, family .. ": algorithm")
end

local common = { model = T.model, dataset = T.dataset, batch = 16, steps = 4, eval_every = 2,
                 progress = false, worker_opt = { lr = 0.1 } }
local function opts(extra) return T.with(common, extra) end

local net, server, workers = T.network("sf", 3)
check(ps.train(opts{ server = server, workers = workers, mode = "bsp" }), "ps")
check(ar.train(opts{ workers = workers, algo = "ring" }), "allreduce")
check(dc.train(opts{ workers = workers, algo = "dpsgd", graph = "complete" }), "decentral")

local hnet = hn.network{ name = "sfh", backend = "none" }
local t = topo.hier(hnet, { clouds = 1, edges_per_cloud = 2, terminals_per_edge = 2 })
hnet:start()
check(hier.train(opts{ workers = t.terminal, tau1 = 2, tau2 = 1 }), "hier")
print("algo_summary_fields: " .. #FIELDS .. " fields in 4 families: ok")
