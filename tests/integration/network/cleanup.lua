-- cleanup.lua — the scenario cleanup.sh ends in different ways. Two networks:
-- "k" on the kernel backend (a switch, three hosts, one with cpu=0.5 so a
-- cgroup exists) and "u" on the user backend (hiernet-linkd, one host with
-- cpu=0.5). Programs run in nodes: a plain `sleep` and a shell whose child
-- sleeps (a grandchild of the controller). Everything the run owns is listed
-- through H.own before the ending:
--   mode=normal  k stopped with net:stop(), u at the end of the script (exit 0)
--   mode=error   a Lua error after start (exit 1)
--   mode=hold    writes the file ready= and sleeps; cleanup.sh signals it
-- Node names start with tag= (unique to the test run).
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local tag = assert(A.tag, "tag= is required")

local k = hn.network{ name = "k", backend = "kernel" }
local sw = k:switch(tag .. "sw")
local ka = k:node(tag .. "ka", { cpu = 0.5 })
local kb, kc = k:node(tag .. "kb"), k:node(tag .. "kc")
for _, n in ipairs({ ka, kb, kc }) do k:link(sw, n, { bw = "100Mbit" }) end

local u = hn.network{ name = "u", backend = "user" }
local ua, ub = u:node(tag .. "ua", { cpu = 0.5 }), u:node(tag .. "ub")
u:link(ua, ub, { delay = "1ms", bw = "10Mbit" })

k:start()
u:start()
local owned = {}
for _, l in ipairs(H.own(k, { unique = true })) do owned[#owned + 1] = l end
for _, l in ipairs(H.own(u, { unique = true })) do owned[#owned + 1] = l end

-- The test is only meaningful if the run really made cgroups, a linkd and namespaces.
local kinds = {}
for _, l in ipairs(owned) do
  local kind, what = l:match("^(%S+) (%S+)")
  kinds[kind] = (kinds[kind] or 0) + 1
  if kind == "cgroup" then
    local f = io.open(what .. "/cgroup.procs") or io.open(what .. "/tasks")
    H.check(f, "registered cgroup %s does not exist", what)
    f:close()
  end
end
H.check((kinds.cgroup or 0) >= 1, "no cgroup registered for the cpu=0.5 nodes")
H.check((kinds.netns or 0) >= 6, "only %d namespaces owned", kinds.netns or 0)
local linkd = false
for _, l in ipairs(owned) do linkd = linkd or l:find("u/@linkd", 1, true) ~= nil end
H.check(linkd, "no hiernet-linkd registered for network u")

-- Programs that must end with the run.
H.own_proc(kb:spawn({ "sleep", "600" }), "sleep in " .. kb.name)
H.own_proc(kc:spawn({ "sh", "-c", "sleep 600; :" }), "shell in " .. kc.name)
H.own_proc(ub:spawn({ "sleep", "600" }), "sleep in " .. ub.name)
H.check(H.ping_ok(kb, kc, 2) and H.ping_ok(ua, ub, 2), "the networks do not work")

local mode = A.mode or "normal"
H.log("mode %s: %d items owned", mode, #owned)
if mode == "error" then
  error("deliberate failure after start (cleanup test)")
elseif mode == "hold" then
  local f = assert(io.open(assert(A.ready, "ready= is required"), "w"))
  f:write("ready\n")
  f:close()
  hn.sleep(60)
  error("cleanup.lua: hold mode was not ended by a signal within 60 s")
else
  k:stop()
  H.check(k:state() == "stopped", "network k is %s after stop", k:state())
end
