-- optim as docs/lua-api.md ("optim: formulas and state") says, through a
-- peer: three steps of sgd, momentum, nesterov and adam, each with weight
-- decay, against the formulas computed here in double (the peer computes
-- in float32: 1e-5 relative); and the state rule: a new method resets the
-- state, no method keeps the current one, state per tensor name and per
-- model apart (the same name as model= and tensor= are two states), a
-- tensor of another size and a new model under the same name start afresh.
local hn = require("hiernet")
local T = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "lib/algo_test.lua")

local net = hn.network{ name = "optim", backend = "none" }
local a = net:node("a")
net:start()

local N, LR, WD, MU = 5, 0.1, 0.01, 0.9
local seed = 0

-- A tensor of n values drawn on the peer; returns them as read back.
local function fresh(name, n)
  seed = seed + 1
  a:tensor{ name = name, size = n or N, fill = "normal", seed = seed }
  return a:read{ tensor = name }.values
end

local function close(got, want, what)
  T.eq(#got, #want, what .. ": size")
  for i = 1, #want do T.near(got[i], want[i], 1e-5, what .. ": element " .. i) end
end

-- The documented formulas, one step on p (a list), state st (a table).
local STEP = {
  sgd = function(p, g, st, o)
    for i = 1, #p do p[i] = p[i] - o.lr * (g[i] + o.wd * p[i]) end
  end,
  momentum = function(p, g, st, o)
    st.v = st.v or {}
    for i = 1, #p do
      local gi = g[i] + o.wd * p[i]
      st.v[i] = o.mu * (st.v[i] or 0) + gi
      p[i] = p[i] - o.lr * st.v[i]
    end
  end,
  nesterov = function(p, g, st, o)
    st.v = st.v or {}
    for i = 1, #p do
      local gi = g[i] + o.wd * p[i]
      st.v[i] = o.mu * (st.v[i] or 0) + gi
      p[i] = p[i] - o.lr * (gi + o.mu * st.v[i])
    end
  end,
  adam = function(p, g, st, o)
    st.m, st.s, st.t = st.m or {}, st.s or {}, (st.t or 0) + 1
    local c1, c2 = 1 / (1 - o.b1 ^ st.t), 1 / (1 - o.b2 ^ st.t)
    for i = 1, #p do
      local gi = g[i] + o.wd * p[i]
      st.m[i] = o.b1 * (st.m[i] or 0) + (1 - o.b1) * gi
      st.s[i] = o.b2 * (st.s[i] or 0) + (1 - o.b2) * gi * gi
      p[i] = p[i] - o.lr * (st.m[i] * c1) / (math.sqrt(st.s[i] * c2) + o.eps)
    end
  end,
}
local O = { lr = LR, wd = WD, mu = MU, b1 = 0.9, b2 = 0.999, eps = 1e-8 }

-- One optim call on the peer and the same step here; returns its result.
local function step(params, expect, st, o, what)
  local g = fresh("g")
  local r = a:optim(params)
  STEP[o.method](expect, g, st, o)
  close(a:read{ tensor = params.tensor or params.model }.values, expect, what)
  return r
end

local function opts(method) return setmetatable({ method = method }, { __index = O }) end

local function call(target, method, extra)
  local c = { grad = "g", method = method, lr = LR, weight_decay = WD }
  if method == "momentum" or method == "nesterov" then c.momentum = MU end
  for k, v in pairs(target) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

-- The formulas: three steps of each method, a tensor of its own each.
for _, method in ipairs{ "sgd", "momentum", "nesterov", "adam" } do
  local name = "p." .. method
  local expect, st = fresh(name), {}
  for t = 1, 3 do
    local r = step(call({ tensor = name }, method), expect, st, opts(method), method .. " step " .. t)
    T.eq(r.steps, t, method .. ": steps after step " .. t)
  end
end

-- A new method resets the state; no method keeps the current one.
do
  local expect, st = fresh("q"), {}
  step(call({ tensor = "q" }, "momentum"), expect, st, opts("momentum"), "q momentum 1")
  step(call({ tensor = "q" }, "momentum"), expect, st, opts("momentum"), "q momentum 2")
  local r = step(call({ tensor = "q" }, "sgd"), expect, {}, opts("sgd"), "q sgd after momentum")
  T.eq(r.steps, 1, "a new method: state reset")
  st = {} -- momentum again: its velocity starts from zero
  r = step(call({ tensor = "q" }, "momentum"), expect, st, opts("momentum"), "q momentum after sgd")
  T.eq(r.steps, 1, "momentum after sgd: velocity from zero")
  r = step(call({ tensor = "q" }, nil, { momentum = MU }), expect, st, opts("momentum"), "q, no method")
  T.eq(r.steps, 2, "no method: the current one goes on")
end

-- model= and tensor= on the same name are two states: a server optimizer
-- (sgd, tensor=) between the worker optimizer's steps (momentum, model=)
-- leaves the worker's velocity alone, as allreduce.train relies on.
do
  a:model{ name = "m", arch = "mlp:4-3-2", seed = 3 }
  local expect = a:read{ tensor = "m" }.values
  local n = #expect
  local worker, server = {}, {}
  local function fresh_g() -- a gradient of the model's size
    seed = seed + 1
    a:tensor{ name = "g", size = n, fill = "normal", seed = seed }
    return a:read{ tensor = "g" }.values
  end
  for t = 1, 3 do
    local g = fresh_g()
    local r = a:optim(call({ model = "m" }, "momentum"))
    STEP.momentum(expect, g, worker, opts("momentum"))
    T.eq(r.steps, t, "the model's momentum state goes on, step " .. t)
    g = fresh_g()
    r = a:optim(call({ tensor = "m" }, "sgd"))
    STEP.sgd(expect, g, server, opts("sgd"))
    T.eq(r.steps, t, "the tensor state of the same name, step " .. t)
    close(a:read{ tensor = "m" }.values, expect, "model m after round " .. t)
  end
  -- one model stepped by two methods through model=: reset at every switch
  local r = a:optim(call({ model = "m" }, "sgd"))
  T.eq(r.steps, 1, "model=: a switch to sgd resets")
  r = a:optim(call({ model = "m" }, "momentum"))
  T.eq(r.steps, 1, "model=: and back to momentum resets again")
  -- a new model under the same name starts afresh
  a:model{ name = "m", arch = "mlp:4-3-2", seed = 3 }
  fresh_g()
  r = a:optim(call({ model = "m" }, "momentum"))
  T.eq(r.steps, 1, "a new model: a new state")
end

-- A tensor of another size under the same name: a new state.
do
  fresh("z", 4)
  fresh("g", 4)
  a:optim(call({ tensor = "z" }, "momentum"))
  T.eq(a:optim(call({ tensor = "z" }, "momentum")).steps, 2, "z: state kept")
  fresh("z", 6)
  fresh("g", 6)
  T.eq(a:optim(call({ tensor = "z" }, "momentum")).steps, 1, "z of another size: a new state")
end
net:stop()
