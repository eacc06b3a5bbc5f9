-- hier.train computes what docs/algorithms.md says, exactly (HierFAVG, Liu
-- et al. 2020): terminals make tau1 local steps, each edge then sets
--   w_e = sum_{i in e} (n_i / n_e) w_i
-- and sends it down; every tau2 edge rounds the cloud sets
--   w = sum_e (n_e / n) w_e
-- and sends it down. After a few rounds the cloud's, the edges' and every
-- terminal's model equal a sequential reference (same shards, initial
-- model and mini-batches, tests/lua/lib/reference.lua; the averages written
-- out here, one command at a time on reference peers) to float tolerance,
-- on fresh peers, with uneven terminals per edge (2 and 3: the edges'
-- shares differ), with equal speeds and with one terminal 20 times slower;
-- with a last round shorter than tau1, with a training that ends between
-- cloud rounds (the cloud's last average), with a momentum worker
-- optimizer, with top-k compression, with shards of uneven sizes
-- (Dirichlet: the shares are the samples'); and the same final models, bit
-- for bit, whatever the speeds.
local hn = require("hiernet")
local hier = require("hiernet.algo.hier")
local dir = debug.getinfo(1, "S").source:match("^@(.*/)")
local T = dofile(dir .. "lib/algo_test.lua")
local R = dofile(dir .. "lib/reference.lua")

local N, LR = 5, 0.1
local TOL = 2e-5
local GROUPS = { { 1, 2 }, { 3, 4, 5 } } -- terminals per edge
local SLOW = { 1, 1, 1, 0.05, 1 } -- terminal 4 (of the edge with 3) at 1/20 of the speed

-- n_i, terminal i's samples, as its shard reports them; n_e the edge's,
-- n the total.
local function shard_samples(refs, d)
  local samples = {}
  for i, node in ipairs(refs) do
    samples[i] = node:dataset{ name = d.name, split = "train", shard = i, shards = N, partition = d.partition,
                               alpha = d.alpha, seed = 7, n = d.n, dim = d.dim, classes = d.classes,
                               noise = d.noise }.samples
  end
  return samples
end

local function edge_samples(ref, g)
  local n = 0
  for _, i in ipairs(GROUPS[g]) do n = n + ref.samples[i] end
  return n
end

local runs = 0
local function network(speeds)
  runs = runs + 1
  local net = hn.network{ name = "exhier" .. runs, backend = "none" }
  local cloud = net:node("cloud", { tier = "cloud" })
  local edges, terms = {}, {}
  for g, list in ipairs(GROUPS) do
    edges[g] = net:node("e" .. g, { tier = "edge" })
    net:link(cloud, edges[g])
    for _, i in ipairs(list) do
      terms[i] = net:node("t" .. i, { tier = "terminal", speed = speeds and speeds[i] or nil })
      net:link(edges[g], terms[i])
    end
  end
  local refs = R.nodes(net, N, cloud)
  net:start()
  return net, cloud, edges, terms, refs
end

-- ---- the reference ----

local function local_steps(ref, opt, k, c)
  for i = 1, N do
    if c then ref.nodes[i]:copy{ src = "w", dst = "base" } end
    for _ = 1, k do
      ref.nodes[i]:grad{ model = "w", out = "g", batch = ref.batch }
      ref.nodes[i]:optim{ model = "w", grad = "g", method = opt.method or "sgd", lr = opt.lr,
                          momentum = opt.momentum }
    end
  end
end

-- With compression a terminal sends C(share_i (w_i - base_i)) with error
-- feedback (residual "ef"), base_i the model it got from its edge, and the
-- edge adds the decompressed changes onto its model, in its terminals'
-- order: sum_i share_i w_i up to what C dropped, since the shares sum to 1.
local function edge_from_changes(ref, g, c)
  local list, n_e = GROUPS[g], edge_samples(ref, g)
  local home = ref.nodes[list[1]]
  home:copy{ src = "edge", dst = "acc" }
  for _, i in ipairs(list) do
    local node = ref.nodes[i]
    node:copy{ src = "w", dst = "share" }
    node:axpy{ y = "share", x = "base", alpha = -1 }
    node:scale{ x = "share", alpha = ref.samples[i] / n_e }
    node:compress{ tensor = "share", method = c.method, ratio = c.ratio, out = "sc", residual = "ef" }
    if node ~= home then node:send{ tensor = "sc", to = home, as = "sc." .. i } end
    home:decompress{ tensor = node ~= home and ("sc." .. i) or "sc", out = "acc", add = true }
  end
  home:copy{ src = "acc", dst = "edge" }
end

-- Edge g's average of its terminals' models, into "edge" on the group's
-- first reference peer: sum_{i in e} (n_i / n_e) w_i.
-- Each weighted model is rounded to float once and the terms are added in
-- the terminals' order (as the training does), so that the reference is
-- the training's to the last bit when nothing is wrong.
local function edge_average(ref, g)
  local list, n_e = GROUPS[g], edge_samples(ref, g)
  local home = ref.nodes[list[1]]
  local terms = {}
  for k, i in ipairs(list) do
    terms[k] = "t." .. i
    if i ~= list[1] then ref.nodes[i]:send{ tensor = "w", to = home, as = terms[k] } else
      home:copy{ src = "w", dst = terms[k] }
    end
    home:scale{ x = terms[k], alpha = ref.samples[i] / n_e }
  end
  home:sum{ out = "edge", inputs = terms }
end

-- The cloud's average of the edges' models, into "cloud" on reference
-- peer 1: sum_e (n_e / n) w_e.
local function cloud_average(ref)
  local home, terms, n = ref.nodes[1], {}, 0
  for g = 1, #GROUPS do n = n + edge_samples(ref, g) end
  for g, list in ipairs(GROUPS) do
    terms[g] = "e." .. g
    if list[1] ~= 1 then ref.nodes[list[1]]:send{ tensor = "edge", to = home, as = terms[g] } else
      home:copy{ src = "edge", dst = terms[g] }
    end
    home:scale{ x = terms[g], alpha = edge_samples(ref, g) / n }
  end
  home:sum{ out = "cloud", inputs = terms }
end

-- Model `name` on `from` becomes every terminal's of `list` (and the
-- edge's, kept on the group's first peer).
local function send_down(ref, from, name, g)
  for _, i in ipairs(GROUPS[g]) do
    local node = ref.nodes[i]
    if node == from then node:copy{ src = name, dst = "w" } else from:send{ tensor = name, to = node, as = "w" } end
  end
  local home = ref.nodes[GROUPS[g][1]]
  if home ~= from then from:send{ tensor = name, to = home, as = "edge" } elseif name ~= "edge" then
    home:copy{ src = name, dst = "edge" }
  end
end

-- The whole training on the reference: rounds of tau1 local steps (the
-- last one what is left of `steps`), a cloud round every tau2, and the
-- cloud's last average when the training ends between cloud rounds.
local function replay(ref, o)
  ref.nodes[1]:copy{ src = "w", dst = "cloud" }
  for _, list in ipairs(GROUPS) do ref.nodes[list[1]]:copy{ src = "w", dst = "edge" } end
  local done, rounds = 0, 0
  while done < o.steps do
    local k = math.min(o.tau1, o.steps - done)
    local_steps(ref, o.worker_opt, k, o.compress)
    done, rounds = done + k, rounds + 1
    for g = 1, #GROUPS do
      if o.compress then edge_from_changes(ref, g, o.compress) else edge_average(ref, g) end
    end
    if rounds % o.tau2 == 0 then
      cloud_average(ref)
      for g = 1, #GROUPS do send_down(ref, ref.nodes[1], "cloud", g) end
    else
      for g, list in ipairs(GROUPS) do send_down(ref, ref.nodes[list[1]], "edge", g) end
    end
  end
  if rounds % o.tau2 ~= 0 then cloud_average(ref) end
  return rounds
end

-- ---- a case ----

-- init: the reference peer holding "w.init" (R.new's, peer 1).
local function check(node, name, ref_node, ref_name, init, what, notes)
  local diff = R.distance(node, name, ref_node, ref_name)
  local moved = R.distance(ref_node, ref_name, init, "w.init")
  notes[#notes + 1] = string.format("%s %.3g/%.3g", node.name, diff, moved)
  R.check_equal(node, name, ref_node, ref_name, TOL, what .. ", " .. node.name)
  return diff, moved
end

-- Trains, replays, checks the cloud, the edges and the terminals; returns
-- every model's values (cloud, edges, terminals) for the determinism check.
local function case(what, o)
  local net, cloud, edges, terms, refs = network(o.speeds)
  local s = hier.train{ cloud = cloud, edges = edges, workers = terms, tau1 = o.tau1, tau2 = o.tau2,
                        model = T.model, dataset = o.dataset or T.dataset, seed = 7, batch = 64, steps = o.steps,
                        worker_opt = o.worker_opt, compress = o.compress, eval_limit = 50, prefix = "h" .. runs .. "_",
                        progress = false }
  T.eq(s.steps, o.steps, what .. ": local steps")
  local samples = shard_samples(refs, o.dataset or T.dataset)
  local ref = R.new(refs, { model = T.model, dataset = o.dataset or T.dataset, seed = 7, batch = 64 })
  ref.samples = samples
  local rounds = replay(ref, o)
  if o.uneven then
    local sizes = {}
    for i = 1, N do sizes[i] = samples[i] end
    hn.log(string.format("%s: shards of %s samples", what, table.concat(sizes, ", ")))
    local differ = false
    for i = 2, N do differ = differ or samples[i] ~= samples[1] end
    assert(differ, what .. ": the shards have equal sizes")
  end
  T.eq(s.edge_rounds, rounds, what .. ": edge rounds")
  local notes, worst, moved = {}, 0, 0
  local function note(d, m) worst, moved = math.max(worst, d), math.max(moved, m) end
  note(check(cloud, "w", refs[1], "cloud", refs[1], what, notes))
  for g, list in ipairs(GROUPS) do note(check(edges[g], "w", refs[list[1]], "edge", refs[1], what, notes)) end
  for i = 1, N do note(check(terms[i], "w", refs[i], "w", refs[1], what, notes)) end
  hn.log(string.format("%s: |w - w_ref| / |w_ref - w_init|: %s", what, table.concat(notes, ", ")))
  hn.log(string.format("%s: largest |w - w_ref| = %.3g against |w_ref - w_init| up to %.3g", what, worst, moved))
  local values = { R.read_all(cloud, "w") }
  for g = 1, #GROUPS do values[#values + 1] = R.read_all(edges[g], "w") end
  for i = 1, N do values[#values + 1] = R.read_all(terms[i], "w") end
  net:stop()
  return values
end


-- bit for bit: the averages add in a fixed order, whatever arrives first
local function both_speeds(what, o) R.both_speeds(case, what, o, SLOW, "terminal 4 at 1/20") end

local SGD = { lr = LR }
-- 4 rounds (2, 2, 2, 1 local steps), cloud rounds 2 and 4.
both_speeds("tau1 2, tau2 2, 7 steps", { tau1 = 2, tau2 = 2, steps = 7, worker_opt = SGD })
-- 4 rounds of 1 step, a cloud round at 3: the training ends after an edge
-- round, and the cloud averages the edges' models once more.
both_speeds("tau1 1, tau2 3, 4 steps (ends between cloud rounds)",
            { tau1 = 1, tau2 = 3, steps = 4, worker_opt = SGD })
case("tau1 3, tau2 1, 6 steps, momentum, terminal 4 at 1/20",
     { tau1 = 3, tau2 = 1, steps = 6, speeds = SLOW, worker_opt = { method = "momentum", lr = 0.05, momentum = 0.9 } })
both_speeds("tau1 2, tau2 2, 6 steps, top-k 20% with error feedback",
            { tau1 = 2, tau2 = 2, steps = 6, worker_opt = SGD, compress = { method = "topk", ratio = 0.2 } })
-- Shards of uneven sizes (Dirichlet partition): a terminal's share of its
-- edge is its samples', not 1 / (its edge's terminals).
local DIRICHLET = {}
for k, v in pairs(T.dataset) do DIRICHLET[k] = v end
DIRICHLET.partition, DIRICHLET.alpha = "dirichlet", 0.5
both_speeds("tau1 2, tau2 2, 6 steps, Dirichlet shards", { tau1 = 2, tau2 = 2, steps = 6, worker_opt = SGD,
                                                           dataset = DIRICHLET, uneven = true })
hn.log(string.format("exact_hier: %d trainings checked", runs))
print("exact_hier: ok")
