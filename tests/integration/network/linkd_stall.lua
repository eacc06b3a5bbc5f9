-- linkd_stall: hiernet-linkd kept off the CPU for 0.5 s while pings cross
-- its link (hn-stall-cpu: its CPU taken at SCHED_FIFO, as a host busy with
-- others' work does) is one stall in hn.overload().linkd_stalls: at the
-- kernel's 200 ms threshold, about 0.5 s long, begun inside the hold on the
-- run's clock. A second of the same pings before the hold is counted and
-- logged, not judged: a host busy with other work may stall linkd as well.
-- Args: backend=user stall=<path of hn-stall-cpu> (and lib.sh's regdir=)
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
H.check(A.stall, "linkd_stall.lua: give stall=<path of hn-stall-cpu>")

local net = hn.network{ name = "stall", backend = "user", seed = 3 }
local h1, h2 = net:node("h1"), net:node("h2")
net:link(h1, h2, { bw = "100Mbit", delay = "1ms" })
net:start()
H.own(net)

-- The network's one linkd, from the run's registry entry.
local linkd
for l in io.lines(A.regdir .. "/nodes") do
  linkd = linkd or l:match("^stall @linkd%d* (%d+) ")
end
H.check(linkd, "no hiernet-linkd of network stall in %s/nodes", A.regdir)

-- Frames all the time: linkd wakes for each, so it waits while held off.
local function pings(seconds)
  return h1:spawn({ "ping", "-n", "-q", "-i", "0.01", "-w", tostring(seconds), h2.addr })
end
local function pinged(p, what)
  local status, out, err = p:wait()
  H.check(status == 0, "ping %s: status %d: %s%s", what, status, out, err)
end

local function stalls() return hn.overload().linkd_stalls end

pinged(pings(1), "before the hold")
hn.sleep(0.3) -- a reading after the last ping
local s = stalls()
H.check(s.threshold_wall_s == 0.2, "threshold %s, want the kernel's 0.2 s", tostring(s.threshold_wall_s))
local before = s.count

local p = pings(2)
hn.sleep(0.5)
local t0 = hn.now()
-- On the host, where linkd's pid is (a node's programs see their own pid
-- namespace). The loop waits meanwhile: the next reading comes after.
local out = io.popen(A.stall .. " " .. linkd .. " 0.5; echo status=$?")
local said = out:read("a")
out:close()
local t1 = hn.now()
local status = tonumber(said:match("status=(%d+)"))
said = said:gsub("\n?status=%d+\n$", "")
if status == 77 then
  pinged(p, "beside the hold")
  print("SKIP: " .. said)
  net:stop()
  return
end
H.check(status == 0, "hn-stall-cpu: status %s: %s", tostring(status), said)
H.log("%s", said)
pinged(p, "beside the hold")
hn.sleep(0.3)
s = stalls()
H.log("stalls: %d before the hold, %d after; %s", before, s.count,
      s.stalls[#s.stalls] and string.format("the last %.3f s long at %.3f s (hold %.3f-%.3f s)",
        s.stalls[#s.stalls].wall_s, s.stalls[#s.stalls].at_s, t0, t1) or "none listed")
-- An idle host keeps linkd on time; a loaded one may not, so the quiet
-- phase's count is reported, and only the held phase's stall is required.
local found
for i = before + 1, #s.stalls do
  local st = s.stalls[i]
  if st.at_s >= t0 - 0.1 and st.at_s <= t1 and st.wall_s >= 0.4 and st.wall_s <= 0.8 then found = st end
end
H.check(found, "no stall of 0.4-0.8 s begun in the hold (%.3f-%.3f s): %d stalls, %d before it",
        t0, t1, s.count, before)
H.check(s.longest_wall_s >= found.wall_s, "longest_wall_s %.3f below a stall's %.3f",
        s.longest_wall_s, found.wall_s)
net:stop()
