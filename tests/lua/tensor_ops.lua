-- Peer vector commands on the none backend, checked against values computed
-- by hand: tensor, copy, axpy, scale, sum, norm, dot, read (whole and ranged), drop.
local hn = require("hiernet")
local net = hn.network{ name = "ops", backend = "none" }
local a = net:node("a")
local b = net:node("b")
net:start()

local function near(x, want, tol, what)
  assert(math.abs(x - want) <= (tol or 1e-5), string.format("%s: got %.9g, want %.9g", what, x, want))
end

a:tensor{ name = "x", size = 8, fill = 1 }
a:tensor{ name = "y", size = 8, fill = 2 }
local r = a:axpy{ y = "y", x = "x", alpha = 3 }            -- y = 2 + 3*1 = 5
assert(type(r.ms) == "number" and r.ms >= 0, "axpy returns ms")
near(a:norm{ x = "y" }.value, math.sqrt(8 * 25), 1e-4, "norm after axpy")
a:axpy{ y = "y", x = "x", alpha = -1, range = { 2, 3 } }   -- elements 2..4 become 4
local v = a:read{ tensor = "y" }.values
assert(#v == 8, "read returns every element")
for i = 1, 8 do
  near(v[i], (i >= 3 and i <= 5) and 4 or 5, 0, "y[" .. i .. "] after ranged axpy")
end
a:scale{ x = "y", alpha = 0.5 }
near(a:dot{ x = "x", y = "y" }.value, 3 * 2 + 5 * 2.5, 1e-5, "dot after scale")
near(a:norm{ x = "y", range = { 0, 2 } }.value, math.sqrt(2 * 2.5 ^ 2), 1e-5, "ranged norm")

a:copy{ src = "y", dst = "z" }
a:sum{ out = "s", inputs = { "x", "y", "z" } }
local s = a:read{ tensor = "s", range = { 2, 3 } }.values
assert(#s == 3, "ranged read returns count values")
for i = 1, 3 do near(s[i], 1 + 2 + 2, 0, "sum element") end

-- Tensors are per peer: b has none of a's.
local ok, err = pcall(b.norm, b, { x = "y" })
assert(not ok and err:find("node 'b'") and err:find("norm"), "missing tensor names node and command: " .. tostring(err))

local st = a:stats()
assert(st.tensors == 4, "a holds x, y, z, s: got " .. tostring(st.tensors))
local d = a:drop{ names = { "z", "s", "nope" } }
assert(d.dropped == 2, "drop counts what existed")
assert(a:stats().tensors == 2, "two tensors left")

-- Concurrent commands on several peers from several tasks.
local tasks = {}
for i, n in ipairs({ a, b }) do
  tasks[i] = hn.spawn(function()
    n:tensor{ name = "w", size = 1000, fill = i }
    return n:norm{ x = "w" }.value
  end)
end
local norms = hn.wait_all(tasks)
near(norms[1], math.sqrt(1000), 1e-3, "norm on a")
near(norms[2], 2 * math.sqrt(1000), 1e-3, "norm on b")

-- send{to=}: a peer learns a target's address before its first send to it
-- (by handle or by name), and again after a restart; unknown names fail.
a:tensor{ name = "p", size = 4, fill = 3 }
assert(a:send{ tensor = "p", to = b }.bytes == 16, "send to a node handle")
assert(a:send{ tensor = "p", to = "b", as = "q" }.bytes == 16, "send to a node name")
near(b:norm{ x = "q" }.value, 6, 1e-5, "what arrived")
ok, err = pcall(a.send, a, { tensor = "p", to = "ghost" })
assert(not ok and err:find("'ghost' is not a node of network", 1, true), "send to ghost: " .. tostring(err))
a:restart()
a:tensor{ name = "p", size = 4, fill = 1 }
assert(a:send{ tensor = "p", to = b, as = "r" }.bytes == 16, "send after a restart")
near(b:norm{ x = "r" }.value, 2, 1e-5, "what arrived after the restart")
b:restart()
assert(a:send{ tensor = "p", to = b, as = "r" }.bytes == 16, "send to a restarted peer")
net:stop()
