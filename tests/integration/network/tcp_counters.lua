-- tcp_counters: net:tcp() and tcp.csv give each host's TCP counters from its
-- own namespace, and they are the kernel's: after a transfer over a lossy
-- link, with the network idle, net:tcp() equals what `cat /proc/net/snmp`
-- and `cat /proc/net/netstat` say inside the node (parsed here), the
-- sender has retransmitted (5% loss of about 700 segments: P(no loss) ~
-- 1e-16), and tcp.csv has rows for both hosts whose counters never fall
-- and end at most at the final ones.
-- Args: backend=user (the kernel backend needs sch_netem for the loss).
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)

local net = hn.network{ name = "tcpc", backend = A.backend or "user", seed = 4 }
local a, b = net:node("a"), net:node("b")
net:link(a, b, { bw = "100Mbit", loss = "5%" })
net:start()
H.own(net)

a:tensor{ name = "x", size = 1 << 18, fill = 1 } -- 1 MB
a:send{ tensor = "x", to = "b" }
hn.sleep(1.5) -- a tcp.csv sample after the transfer

-- The kernel's value of `name` in the table `prefix` ("Tcp:") of a /proc/net file's text.
local function proc_value(text, prefix, name)
  local head, values
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, #prefix + 1) == prefix .. " " then
      if head then values = line break end
      head = line
    end
  end
  H.check(head and values, "no %s table", prefix)
  local names, nums = {}, {}
  for w in head:gmatch("%S+") do names[#names + 1] = w end
  for w in values:gmatch("%S+") do nums[#nums + 1] = w end
  for i, n in ipairs(names) do
    if n == name then return tonumber(nums[i]) end
  end
  return 0
end

local function from_proc(n)
  local snmp = n:run({ "cat", "/proc/net/snmp" }).out
  local netstat = n:run({ "cat", "/proc/net/netstat" }).out
  return {
    retrans = proc_value(snmp, "Tcp:", "RetransSegs"),
    rtos = proc_value(netstat, "TcpExt:", "TCPTimeouts"),
    fast_retrans = proc_value(netstat, "TcpExt:", "TCPFastRetrans"),
    lost_retrans = proc_value(netstat, "TcpExt:", "TCPLostRetransmit"),
    recoveries = proc_value(netstat, "TcpExt:", "TCPSackRecovery") + proc_value(netstat, "TcpExt:", "TCPRenoRecovery"),
  }
end

local keys = { "retrans", "rtos", "fast_retrans", "lost_retrans", "recoveries" }
local final
for _ = 1, 5 do -- an idle network: a read between two equal ones is exact
  local before = net:tcp()
  local proc = { a = from_proc(a), b = from_proc(b) }
  local after = net:tcp()
  local stable = true
  for _, node in ipairs({ "a", "b" }) do
    for _, k in ipairs(keys) do
      stable = stable and before[node][k] == after[node][k]
    end
  end
  if stable then
    for _, node in ipairs({ "a", "b" }) do
      for _, k in ipairs(keys) do
        H.check(after[node][k] == proc[node][k], "%s %s: net:tcp() %d, /proc %d", node, k,
                after[node][k], proc[node][k])
      end
    end
    final = after
    break
  end
  hn.sleep(0.2)
end
H.check(final, "the counters never held still for a read")
H.check(final.a.retrans > 0, "a sent 1 MB over 5%% loss without a retransmission")
H.log("a: retrans %d, rtos %d, fast_retrans %d, recoveries %d", final.a.retrans, final.a.rtos,
      final.a.fast_retrans, final.a.recoveries)
net:stop()

local rows = require("hiernet.experiment").read_csv("tcp")
local last = {}
for _, row in ipairs(rows) do
  H.check(row.network == "tcpc" and (row.node == "a" or row.node == "b"), "a row of %s/%s",
          tostring(row.network), tostring(row.node))
  local prev = last[row.node]
  for _, k in ipairs(keys) do
    local v = tonumber(row[k])
    H.check(v and v <= final[row.node][k], "tcp.csv %s %s = %s above the final %d", row.node, k,
            tostring(row[k]), final[row.node][k])
    H.check(not prev or v >= tonumber(prev[k]), "tcp.csv %s %s fell", row.node, k)
  end
  last[row.node] = row
end
H.check(last.a and last.b, "tcp.csv lacks a or b")
H.check(tonumber(last.a.retrans) > 0, "tcp.csv's last row of a shows no retransmission")
