-- Shared by the split tests (split_commands.lua, split_cuda.lua): a
-- model's gradient computed part by part with forward{} and backward{}.
--   local S = dofile(<this dir> .. "/lib/split_grad.lua")
local S = {}

-- A tensor's values, read in pieces of at most 65536.
function S.read_all(n, name, size)
  local out = {}
  for off = 0, size - 1, 65536 do
    local r = n:read{ tensor = name, range = { off, math.min(65536, size - off) } }
    for _, v in ipairs(r.values) do out[#out + 1] = v end
  end
  return out
end

-- The gradient of `parts` ({first, last} 1-based layers) on nodes[k] for
-- part k, summed over the parts, and the loss; nodes[1] holds the data
-- (its train split), each node gets model "w" of arch with seed `seed`.
function S.split_grad(nodes, arch, parts, size, batch, seed)
  for k = 1, #parts do nodes[k]:model{ name = "w", arch = arch, seed = seed } end
  local loss
  for k, p in ipairs(parts) do
    local n = nodes[k]
    local r = n:forward{ model = "w", layers = p, input = k > 1 and "x" or nil,
                         batch = k == 1 and batch or nil, labels = k > 1 and "lbl" or nil,
                         labels_out = k == 1 and "lbl" or nil, out = "y" }
    assert(r.batch == batch, arch .. " forward batch " .. tostring(r.batch))
    if k < #parts then
      n:send{ tensor = "y", to = nodes[k + 1], as = "x" }
      n:send{ tensor = "lbl", to = nodes[k + 1], as = "lbl" }
    else
      loss = r.loss
    end
  end
  local sum = {}
  for k = #parts, 1, -1 do
    local n = nodes[k]
    n:backward{ model = "w", layers = parts[k], grad_in = k < #parts and "dy" or nil,
                grad_out = k > 1 and "dx" or nil, out = "g" }
    if k > 1 then n:send{ tensor = "dx", to = nodes[k - 1], as = "dy" } end
    for i, v in ipairs(S.read_all(n, "g", size)) do sum[i] = (sum[i] or 0) + v end
  end
  return sum, loss
end

-- Raises unless got equals want to tol relative to want's largest element.
function S.compare(got, want, tol, what)
  local worst, scale = 0, 0
  for i = 1, #want do
    worst = math.max(worst, math.abs(got[i] - want[i]))
    scale = math.max(scale, math.abs(want[i]))
  end
  if #got ~= #want or not (scale > 0 and worst <= tol * scale) then
    error(string.format("%s: gradient differs by %g (largest %g, %d of %d elements)", what, worst, scale,
                        #got, #want), 2)
  end
end

return S
