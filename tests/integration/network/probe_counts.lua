-- probe_counts: a link's counters against a UDP probe whose datagrams are
-- all known, on the user backend (hiernet-linkd), exactly:
--   * l:params() after l:set: the changed fields in base units, the others
--     as they were
--   * 10% loss: of N datagrams h1 -> h2 the link counts exactly N packets
--     in its a-b direction, less those the sending host dropped (the
--     probe's refused sends and h1's interface drops, both counted);
--     drops_loss = the probe's lost less those, delivered = its received,
--     nothing in b-a; links.csv's last row says the same
--   * Gilbert-Elliott (p = 0.01, r = 0.25, h = 0, k = 1): the mean run of
--     consecutive lost datagrams is 1 / r = 4 (independent loss at the same
--     rate gives about 1.04), and the loss rate p / (p + r) = 3.85%
-- IPv6 is turned off in both nodes and ARP is settled by a ping first, so
-- the probe's datagrams are the only packets the link carries meanwhile.
-- Args: backend=user probe=<path of hn-udp-probe>
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local probe = A.probe
H.check(probe, "probe_counts.lua: give probe=<path of hn-udp-probe>")

local net = hn.network{ name = "probe", backend = A.backend or "user", seed = 5 }
local h1, h2 = net:node("h1"), net:node("h2")
local l = net:link(h1, h2, { bw = "100Mbit", queue = 10000 })
net:start()
H.own(net)

-- l:params() after set: only the named fields change.
l:set{ delay = "2ms", loss = "10%" }
local p = l:params()
H.check(p.bw == 100000000 and p.queue == 10000, "set{delay, loss} changed bw/queue: bw %s queue %s",
        tostring(p.bw), tostring(p.queue))
H.check(math.abs(p.delay - 0.002) < 1e-12 and math.abs(p.loss - 0.1) < 1e-12 and p.jitter == 0,
        "params after set: delay %s loss %s jitter %s", tostring(p.delay), tostring(p.loss), tostring(p.jitter))
l:set{ loss = 0 }

for _, n in ipairs{ h1, h2 } do
  -- (a kernel without IPv6 has nothing to turn off)
  local r = n:run("[ ! -e /proc/sys/net/ipv6 ] || sysctl -qw net.ipv6.conf.all.disable_ipv6=1 " ..
                  "net.ipv6.conf.default.disable_ipv6=1")
  H.check(r.status == 0, "%s: cannot turn IPv6 off: %s", n.name, r.err)
end
H.check(h1:run{ "ping", "-c", "1", "-W", "2", h2.addr }.status == 0, "h1 cannot ping h2")

local out_file = hn.results_dir() .. "/probe.out"

