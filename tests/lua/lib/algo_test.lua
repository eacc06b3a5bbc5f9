-- Shared by the algorithm tests (tests/lua/algo_*.lua): a small synthetic
-- problem, networks on backend none, and checks that say what failed.
--   local T = dofile(<this dir> .. "/lib/algo_test.lua")
local hn = require("hiernet")

local T = {}

-- Four Gaussian classes in 16 dimensions: a model learns it in tens of steps.
T.dataset = { name = "synthetic", n = 2400, dim = 16, classes = 4, noise = 0.4, test_n = 600 }
T.model = "mlp:16-32-4"

-- A network of backend none: `server` (unless no_server) and workers w1..wn.
function T.network(name, n_workers, o)
  o = o or {}
  local net = hn.network{ name = name, backend = "none" }
  local server = not o.no_server and net:node("server", { tier = "cloud" }) or nil
  local workers = {}
  for i = 1, n_workers do
    workers[i] = net:node("w" .. i, { tier = "terminal", speed = o.speeds and o.speeds[i] or nil })
    if server then net:link(server, workers[i]) end
  end
  net:start()
  return net, server, workers
end

function T.eq(got, want, what)
  if got ~= want then error(string.format("%s: got %s, want %s", what, tostring(got), tostring(want)), 2) end
end

function T.le(got, limit, what)
  if not (got <= limit) then error(string.format("%s: %s is more than %s", what, tostring(got), tostring(limit)), 2) end
end

function T.near(got, want, rel, what)
  local tol = rel * math.max(1, math.abs(want))
  if not (math.abs(got - want) <= tol) then
    error(string.format("%s: got %.9g, want %.9g (tolerance %g)", what, got, want, tol), 2)
  end
end

-- The loss fell to at most `factor` of where it started.
function T.learned(s, factor, what)
  if not (s.final_loss <= factor * s.initial_loss) then
    error(string.format("%s: loss %.4f -> %.4f, not below %.2f x the start", what, s.initial_loss,
                        s.final_loss, factor), 2)
  end
end

-- Rows of a CSV of the run's results directory, as tables by column.
T.csv = require("hiernet.experiment").read_csv

-- Every value of a tensor (small tensors), read in pieces of 65536.
function T.read_all(node, tensor, size)
  local out = {}
  for off = 0, size - 1, 65536 do
    local vals = node:read{ tensor = tensor, range = { off, math.min(65536, size - off) } }.values
    for _, v in ipairs(vals) do out[#out + 1] = v end
  end
  return out
end

return T
