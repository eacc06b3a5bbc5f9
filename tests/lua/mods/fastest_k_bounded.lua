-- A synchronization model of one's own, written outside the library the way
-- docs/writing-algorithms.md ("Example: bounded-staleness fastest-k") shows:
-- this file sits in the scenario's folder and is loaded with
-- require("mods.fastest_k_bounded"), no rebuild. It is that page's example
-- verbatim; tests/lua/own_algorithm.lua checks what it promises.
--
-- Fastest-k that keeps late pushes up to max_late versions old, added into
-- the next round's aggregate with weight 1 / (1 + staleness); older ones
-- are dropped.
local ps = require("hiernet.algo.ps")
local job = require("hiernet.algo.job")
local check, fail = job.check, job.fail

local function fastest_k_bounded(o, n)
  local k, max_late = o.k or math.max(1, n // 2), o.max_late or 2
  if k > n then fail("ps.train: option 'k': %d is more than the %d workers", k, n) end
  return {
    name = "fastest-k-bounded", k = k,
    summary = { max_late = max_late }, -- into summary.json
    accept = function(_, push, S)
      if push.version == S.version then return "fresh" end
      return push.staleness <= max_late and "late" or "drop"
    end,
    merge_into = "acc", -- the aggregate of the round under way
    late_weight = function(_, tau) return 1 / (1 + tau) end,
    ready = function(_, S) return S.round.n >= math.min(k, S.n_alive) end,
    may_start = function(_, i, S)
      local v = S.pushed_version[i]
      return v == nil or v < S.version
    end,
  }
end

-- k is fastest-k's option too; max_late is new. Both are errors with any
-- other mode.
ps.add_mode("fastest-k-bounded", fastest_k_bounded, { k = check.posint, max_late = check.nonnegint })

return ps
