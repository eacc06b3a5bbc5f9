-- queue = "bdp" / "2bdp": a link's queue as a multiple of its bandwidth-delay
-- product (rate x 2 x (delay + jitter)), resolved into bytes when the link
-- is made: l:params() shows the bytes and the multiple; a link without
-- delay gets 2 frames; an unlimited link or a bad multiple is refused in one
-- line naming the link and the value.
local hn = require("hiernet")

local fails = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua").fails

local net = hn.network{ name = "q", backend = "none" }
local a, b, c, d = net:node("a"), net:node("b"), net:node("c"), net:node("d")
local ab = net:link(a, b, { bw = "10Gbit", delay = "50us", queue = "2bdp" })
local p = ab:params()
assert(p.queue_bytes == 250000 and p.queue_bdp == 2 and p.queue == nil,
       string.format("2bdp of 10 Gbit/s x 100 us: %s bytes, bdp %s", tostring(p.queue_bytes), tostring(p.queue_bdp)))
local bc = net:link(b, c, { bw = "1Gbit", delay = "1ms", jitter = "1ms", queue = "bdp" })
assert(bc:params().queue_bytes == 500000, "bdp of 1 Gbit/s x 4 ms: " .. tostring(bc:params().queue_bytes))
local cd = net:link(c, d, { bw = "10Gbit", queue = "bdp" })
assert(cd:params().queue_bytes == 3028, "no delay: 2 frames, got " .. tostring(cd:params().queue_bytes))
fails("link a-c: queue '2bdp' needs the link's bw", net.link, net, a, c, { queue = "2bdp" })
fails("link a-d: queue: bad queue \"0bdp\"", net.link, net, a, d, { bw = "1Gbit", queue = "0bdp" })
