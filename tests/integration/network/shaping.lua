-- shaping: iperf3 TCP goodput through rate-limited links is within 5% of the
-- ideal, framing accounted, in both directions of the path's links, and
-- link:set{bw=} takes effect.
--
--   kernel backend (veth + HTB): HTB counts the 1514-byte Ethernet frame of a
--     1448-byte TCP segment (timestamps on): ideal = rate * 1448 / 1514.
--     Links 100 Mbit and 1 Gbit, and a third of 100 Mbit set to 50 Mbit
--     once started, measured against its data's direction at the same
--     time as the first (150 Mbit/s in all).
--   user backend (hiernet-linkd): linkd counts frames as HTB does, so the
--     ideal is the same: rate * 1448 / 1514.
--     Links 10 Mbit, 100 Mbit and 1 Gbit, and a fourth of 100 Mbit set to
--     30 Mbit once started. Also: linkd's counters agree with what iperf3
--     moved. The 10, 100 and set 30 Mbit runs go at once, each over a link
--     of its own (140 Mbit/s in all, a small load for linkd); the 1 Gbit
--     run, which keeps linkd busy, alone. (The set link measured on its
--     own after the others took one more run: 4 s of the test.)
-- Args: backend=kernel|user, secs= (measured seconds after iperf3's omitted
-- first one; default 2 on the kernel backend, as netns.test_topo_shape's
-- HTB runs, 3 s less test: within 0.02-1.4% of the ideal in 6 of 7 runs
-- at load 10-19 from other work (1 Gbit/s 7.6% short in the seventh;
-- over 3 s, 2 of 4 runs passed at load 12-33, 1 Gbit/s 18.9% short in
-- one at load 18); both fail at load 30 and more;
-- 3 on the user backend, whose linkd missed 5% at 100 Mbit/s or 1 Gbit/s
-- at that load over 2 s and over 3 s alike, so that was not judged).
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local backend = A.backend or "kernel"
local secs = tonumber(A.secs or (backend == "kernel" and 2 or 3))
local TOLERANCE = 0.05

local plans = {
  kernel = { factor = 1448 / 1514, rates = { "100Mbit", "1Gbit", "100Mbit" }, set = { link = 3, bw = "50Mbit" },
             groups = { { 1, 3 }, { 2 } } },
  user = { factor = 1448 / 1514, rates = { "10Mbit", "100Mbit", "1Gbit", "100Mbit" },
           set = { link = 4, bw = "30Mbit" }, groups = { { 1, 2, 4 }, { 3 } } },
}
local plan = assert(plans[backend], "backend must be kernel or user")

local function bits(rate)
  local v, unit = rate:match("^([%d%.]+)(%a+)$")
  return tonumber(v) * ({ Kbit = 1e3, Mbit = 1e6, Gbit = 1e9 })[unit]
end

-- A line h1 - h2 - ... with one link per rate; each measurement uses one link.
local net = hn.network{ name = "shape", backend = backend, seed = 5 }
local hosts, links = { net:node("h1") }, {}
for i, rate in ipairs(plan.rates) do
  hosts[i + 1] = net:node("h" .. (i + 1))
  links[i] = net:link(hosts[i], hosts[i + 1], { bw = rate })
end
net:start()
H.check(net.backend == backend, "network backend is %s, asked for %s", net.backend, backend)
H.own(net)

local failures = {}
local function measure(i, rate, server, client)
  local ideal = bits(rate) * plan.factor
  local s0 = backend == "user" and links[i]:stats() or nil
  local got = H.goodput(server, client, secs)
  local err = got / ideal - 1
  local ok = math.abs(err) <= TOLERANCE
  H.log("%-8s link %s->%s: %8.2f Mbit/s, ideal %8.2f (%+.2f%%) %s", rate, client.name, server.name,
        got / 1e6, ideal / 1e6, err * 100, ok and "ok" or "FAIL")
  if not ok then
    failures[#failures + 1] = string.format("%s %s->%s: %.2f Mbit/s vs ideal %.2f (%+.1f%%)", rate,
                                            client.name, server.name, got / 1e6, ideal / 1e6, err * 100)
  end
  if s0 then
    -- The data direction of the link carried at least the goodput's bytes
    -- (plus headers and slow start) and dropped nothing to loss.
    local s1 = links[i]:stats()
    local dir_key = (client == links[i].a) and "ab" or "ba"
    local moved = s1[dir_key].delivered_bytes - s0[dir_key].delivered_bytes
    local expect = got * (secs + 1) / 8 / plan.factor
    H.log("         linkd %s delivered %.1f MB (goodput over %d s with headers: %.1f MB), drops_loss %d",
          dir_key, moved / 1e6, secs + 1, expect / 1e6, s1[dir_key].drops_loss - s0[dir_key].drops_loss)
    if moved < expect * 0.95 then
      failures[#failures + 1] = string.format("%s: linkd delivered %.0f bytes, iperf3 moved at least %.0f", rate, moved, expect)
    end
  end
end

-- link:set{bw=} takes effect on the started network; its link is measured
-- from its far end, so the other direction of a link is shaped too.
local k = plan.set.link
local t0 = hn.now()
links[k]:set{ bw = plan.set.bw }
H.log("link:set{bw=%q} took %.1f ms", plan.set.bw, (hn.now() - t0) * 1000)

-- Each group's links at once (groups = which links' runs share the time).
for _, group in ipairs(plan.groups) do
  local runs = {}
  for _, i in ipairs(group) do
    if i == k then
      runs[#runs + 1] = hn.spawn(measure, k, plan.set.bw, hosts[k], hosts[k + 1])
    else
      runs[#runs + 1] = hn.spawn(measure, i, plan.rates[i], hosts[i + 1], hosts[i])
    end
  end
  hn.wait_all(runs)
end

net:stop()
H.check(#failures == 0, "%d goodput check(s) failed:\n%s", #failures, table.concat(failures, "\n"))
H.log("PASS shaping (%s)", backend)
