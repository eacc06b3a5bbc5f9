-- auto_dilation_dataplane: dilation = "auto" judges the data plane too.
-- max(4, flows) hosts on a switch run `flows` greedy TCP flows in a ring
-- (h1->h2, h2->h3, ...) over links of `bw`, no compute at all, so only the
-- data plane's samples can decide.
--   expect=dilate  bw=100Gbit: no host here forwards that in real time, so
--                  the probe's data-plane window finds the links short of
--                  their rate while the host (or one linkd) is saturated by
--                  this run, and the run starts again at some D > 1
--                  (checked: the rerun's dilation, run.json's reason and
--                  dataplane figures, the probe's records kept)
--                  A host so busy with other programs that this run's data
--                  plane got under 0.6 of a core (the reason says so), or its
--                  links under 0.1% of their rate (no active sample), cannot
--                  test this: the run prints a SKIP line (run_scenario.sh
--                  then exits 77)
--   expect=keep    bw=20Mbit: the links keep their rate, so D stays 1 even
--                  on a host busy with other programs
--   expect=rejudge bw=5Gbit: the flows run in the reruns too, so each
--                  rerun's own data-plane window judges again at its D: it
--                  keeps D (its reason is added) or starts once more above
--                  D, at most 2 reruns (the last runs no flows); checked:
--                  run.json's history against the nested dilation-probe/
--                  records, each step above the last, a rerun's judgement
--                  worded at its dilation. SKIP when the first probe kept 1
--                  (see dilate) or D is too large for the rerun's window to
--                  close within the test's time (RERUN_WALL_S). One linkd
--                  carries all 4 flows, about 2 Gbit/s on a 2-core host
--                  (32-38% of 5 Gbit/s, D 4-5, 22-26 s of test; at 10
--                  Gbit/s D 7 and 35 s); a host 2.5 times faster keeps 1
--   max=M          (with dilate) dilation_max = M: the rerun runs at M
--                  exactly, its reason says the larger need was cut to M,
--                  run.json's dilation has "max": M
-- Emulated time: 5 s of flows at D = 1 (the window needs 3 active samples
-- of one emulated second after a first one); the rerun starts and stops.
local hn = require("hiernet")
local core = require("hiernet.core")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local expect = A.expect or "dilate"
local flows = tonumber(A.flows or 4)

local most = tonumber(A.max)
local net = hn.network{ name = "autodp", backend = A.backend or "user", seed = 5, dilation = "auto",
                        dilation_max = most }
local sw, hosts, n = net:switch("s"), {}, math.max(4, flows)
local link = { bw = A.bw or "100Gbit" }
if (A.backend or "user") == "user" then link.delay = "0.05ms" end
for i = 1, n do
  hosts[i] = net:node("h" .. i)
  net:link(hosts[i], sw, link)
end
net:start()
H.own(net)
local rerun = net.dilation > 1

local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end
-- How many runs this one follows: each rerun's dilation-probe/ holds the
-- run it ended, nested.
local depth, probe_dir = 0, hn.results_dir()
while read(probe_dir .. "/dilation-probe/run.json") do
  depth, probe_dir = depth + 1, probe_dir .. "/dilation-probe"
end
-- 5 emulated seconds give the window its 3 active samples after a first
-- one; a rerun's take D times that in wall seconds.
local RERUN_WALL_S = 90
local flowing = not rerun or (expect == "rejudge" and depth < 2 and 5 * net.dilation <= RERUN_WALL_S)
-- Otherwise the rerun only shows its dilation: flows at D of 100 and more
-- would take their peers tens of seconds to close.
local started = {}
for i = 1, flowing and flows or 0 do
  started[i] = net:traffic{ from = hosts[i], to = hosts[i % n + 1], proto = "tcp" }
end
-- A rerun's window closes after about 4 emulated seconds, when its
-- judgement at its D reaches run.json (or the run ends for the next
-- rerun): its flows stop then, not after 5 s, which at D = 6 is 6 s of
-- wall time less.
local function judged()
  local text = read(hn.results_dir() .. "/run.json") or ""
  return text:find(string.format("data plane at dilation %g,", net.dilation), 1, true) ~= nil
end
if flowing then
  local t0 = hn.now()
  repeat hn.sleep(0.25) until hn.now() - t0 >= 5 or (rerun and judged())
else
  hn.sleep(0.01)
end
for _, f in ipairs(started) do f:stop() end
local o = hn.overload()
net:stop()
local json = read(hn.results_dir() .. "/run.json") or ""
local choice = json:match('"dilation": %b{}') or "missing"
local dp = o.dataplane
H.log("dilation %g (%s); this run's data plane: %d samples, busiest link %.0f%%, host %.0f%%, %.2f cores",
      net.dilation, choice, dp.samples, 100 * (dp.link_utilization or 0), 100 * (dp.host_busy or 0),
      dp.own_cores)
if expect == "dilate" and not rerun and (choice:find("the host is busy with other programs", 1, true)
                                         or choice:find("ended inside the probe", 1, true)) then
  H.log("SKIP: other programs left this run's data plane under 0.6 of a core or its links under 0.1%% of "
        .. "their rate: %s", choice)
elseif expect == "rejudge" then
  local got = assert(core._json_decode(read(hn.results_dir() .. "/run.json") or ""))
  local d = got.dilation
  local history = d.history or {}
  if depth == 0 then
    H.log("SKIP: the first probe kept dilation 1: %s", d.reason)
  elseif depth == 1 and not flowing then
    H.log("SKIP: dilation %g: a rerun's window would take over %d s here", net.dilation, RERUN_WALL_S)
  else
    H.check(#history == depth and depth >= 1 and depth <= 2, "%d history entries for %d runs before",
            #history, depth)
    local before = 1
    for i, h in ipairs(history) do
      -- A step up (limited, or a test of D), or a failed test's way back.
      local up = h.next > h.dilation and (h.reason:find("the host cannot forward it", 1, true)
                                          or (h.test and h.reason:find("tests whether the host was the limit", 1, true)))
      local back = i > 1 and history[i - 1].test and h.next == history[i - 1].dilation
                   and h.reason:find("no material rise", 1, true)
      H.check(h.dilation == before and (up or back), "history %d: dilation %s, next %s: %s", i, h.dilation,
              h.next, h.reason)
      H.check(i == 1 or h.reason:find(string.format("data plane at dilation %g,", h.dilation), 1, true),
              "history %d: a rerun's reason not at its dilation: %s", i, h.reason)
      before = h.next
    end
    H.check(net.dilation == before, "dilation %g, the history's last step %g", net.dilation, before)
    -- A rerun that kept its D says so, worded at its dilation.
    if depth == 1 then
      H.check(d.reason:find(string.format("; data plane at dilation %g,", net.dilation), 1, true),
              "the rerun's own judgement is missing from its reason: %s", d.reason)
    end
    H.check(math.abs(d.probe_s - (history[1].wall_s + (history[2] or { wall_s = 0 }).wall_s)) < 1e-6,
            "probe_s %g is not the ended runs' wall seconds", d.probe_s)
  end
elseif expect == "dilate" then
  H.check(rerun, "auto kept dilation %g for %s links the host cannot forward: %s", net.dilation,
          link.bw, choice)
  -- Limited at once, or kept by the CPU shares and so tested at the limited
  -- verdict's D (this rerun runs no flows: its test stays unjudged).
  local limited = choice:find("the host cannot forward it", 1, true) and choice:find('"limited": true', 1, true)
  local tested = choice:find("tests whether the host was the limit", 1, true)
  H.check(choice:find('"mode": "auto"', 1, true) and (limited or tested)
          and choice:find('"dataplane": {"samples": 3', 1, true), "run.json's dilation: %s", choice)
  local probe = read(hn.results_dir() .. "/dilation-probe/run.json")
  H.check(probe and probe:find('"status": "probe"', 1, true), "the probe's records are not kept")
  if most then
    H.check(net.dilation == most and choice:find(string.format("cut to dilation_max %g from the ", most), 1, true)
            and choice:find(string.format('"max": %g', most), 1, true),
            "dilation_max %g: the rerun's dilation %g, run.json's dilation: %s", most, net.dilation, choice)
  end
else
  H.check(not rerun and net.dilation == 1, "auto chose dilation %g for %s links: %s", net.dilation,
          link.bw, choice)
  H.check(choice:find('"value": 1,', 1, true) and choice:find("the links keep their rate", 1, true)
          and choice:find('"limited": false', 1, true), "run.json's dilation: %s", choice)
  H.check(not dp.limited and o.suggested_dilation == 1, "verdict: data plane limited %s, suggested %g",
          tostring(dp.limited), o.suggested_dilation)
end
