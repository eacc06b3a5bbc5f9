-- bad_input.lua — one kind of bad input per run (case=), driven by
-- bad_input.sh. A valid network "ok" (kernel backend, a cpu=0.5 node, so a
-- cgroup exists) is started first and listed with H.own, so the failure
-- must also tear down what was already running. Then the bad input:
--   unit        bw = "10Mbps"                 negdelay  delay = "-5ms"
--   dup         the same node name twice      missing   a link to a node never defined
--   longname    a 32-character node name      selflink  a node linked to itself
--   disconnect  start with two unlinked nodes (must name an unreachable pair)
--   setunit     link:set{bw = "10Mbps"} on the running network
--   nonetem     backend = "kernel" with delay on a kernel without sch_netem
--   bigswitch   a switch with 1024 links (a bridge takes at most 1023 ports)
-- Node names start with tag= (unique to the test run).
local hn = require("hiernet")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(dir .. "common.lua")
local A = H.args(...)
local tag = assert(A.tag, "tag= is required")

local ok = hn.network{ name = "ok", backend = "kernel" }
local oa, ob = ok:node(tag .. "a", { cpu = 0.5 }), ok:node(tag .. "b")
local okl = ok:link(oa, ob, { bw = "10Mbit" })
ok:start()
H.own(ok, { unique = true })

local net = hn.network{ name = "bad", backend = "kernel" }
local x, y = net:node(tag .. "x"), net:node(tag .. "y")
local case = A.case
if case == "unit" then
  net:link(x, y, { bw = "10Mbps" })
elseif case == "negdelay" then
  net:link(x, y, { delay = "-5ms" })
elseif case == "dup" then
  net:node(tag .. "x")
elseif case == "missing" then
  net:link(x, tag .. "nobody", { bw = "1Mbit" })
elseif case == "longname" then
  net:node("n" .. string.rep("x", 30) .. "z") -- 32 characters
elseif case == "selflink" then
  net:link(x, x, { bw = "1Mbit" })
elseif case == "disconnect" then
  net:start()
elseif case == "setunit" then
  okl:set{ bw = "10Mbps" }
elseif case == "bigswitch" then
  local sw = net:switch(tag .. "sw")
  for i = 1, 1024 do net:link(sw, net:node(tag .. "h" .. i), {}) end
  net:start()
elseif case == "nonetem" then
  net:link(x, y, { bw = "10Mbit", delay = "5ms" })
  net:start()
else
  error("bad_input.lua: unknown case " .. tostring(case))
end
H.log("case %s raised no error", case)
