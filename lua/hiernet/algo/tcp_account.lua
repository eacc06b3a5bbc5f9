-- tcp_account.lua — a training's TCP account for its summary.json: how much
-- its hosts' TCP retransmitted and timed out between the start of training
-- and its end (net:tcp(), every network of the training's nodes), how many
-- worker steps spent at least one minimum RTO communicating or waiting, and
-- the warning when those dominate, naming the link whose queue dropped most
-- (links.csv's drops_queue over the training, where the backend counts it).
-- Backend none has no per-node counters: there the account is nil.
local hn = require("hiernet")

local M = {}

local KEYS = { "retrans", "rtos", "fast_retrans", "lost_retrans", "recoveries" }
-- A training whose worker steps waited an RTO this often is called RTO-bound.
M.WARN_SHARE = 0.2

-- The networks of nodes, each once, in the order met (also the
-- background-traffic account's: job.lua).
function M.networks_of(nodes)
  local seen, list = {}, {}
  for _, n in ipairs(nodes) do
    local net = n.network
    if net and not seen[net] then seen[net] = true; list[#list + 1] = net end
  end
  return list
end

-- {network name = net:tcp()} for every network of nodes that has counters.
local function snapshot(nets)
  local snap, any = {}, false
  for _, net in ipairs(nets) do
    local ok, c = pcall(net.tcp, net)
    if ok then snap[net.name] = c; any = true end
  end
  return any and snap or nil
end

-- Training starts: the counters now and the stall an RTO costs at least
-- (the smallest rto_min of the hosts). nil where nothing counts.
function M.start(nodes)
  local nets = M.networks_of(nodes)
  local before = snapshot(nets)
  if not before then return nil end
  local rto_min_s
  for _, nodes_of in pairs(before) do
    for _, c in pairs(nodes_of) do
      if not rto_min_s or c.rto_min_s < rto_min_s then rto_min_s = c.rto_min_s end
    end
  end
  return { nets = nets, before = before, rto_min_s = rto_min_s or 0.2, rto_steps = 0, t0 = hn.now() }
end

-- A worker step (Job:step_row's row): did its communication take at least
-- one minimum RTO?
function M.note_step(acct, r)
  if not acct then return end
  if ((r.comm_ms or 0) + (r.wait_ms or 0)) / 1000 >= acct.rto_min_s then
    acct.rto_steps = acct.rto_steps + 1
  end
end

-- The worker steps that can have waited an RTO, and their share: those
-- whose communication reached rto_min, but at most rtos x workers (one RTO
-- stalls at most one step of each worker). A step slowed by a narrow link
-- alone is not an RTO's: one RTO in a training of slow steps (the
-- quickstart's ASP, ~430 ms a step on its uplinks) is 1 x workers steps.
function M.rto_share(rto_steps, rtos, workers, worker_steps)
  local n = math.min(rto_steps, rtos * math.max(workers, 1))
  return n, worker_steps > 0 and n / worker_steps or 0
end

-- Sums of the counters' growth over every host counted at both ends.
function M.sums(before, after)
  local sum = {}
  for _, k in ipairs(KEYS) do sum[k] = 0 end
  for net, nodes in pairs(after) do
    for node, c in pairs(nodes) do
      local p = before[net] and before[net][node]
      if p then
        for _, k in ipairs(KEYS) do sum[k] = sum[k] + math.max(0, c[k] - p[k]) end
      end
    end
  end
  return sum
end

-- The link direction whose queue dropped most between t0 and t1 (links.csv),
-- as {link=, dir=, drops=}, or nil (no file, or no queue drops counted).
function M.worst_queue(t0, t1)
  local ok, rows = pcall(require("hiernet.experiment").read_csv, "links")
  if not ok then return nil end
  local base, last = {}, {} -- per link direction: the count at t0 (0 before any row), at t1
  for _, row in ipairs(rows) do
    local t, d = tonumber(row.time_s), tonumber(row.drops_queue)
    if t and d then
      local key = row.network .. "\0" .. row.link .. "\0" .. row.dir
      if t <= t0 then base[key] = d end
      if t <= t1 + 1 then last[key] = { d = d, row = row } end -- the sample just after t1 too
    end
  end
  local worst
  for key, l in pairs(last) do
    local drops = l.d - (base[key] or 0)
    if drops > 0 and (not worst or drops > worst.drops) then
      worst = { link = l.row.link, dir = l.row.dir, drops = drops }
    end
  end
  return worst
end

-- linkd's stalls (hn.overload().linkd_stalls, docs/lua-api.md "Overload")
-- that began between t0 and t1 on the run's clock, of the kept ones:
-- their number and the longest's wall seconds. 0 without an account.
function M.linkd_stalls(stalls, t0, t1)
  local n, longest = 0, 0
  for _, s in ipairs(stalls and stalls.stalls or {}) do
    if s.at_s and s.at_s >= t0 and s.at_s <= t1 then
      n = n + 1
      longest = math.max(longest, s.wall_s)
    end
  end
  return n, longest
end

local ADVICE = "raise queue, lower rto_min, or use ecn (ecn_threshold on the link, tcp ecn on the nodes)"

-- The warning line, or nil: share of worker steps that waited an RTO.
-- Where hiernet-linkd stalled meanwhile it says so first: those RTOs are
-- the emulation's (docs/fidelity.md, "linkd stalls and RTO episodes").
function M.warning(label, workers, a)
  if a.rtos == 0 or not a.rto_step_share or a.rto_step_share < M.WARN_SHARE then return nil end
  local where = a.queue_drops and string.format("link %s (%s) dropped %d packets at its queue",
    a.queue_link, a.queue_dir, a.queue_drops) or "no link counted queue drops (kernel backend: see tc -s qdisc)"
  local advice = ADVICE
  if (a.linkd_stalls or 0) > 0 then
    advice = string.format("hiernet-linkd waited for a core %d time%s for at least the minimum RTO "
      .. "in training (longest %.0f ms): timeouts then were the emulation's, not the network's "
      .. "(HIERNET_LINKD_PRIORITY=10 runs it at SCHED_FIFO); beyond those, %s", a.linkd_stalls,
      a.linkd_stalls == 1 and "" or "s", 1000 * a.linkd_stall_longest_s, ADVICE)
  end
  return string.format("warning: %s: %d workers: %.0f%% of worker steps waited at least one "
    .. "minimum RTO (%g ms) on the network, %d RTOs in training; %s; %s",
    label, workers, 100 * a.rto_step_share, a.rto_min_s * 1000, a.rtos, where, advice)
end

-- Training ends: the account for summary.json (and the warning, logged).
function M.finish(acct, label, workers, worker_steps)
  if not acct then return nil end
  local after = snapshot(acct.nets)
  if not after then return nil end
  local a = M.sums(acct.before, after)
  a.rto_min_s = acct.rto_min_s
  a.rto_steps, a.rto_step_share = M.rto_share(acct.rto_steps, a.rtos, workers, worker_steps)
  local now = hn.now()
  local worst = M.worst_queue(acct.t0, now)
  if worst then a.queue_link, a.queue_dir, a.queue_drops = worst.link, worst.dir, worst.drops end
  local ok, o = pcall(hn.overload)
  a.linkd_stalls, a.linkd_stall_longest_s = M.linkd_stalls(ok and o.linkd_stalls, acct.t0, now)
  local line = M.warning(label, workers, a)
  if line then hn.log(line); a.warning = line end
  return a
end

return M
