-- The training's TCP account (lua/hiernet/algo/tcp_account.lua) on fixed
-- inputs: counter sums over hosts seen at both ends, which worker steps
-- count as having waited an RTO, the exact warning line and when it stays
-- silent; and on backend none (no per-node counters) no account at all.
local hn = require("hiernet")
local T = require("hiernet.algo.tcp_account")

local function eq(got, want, what)
  assert(got == want, string.format("%s: got %s, want %s", what, tostring(got), tostring(want)))
end

-- Sums: growth per host, a host only in `after` (started later) not counted.
local before = { n = { a = { retrans = 10, rtos = 1, fast_retrans = 4, lost_retrans = 0, recoveries = 2 },
                       b = { retrans = 0, rtos = 0, fast_retrans = 0, lost_retrans = 0, recoveries = 0 } } }
local after = { n = { a = { retrans = 110, rtos = 41, fast_retrans = 24, lost_retrans = 3, recoveries = 12 },
                      b = { retrans = 7, rtos = 2, fast_retrans = 1, lost_retrans = 0, recoveries = 1 },
                      c = { retrans = 500, rtos = 50, fast_retrans = 0, lost_retrans = 0, recoveries = 0 } } }
local s = T.sums(before, after)
eq(s.retrans, 107, "retrans")
eq(s.rtos, 42, "rtos")
eq(s.fast_retrans, 21, "fast_retrans")
eq(s.lost_retrans, 3, "lost_retrans")
eq(s.recoveries, 11, "recoveries")

-- A worker step waited an RTO when comm + wait reach the smallest rto_min.
local acct = { rto_min_s = 0.2, rto_steps = 0 }
T.note_step(acct, { comm_ms = 150, wait_ms = 50 })   -- 200 ms: yes
T.note_step(acct, { comm_ms = 199.9 })               -- no
T.note_step(acct, { wait_ms = 900 })                 -- yes
T.note_step(acct, {})                                -- no
T.note_step(nil, { comm_ms = 1e6 })                  -- no account: nothing
eq(acct.rto_steps, 2, "rto_steps")

-- Steps that can have waited an RTO: at most rtos x workers of them.
local n, share = T.rto_share(415, 1, 6, 415) -- slow steps, one RTO
eq(n, 6, "one RTO: at most one step of each worker")
eq(share, 6 / 415, "its share")
n, share = T.rto_share(300, 9312, 64, 1000)
eq(n, 300, "many RTOs: the slow steps")
eq(share, 0.3, "their share")
eq(select(2, T.rto_share(0, 0, 4, 0)), 0, "no steps")

-- The warning: 41% of 1000 worker steps, 9312 RTOs, a queue that dropped.
local a = { rtos = 9312, rto_step_share = 0.41, rto_min_s = 0.2, queue_link = "ps-tor",
            queue_dir = "ba", queue_drops = 9312 }
eq(T.warning("bsp", 64, a), "warning: bsp: 64 workers: 41% of worker steps waited at least one "
  .. "minimum RTO (200 ms) on the network, 9312 RTOs in training; link ps-tor (ba) dropped 9312 "
  .. "packets at its queue; raise queue, lower rto_min, or use ecn (ecn_threshold on the link, "
  .. "tcp ecn on the nodes)", "warning")
a.queue_link, a.queue_drops = nil, nil
assert(T.warning("bsp", 64, a):find("no link counted queue drops", 1, true), "warning without a queue")
eq(T.warning("bsp", 64, { rtos = 9312, rto_step_share = 0.19, rto_min_s = 0.2 }), nil, "below 20%")
eq(T.warning("bsp", 64, { rtos = 0, rto_step_share = 0.9, rto_min_s = 0.2 }), nil, "slow steps, no RTO")

-- linkd's stalls in training: the kept ones begun between t0 and t1 (one
-- without a time is not placed); the warning names them before the advice.
local st = { stalls = { { at_s = 1, wall_s = 0.3 }, { at_s = 5, wall_s = 0.47 }, { wall_s = 0.9 },
                        { at_s = 12, wall_s = 0.25 } } }
local n_st, longest = T.linkd_stalls(st, 2, 12)
eq(n_st, 2, "stalls in [2, 12]")
eq(longest, 0.47, "the longest of them")
eq(T.linkd_stalls(nil, 0, 100), 0, "no account: no stalls")
eq(T.warning("bsp", 6, { rtos = 15, rto_step_share = 0.3, rto_min_s = 0.2, linkd_stalls = 2,
                         linkd_stall_longest_s = 0.47, queue_link = "ps-tor", queue_dir = "ba",
                         queue_drops = 3 }),
  "warning: bsp: 6 workers: 30% of worker steps waited at least one minimum RTO (200 ms) on the "
  .. "network, 15 RTOs in training; link ps-tor (ba) dropped 3 packets at its queue; hiernet-linkd "
  .. "waited for a core 2 times for at least the minimum RTO in training (longest 470 ms): timeouts "
  .. "then were the emulation's, not the network's (HIERNET_LINKD_PRIORITY=10 runs it at "
  .. "SCHED_FIFO); beyond those, raise queue, lower rto_min, or use ecn (ecn_threshold on the link, "
  .. "tcp ecn on the nodes)", "warning with linkd stalls")

-- Backend none: the peers share the host's counters, so there is no account.
local net = hn.network{ name = "none", backend = "none" }
local w = net:node("w")
net:start()
local ok, err = pcall(net.tcp, net)
assert(not ok and tostring(err):find("backend none has no per-node TCP counters", 1, true), tostring(err))
eq(T.start({ w }), nil, "account on backend none")
eq(T.finish(nil, "x", 1, 0), nil, "finish without an account")
net:stop()
