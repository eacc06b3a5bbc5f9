-- hiernet.algo.check: the checkers of training options, shared by every
-- family (job.check is this module). check.X(what, v) returns the checked
-- (and defaulted) value, or raises at the scenario's line (hiernet.where)
-- an error that starts with `what` (the option) and names the value.
local hn = require("hiernet")
local where = require("hiernet.where")

local fail = where.fail

local check = {}

local function describe(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

function check.posint(what, v)
  if math.type(v) ~= "integer" or v < 1 then fail("%s: expected a positive integer, got %s", what, describe(v)) end
  return v
end

function check.nonnegint(what, v)
  if math.type(v) ~= "integer" or v < 0 then fail("%s: expected an integer >= 0, got %s", what, describe(v)) end
  return v
end

function check.posnumber(what, v)
  if type(v) ~= "number" or not (v > 0) or v == math.huge then
    fail("%s: expected a positive number, got %s", what, describe(v))
  end
  return v
end

function check.nonnegnumber(what, v)
  if type(v) ~= "number" or not (v >= 0) or v == math.huge then
    fail("%s: expected a number >= 0, got %s", what, describe(v))
  end
  return v
end

function check.fraction(what, v)
  if type(v) ~= "number" or not (v > 0 and v <= 1) then
    fail("%s: expected a number in (0, 1], got %s", what, describe(v))
  end
  return v
end

function check.func(what, v)
  if type(v) ~= "function" then fail("%s: expected a function, got %s", what, describe(v)) end
  return v
end

function check.boolean(what, v)
  if type(v) ~= "boolean" then fail("%s: expected true or false, got %s", what, describe(v)) end
  return v
end

function check.string(what, v)
  if type(v) ~= "string" or v == "" then fail("%s: expected a non-empty string, got %s", what, describe(v)) end
  return v
end

-- A model spec, parsed by the peers' own parser (hn.model_check): a bad
-- one is refused here, before any peer is asked to build it.
function check.model(what, v)
  check.string(what, v)
  local ok, err = hn.model_check(v)
  if not ok then fail("%s: %s", what, err) end
  return v
end

function check.name(what, v)
  if type(v) ~= "string" or not v:match("^[A-Za-z0-9_.-]*$") then
    fail("%s: expected letters, digits, '_', '.' or '-', got %s", what, describe(v))
  end
  return v
end

function check.oneof(...)
  local allowed = { ... }
  return function(what, v)
    for _, a in ipairs(allowed) do if v == a then return v end end
    fail("%s: expected one of %s, got %s", what, table.concat(allowed, ", "), describe(v))
  end
end

local function is_node(v)
  return type(v) == "userdata" and pcall(function() return v.kind end)
end

function check.node(what, v)
  if not is_node(v) then fail("%s: expected a node, got %s", what, describe(v)) end
  if v.kind ~= "host" then fail("%s: node '%s' is a switch and runs no peer", what, v.name) end
  return v
end

function check.nodes(what, v)
  if type(v) ~= "table" or #v == 0 then fail("%s: expected a non-empty list of nodes, got %s", what, describe(v)) end
  local seen = {}
  for i, n in ipairs(v) do
    check.node(what .. "[" .. i .. "]", n)
    if seen[n.name] then fail("%s: node '%s' is listed twice", what, n.name) end
    seen[n.name] = true
  end
  return v
end

-- A table with only the given keys, each checked: fields = {key = checker}.
function check.fields(fields)
  return function(what, v)
    if type(v) ~= "table" then fail("%s: expected a table, got %s", what, describe(v)) end
    local out = {}
    for k, val in pairs(v) do
      local c = fields[k]
      if not c then fail("%s: unknown field '%s'", what, tostring(k)) end
      out[k] = c(what .. "." .. k, val)
    end
    return out
  end
end

local OPTIM_METHODS = { "sgd", "momentum", "nesterov", "adam" }
-- The peer's defaults (kernels/optim.h) apply to what is not given.
check.optimizer = check.fields{
  method = check.oneof(table.unpack(OPTIM_METHODS)),
  lr = check.posnumber, momentum = check.nonnegnumber, beta1 = check.nonnegnumber,
  beta2 = check.nonnegnumber, eps = check.posnumber, weight_decay = check.nonnegnumber,
}

local dataset_fields = check.fields{
  name = check.string, path = check.string,
  partition = check.oneof("shuffle", "sample", "dirichlet"), alpha = check.posnumber,
  seed = check.nonnegint, n = check.posint, dim = check.posint, classes = check.posint,
  noise = check.nonnegnumber, test_n = check.posint,
}
function check.dataset(what, v)
  if type(v) == "string" then v = { name = v } end
  local d = dataset_fields(what, v)
  d.name = d.name or "fashion-mnist"
  if d.alpha and d.partition ~= "dirichlet" then
    fail("%s.alpha: only with partition = \"dirichlet\"", what)
  end
  return d
end

check.compress = function(what, v)
  if v == nil or v == false or v == "none" then return nil end
  if type(v) == "string" then v = { method = v } end
  local c = check.fields{
    method = check.oneof("none", "topk", "int8", "sign"), ratio = check.fraction,
    error_feedback = check.boolean,
  }(what, v)
  if c.method == nil then fail("%s.method: missing (topk, int8 or sign)", what) end
  if c.method == "none" then return nil end
  if c.ratio and c.method ~= "topk" then fail("%s.ratio: only with method = \"topk\"", what) end
  c.ratio = c.ratio or 0.01
  if c.error_feedback == nil then c.error_feedback = true end
  return c
end

-- For job (summary parameters, error messages): a value as an error shows
-- it, and whether v is a node.
check.describe = describe
check.is_node = is_node

return check