-- Packets node n's own interfaces dropped on transmit (/proc/net/dev's
-- transmit "drop" column, loopback aside): a busy host's TAP queue, before
-- the link ever saw them.
local function tx_dropped(n)
  local r = n:run("cat /proc/net/dev")
  H.check(r.status == 0, "%s: cannot read /proc/net/dev", n.name)
  local total = 0
  for line in r.out:gmatch("[^\n]+") do
    local name, rest = line:match("^%s*([^:%s]+):(.*)$")
    if name and name ~= "lo" then
      local f = {}
      for v in rest:gmatch("%d+") do f[#f + 1] = tonumber(v) end
      total = total + (f[12] or 0) -- receive: 8 fields, then transmit bytes, packets, errs, drop
    end
  end
  return total
end

-- Sends `count` datagrams h1 -> h2 through the link; returns the probe's
-- counts and the link's counter changes meanwhile (per direction).
local function run_probe(count, rate, payload, port)
  os.remove(out_file)
  local before, dropped0 = l:stats(), tx_dropped(h1)
  local recv = h2:spawn{ "sh", "-c", string.format("exec %s recv %d %d > %s", probe, port, count, out_file) }
  local ready = false
  for _ = 1, 200 do -- the receiver binds before the first datagram leaves
    local f = io.open(out_file)
    if f then ready = (f:read("a") or ""):find("ready", 1, true) ~= nil; f:close() end
    if ready then break end
    hn.sleep(0.05)
  end
  H.check(ready, "hn-udp-probe recv did not start within 10 s")
  local s = h1:run{ probe, "send", h2.addr, tostring(port), tostring(rate), tostring(payload), tostring(count) }
  H.check(s.status == 0, "hn-udp-probe send: status %d: %s", s.status, s.err)
  local refused = tonumber(s.err:match("send_failed=(%d+)"))
  H.check(refused, "hn-udp-probe send said nothing of its sends: %s", s.err)
  local status = recv:wait()
  H.check(status == 0, "hn-udp-probe recv: status %s", tostring(status))
  local f = assert(io.open(out_file))
  local text = f:read("a")
  f:close()
  local c = {}
  for k, v in text:gmatch("(%w[%w_]*)=(%d+)") do c[k] = tonumber(v) end
  H.check(c.received and c.lost and c.loss_runs, "hn-udp-probe output: %s", text)
  -- What never reached the link: refused by the sender's socket, or
  -- dropped by h1's own interface queue.
  c.host_dropped = refused + tx_dropped(h1) - dropped0
  local after = l:stats()
  local delta = { ab = {}, ba = {} }
  for _, d in ipairs{ "ab", "ba" } do
    for k, v in pairs(after[d]) do
      if type(v) == "number" and before[d][k] then delta[d][k] = v - before[d][k] end
    end
  end
  return c, delta, after
end

-- 10% independent loss.
local N = 5000
l:set{ loss = "10%" }
local c, d, after = run_probe(N, 10e6, 200, 5401)
H.log("loss 10%%: %d datagrams (%d dropped by the host), probe received %d lost %d; link ab packets %d " ..
      "delivered %d drops_loss %d", N, c.host_dropped, c.received, c.lost, d.ab.packets, d.ab.delivered,
      d.ab.drops_loss)
H.check(c.received + c.lost == N, "probe: received %d + lost %d is not %d", c.received, c.lost, N)
H.check(d.ab.packets == N - c.host_dropped, "link ab packets %d for %d datagrams, %d of them dropped by the host",
        d.ab.packets, N, c.host_dropped)
H.check(d.ab.drops_loss == c.lost - c.host_dropped, "link ab drops_loss %d, probe lost %d, %d of them by the host",
        d.ab.drops_loss, c.lost, c.host_dropped)
H.check(d.ab.delivered == c.received, "link ab delivered %d, probe received %d", d.ab.delivered, c.received)
H.check(d.ab.drops_queue == 0 and d.ab.drops_down == 0, "drops by queue %d / down %d", d.ab.drops_queue,
        d.ab.drops_down)
H.check(d.ba.packets == 0, "link ba carried %d packets during a one-way probe", d.ba.packets)
H.check(c.lost > 0.07 * N and c.lost < 0.13 * N, "10%% loss lost %d of %d", c.lost, N)

-- links.csv's row after the probe (a sample follows within an emulated
-- second, waited for; nothing crosses the link meanwhile) holds the same
-- counters as l:stats() once the probe ended.
local last
for _, row in ipairs(H.links_rows_after(hn.now(), { "h1-h2" }, 5)) do
  if row.network == "probe" and row.link == "h1-h2" and row.dir == "ab" then last = row end
end
H.check(last, "links.csv has no row of h1-h2 ab")
for _, k in ipairs{ "packets", "delivered", "drops_loss", "drops_queue", "drops_down" } do
  H.check(last[k] == after.ab[k], "links.csv %s = %s, the link's counter %s", k, tostring(last[k]),
          tostring(after.ab[k]))
end

-- Gilbert-Elliott bursts.
local G = { p = 0.01, r = 0.25 }
l:set{ loss = 0, gilbert = G }
local gp = l:params().gilbert
H.check(gp and gp.p == 0.01 and gp.r == 0.25 and gp.h == 0 and gp.k == 1, "params().gilbert after set: %s",
        gp and string.format("p %s r %s h %s k %s", gp.p, gp.r, gp.h, gp.k) or "none")
local M = 20000
c, d = run_probe(M, 10e6, 100, 5402)
local burst, rate = c.lost / math.max(1, c.loss_runs), c.lost / M
H.log("Gilbert-Elliott p=%.2f r=%.2f: %d lost in %d runs: mean burst %.2f (1/r = %.2f), rate %.4f (%.4f)",
      G.p, G.r, c.lost, c.loss_runs, burst, 1 / G.r, rate, G.p / (G.p + G.r))
H.check(d.ab.packets == M - c.host_dropped and d.ab.drops_loss == c.lost - c.host_dropped,
        "GE: link packets %d drops_loss %d; probe %d lost %d, %d of them by the host", d.ab.packets,
        d.ab.drops_loss, M, c.lost, c.host_dropped)
-- Datagrams the host dropped would split or join the link's bursts.
H.check(c.host_dropped <= M / 200, "GE: the host dropped %d of %d datagrams before the link", c.host_dropped, M)
-- about 190 bursts of sd sqrt(1 - r) / r = 3.5: the mean's sd is 0.25
H.check(math.abs(burst - 1 / G.r) <= 1.0, "GE mean burst %.2f, want 1/r = %.2f +- 1", burst, 1 / G.r)
H.check(math.abs(rate - G.p / (G.p + G.r)) <= 0.015, "GE loss rate %.4f, want %.4f +- 0.015", rate,
        G.p / (G.p + G.r))
net:stop()
