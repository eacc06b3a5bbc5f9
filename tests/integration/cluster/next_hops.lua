-- next_hops.lua — the next hops of a spread network's paths, read with
-- `ip route get` inside its nodes, for the move tests (dofile'd by
-- test_cluster_spread_move.sh and test_cluster_spread_move_lost.sh).
-- hops(nodes) returns an object whose refresh() notes which node holds
-- each address (a moved end takes its address along: call it after a
-- move) and whose line(label, pairs) gives "label a>hop ..." for pairs
-- { {a, dst}, ... }: the node holding a's gateway to dst, or dst itself
-- (on-link), or "none".
return function(nodes)
  local owner = {}
  local self = {}
  function self.refresh()
    owner = {}
    for _, n in ipairs(nodes) do
      for a in n:run({ "ip", "-o", "-4", "addr", "show" }).out:gmatch("inet ([%d.]+)/") do owner[a] = n.name end
    end
  end
  local function hop(n, dst)
    local out = n:run({ "ip", "route", "get", dst.addr }).out
    local via = out:match(" via ([%d.]+)")
    return via and (owner[via] or ("?" .. via)) or (out:match(" dev ") and dst.name or "none")
  end
  function self.line(label, pairs)
    local t = {}
    for _, x in ipairs(pairs) do t[#t + 1] = x[1].name .. ">" .. hop(x[1], x[2]) end
    return label .. " " .. table.concat(t, " ")
  end
  self.refresh()
  return self
end
