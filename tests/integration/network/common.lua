-- common.lua — helpers shared by the network scenario tests; load with
--   local H = dofile(<this directory> .. "/common.lua")
-- (each test finds its directory from debug.getinfo). Provides argument
-- parsing (key=value words after the scenario name), assertions that name the
-- values, bounded concurrency over node programs, iperf3/ping helpers, and
-- H.own, which writes what a run owns (peers, linkd, namespaces, cgroups,
-- interface names) to the file lib.sh's hn_check_left reads after the run.
local hn = require("hiernet")
local topo = require("hiernet.topo")
local H = {}

-- Scenario arguments: "key=value" words; bare words become key=true.
function H.args(...)
  local a = {}
  for _, word in ipairs({ ... }) do
    local k, v = word:match("^([%w_]+)=(.*)$")
    if k then a[k] = v else a[word] = true end
  end
  H.a = a
  return a
end

function H.check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

-- H.wait_until(clock, cond, what, limit_s): waits until cond() holds,
-- false when the training (at_start's clock) ended first; an error naming
-- what after limit_s (a liveness bound, never a timing).
function H.wait_until(clock, cond, what, limit_s)
  local t0 = hn.now()
  while not cond() do
    if clock.done() then return false end
    if hn.now() - t0 > limit_s then error(string.format("%s: not within %d s", what, limit_s), 0) end
    hn.sleep(0.01)
  end
  return true
end

function H.log(fmt, ...)
  print(string.format(fmt, ...))
  io.stdout:flush()
end

-- Runs fn(item, i) for every item with at most `limit` at once; returns the results.
function H.map(list, limit, fn)
  local results, next_i = {}, 1
  local function worker()
    while next_i <= #list do
      local i = next_i
      next_i = i + 1
      results[i] = fn(list[i], i)
    end
  end
  local tasks = {}
  for k = 1, math.min(limit, #list) do tasks[k] = hn.spawn(worker) end
  hn.wait_all(tasks)
  return results
end

function H.hosts(net)
  local list = {}
  for _, n in ipairs(net:nodes()) do
    if n.kind == "host" then list[#list + 1] = n end
  end
  return list
end

-- A parameter server "ps" and n workers "w1".."wn" on switch "s": the
-- server's port links with server_link, each worker with worker_link.
-- Returns the server, the server's link (ps-s) and the workers.
function H.star(net, n, server_link, worker_link)
  local server = net:node("ps")
  local star = topo.star(net, { n = n, center_name = "s", prefix = "w", link = worker_link })
  return server, net:link(server, star.center, server_link), star.hosts
end

-- ---- what a run owns ----

local function popen_lines(cmd)
  local f = assert(io.popen(cmd))
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  return lines
end

local function read_lines(path)
  local f = io.open(path)
  if not f then return {} end
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  return lines
end

-- Start time (field 22 of /proc/<pid>/stat) of a running process, or nil.
function H.proc_start(pid)
  local line = read_lines("/proc/" .. tostring(pid) .. "/stat")[1]
  if not line then return nil end
  local fields = {}
  for w in line:match(".*%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = w end
  return fields[20]
end

local function owned_write(lines)
  if not H.a or not H.a.owned then return end
  local f = assert(io.open(H.a.owned, "a"))
  for _, l in ipairs(lines) do f:write(l, "\n") end
  f:close()
end

-- A program started with node:spawn: listed so that a survivor is found.
function H.own_proc(p, label)
  local start = H.proc_start(p.pid)
  if start then owned_write({ string.format("proc %d %s %s", p.pid, start, label) }) end
end

-- Lists what net owns, from the run's registry entry (peers, linkd, netns
-- inodes, cgroups), the controller's namespace fds (switches too) and the
-- interface names inside every host. opts.unique: node names are unique to
-- this test, so a ps lookup by name is meaningful.
function H.own(net, opts)
  opts = opts or {}
  local out = {}
  local regdir = H.a and H.a.regdir
  H.check(regdir, "H.own needs the regdir= argument")
  local cpid
  for _, l in ipairs(read_lines(regdir .. "/run")) do cpid = cpid or l:match("^controller (%d+)") end
  H.check(cpid, "registry entry %s/run lacks the controller line", regdir)
  local nodes = read_lines(regdir .. "/nodes")
  H.check(#nodes > 0, "registry entry %s/nodes lists no node after start", regdir)
  for _, l in ipairs(nodes) do
    local network, node, pid, start, ino = l:match("^(%S+) (%S+) (%d+) (%d+) (%d+)")
    if pid then
      out[#out + 1] = string.format("proc %s %s %s/%s", pid, start, network, node)
      if ino ~= "0" then out[#out + 1] = string.format("netns %s %s/%s", ino, network, node) end
    end
  end
  for _, l in ipairs(read_lines(regdir .. "/cgroups")) do out[#out + 1] = "cgroup " .. l end
  local host = popen_lines("readlink /proc/self/ns/net")[1]
  H.check(host and host:match("^net:%["), "cannot read the host's network namespace")
  for _, l in ipairs(popen_lines("find /proc/" .. cpid .. "/fd -maxdepth 1 -lname 'net:*' -printf '%l\\n' 2>/dev/null")) do
    if l ~= host then out[#out + 1] = "netns " .. l:match("%d+") .. " controller-fd" end
  end
  for _, n in ipairs(net:nodes()) do
    out[#out + 1] = "ifname " .. n.name:sub(1, 15)
    if opts.unique and n.kind == "host" then out[#out + 1] = "node " .. n.name end
  end
  for _, n in ipairs(H.hosts(net)) do
    local r = n:run({ "ip", "-o", "link", "show" })
    for name in r.out:gmatch("%d+: ([^:@%s]+)") do
      if name ~= "lo" then out[#out + 1] = "ifname " .. name end
    end
  end
  owned_write(out)
  return out
end

-- ---- measurements ----

-- H.links_rows_after(t, links, limit_s[, min_rows]): waits until links.csv
-- holds a row of each link named in `links` (both directions) dated
-- t + 0.25 s or later, and min_rows rows (default 1) of each in all, and
-- returns links.csv's rows. The sampler writes a row per link
-- and direction once an emulated second, later on a loaded host: a fixed
-- sleep long enough for the worst case costs every run that second (twice
-- under --dilation 2). The 0.25 s: a row is dated when the counters come
-- back, a little after they were read. An error after limit_s emulated
-- seconds (a liveness bound, never a timing).
function H.links_rows_after(t, links, limit_s, min_rows)
  local ex = require("hiernet.experiment")
  local function fresh(rows)
    local seen, count = {}, {}
    for _, row in ipairs(rows) do
      local key = row.link .. " " .. row.dir
      count[key] = (count[key] or 0) + 1
      if row.time_s >= t + 0.25 then seen[key] = true end
    end
    for _, link in ipairs(links) do
      for _, key in ipairs({ link .. " ab", link .. " ba" }) do
        if not seen[key] or count[key] < (min_rows or 1) then return false end
      end
    end
    return true
  end
  local t0 = hn.now()
  while true do
    local ok, rows = pcall(ex.read_csv, "links") -- none yet: no sample so far
    if ok and fresh(rows) then return rows end
    if hn.now() - t0 > limit_s then
      error(string.format("links.csv: no row of %s dated %.3f s or later within %g s", table.concat(links, ", "),
                          t + 0.25, limit_s), 2)
    end
    hn.sleep(0.05)
  end
end

-- One ping: true when a reply came back.
function H.ping_ok(from, to, wait)
  local r = from:run({ "ping", "-n", "-c", "1", "-W", tostring(wait or 2), to.addr })
  return r.status == 0, r
end

-- RTTs in ms of `count` pings (after one warm-up ping for ARP), sorted.
function H.rtts(from, to, count, interval)
  from:run({ "ping", "-n", "-c", "1", "-W", "2", to.addr })
  local r = from:run({ "ping", "-n", "-c", tostring(count), "-i", tostring(interval or 0.05), "-W", "2", to.addr })
  local list = {}
  for ms in r.out:gmatch("time=([%d%.]+) ms") do list[#list + 1] = tonumber(ms) end
  table.sort(list)
  return list, r
end

function H.median(sorted)
  local n = #sorted
  if n == 0 then return nil end
  if n % 2 == 1 then return sorted[(n + 1) // 2] end
  return (sorted[n // 2] + sorted[n // 2 + 1]) / 2
end

-- A number in iperf3's JSON: the first `key` inside the objects named by
-- `path` (a name or a list of nested object names, e.g. {"end", "sum"}).
function H.json_number(text, path, key)
  local pos = 1
  for _, name in ipairs(type(path) == "table" and path or { path }) do
    local _, e = text:find('"' .. name .. '"%s*:%s*[{%[]', pos)
    if not e then return nil end
    pos = e
  end
  return tonumber(text:match('"' .. key .. '"%s*:%s*([-%d%.eE+]+)', pos))
end

-- Runs an iperf3 server in `server` (one test) and client_args from `client`;
-- retries while the server is not listening yet (bounded). Returns the
-- client's JSON and the server's output.
function H.iperf(server, client, client_args, port)
  port = tostring(port or 5201)
  local srv = server:spawn({ "iperf3", "-s", "-1", "-B", server.addr, "-p", port, "-J" })
  H.own_proc(srv, "iperf3 server in " .. server.name)
  local argv = { "iperf3", "-c", server.addr, "-p", port, "-J" }
  for _, a in ipairs(client_args) do argv[#argv + 1] = a end
  local r
  for _ = 1, 30 do
    hn.sleep(0.1)
    r = client:run(argv)
    if r.status == 0 or not (r.out .. r.err):find("refused", 1, true) then break end
  end
  if r.status ~= 0 then srv:kill() end
  local _, sout = srv:wait()
  H.check(r.status == 0, "iperf3 %s -> %s failed (status %d): %s %s", client.name, server.name,
          r.status, r.err, r.out:match('"error"%s*:%s*"([^"]*)"') or "")
  return r.out, sout
end

-- TCP goodput in bit/s from client to server, measured by the receiver,
-- over `secs` seconds after a first omitted second (slow start).
function H.goodput(server, client, secs)
  local out = H.iperf(server, client, { "-t", tostring(secs or 3), "-O", "1" })
  local bps = H.json_number(out, { "end", "sum_received" }, "bits_per_second")
  H.check(bps, "iperf3 %s -> %s: no sum_received in its JSON", client.name, server.name)
  return bps
end

return H
