-- hiernet.papers.adaptive_k: the adaptive-k paper's experimental settings
-- (shared/papers/adaptive-k-momentum-sync.txt, Section 5.2 and Tables 2-4),
-- shared by scenarios/paper_table4.lua and scenarios/paper_speedup.lua.
--
--   local paper = require("hiernet.papers.adaptive_k")
--   paper.ROWS[2]                -> { model, data, batch, cluster, cp, interval, cu = {mode = s} }
--   local cluster = paper.CLUSTERS[paper.ROWS[2].cluster]
--   local net, server, workers, uplink = paper.build(cluster, n_workers, { server_profile = true, backend = ..., })
--   local summary = paper.train(2, "easgd", server, { workers = workers, ... })
local hn = require("hiernet")

local paper = {}

-- The paper's Tables 3 and 4: model, data set, mini-batch, cluster, its
-- Cp and Cu per local step (seconds) for each synchronization model, and
-- EAO's interval (Table 3: the local steps between a worker's exchanges
-- with the server). The paper's "EAO" (elastic averaging, its [46]: Zhang
-- et al. 2015) is hiernet's easgd here.
paper.ROWS = {
  { model = "resnet34", data = "Cifar10", batch = 32, cluster = "cpu", cp = 23, interval = 20,
    cu = { asp = 5.7, bsp = 24.3, ssp = 19.4, ["adaptive-k"] = 7.4, ["drop-worker"] = 18.3, easgd = 4.9 } },
  { model = "mobilenet_v1", data = "Cifar10", batch = 64, cluster = "cpu", cp = 4.36, interval = 20,
    cu = { asp = 2.74, bsp = 8.84, ssp = 4.54, ["adaptive-k"] = 3.24, ["drop-worker"] = 4.74, easgd = 2.54 } },
  { model = "resnet50", data = "TinyImagenet", batch = 32, cluster = "gpu", cp = 0.86, interval = 10,
    cu = { asp = 4.14, bsp = 9.14, ssp = 7.14, ["adaptive-k"] = 5.14, ["drop-worker"] = 12.54, easgd = 8.64 } },
  { model = "resnet101", data = "Cifar100", batch = 64, cluster = "gpu", cp = 0.89, interval = 10,
    cu = { asp = 8.11, bsp = 15.11, ssp = 12.11, ["adaptive-k"] = 9.11, ["drop-worker"] = 6.81, easgd = 4.31 } },
  { model = "vgg16", data = "Cifar100", batch = 32, cluster = "gpu", cp = 0.98, interval = 30,
    cu = { asp = 25.02, bsp = 35.02, ssp = 31.02, ["adaptive-k"] = 27.02, ["drop-worker"] = 34.02, easgd = 22.02 } },
  { model = "resnet101", data = "Cifar100", batch = 64, cluster = "hdgib", cp = 0.89, interval = 10,
    cu = { asp = 0.21, bsp = 0.79, ssp = 0.66, ["adaptive-k"] = 0.3, ["drop-worker"] = 0.53, easgd = 0.03 } },
  { model = "vgg16", data = "Cifar100", batch = 32, cluster = "hdgib", cp = 0.98, interval = 30,
    cu = { asp = 2.06, bsp = 5.41, ssp = 3.4, ["adaptive-k"] = 2.7, ["drop-worker"] = 3.15, easgd = 0.04 } },
}

-- Section 5.2's clusters: the workers' device, the server's host CPU, the
-- network rate, and for HDGib the machines the workers share (their
-- internal link: PCIe 3.0 x16, 126 Gbit/s; the paper does not say).
paper.CLUSTERS = {
  cpu = { device = "i5-7500", server_cpu = "i5-7500", bw = "1Gbit" },
  gpu = { device = "rtx2080ti", server_cpu = "xeon-silver-4114", bw = "10Gbit" },
  hdgib = { device = "rtx2080ti", server_cpu = "xeon-silver-4114", bw = "100Gbit", machines = 4,
            internal_bw = "126Gbit" },
}

-- The synchronization models of Table 4, with Table 3's options: ps's
-- modes, and easgd (decentral's, paper.train).
paper.MODES = { "asp", "bsp", "ssp", "adaptive-k", "drop-worker", "easgd" }
paper.MODE_OPTS = { ssp = { staleness = 3 }, ["drop-worker"] = { drop_fraction = 0.5 } }
-- Modes whose ps `steps` count pushes rather than rounds.
paper.PER_PUSH = { asp = true, ssp = true, ["adaptive-k"] = true }

-- Modes that are not ps's: their train call (paper.train).
paper.DECENTRAL = { easgd = true }

-- Every link's latency (ms): one switch hop in a rack (the paper gives none).
paper.DELAY_MS = 0.05

-- The rows and modes asked for, checked: one line naming the value at fault.
function paper.check(row_numbers, modes, n_workers)
  for _, r in ipairs(row_numbers) do
    local row = paper.ROWS[tonumber(r)]
    if not row then error("--set rows: no row '" .. tostring(r) .. "' (1-7)", 0) end
    local machines = paper.CLUSTERS[row.cluster].machines
    if machines and n_workers % machines ~= 0 then
      error(string.format("--set workers=%d: row %s needs a multiple of %d", n_workers, r, machines), 0)
    end
  end
  for _, m in ipairs(modes) do
    if not paper.ROWS[1].cu[m] then error("--set modes: unknown mode '" .. m .. "'", 0) end
  end
end

-- Row `number`'s training of `mode` with options o (everything but the
-- server and the mode): ps.train with the server for ps's modes; for
-- easgd, decentral's, with the centre on the server (the paper's EAO
-- pulls from and pushes to its parameter server) and the row's interval as
-- its period. alpha stays decentral's default, 0.9 / N (Zhang et al.'s
-- beta = 0.9): the paper does not give its own.
function paper.train(number, mode, server, o)
  if paper.DECENTRAL[mode] then
    o.algo, o.center, o.period = mode, server, paper.ROWS[number].interval
    return require("hiernet.algo.decentral").train(o)
  end
  o.server, o.mode = server, mode
  for k, v in pairs(paper.MODE_OPTS[mode] or {}) do o[k] = v end
  return require("hiernet.algo.ps").train(o)
end

-- Links between worker and server, one way: worker - switch - server, and
-- on HDGib the machine's switch too.
function paper.hops(cluster) return cluster.machines and 3 or 2 end

-- The row's started network: the cluster's switch, the server on it (with
-- its host CPU's profile when o.server_profile), the workers on it
-- directly or (HDGib) through their machine's switch. Returns net, server,
-- workers and the server's link.
function paper.build(cluster, n_workers, o)
  local net = hn.network{ name = o.name or "adaptive_k", backend = o.backend, seed = 1 }
  local sw, delay = net:switch("sw"), paper.DELAY_MS .. "ms"
  local server = net:node("ps", { tier = "cloud", profile = o.server_profile and cluster.server_cpu or nil })
  local uplink = net:link(server, sw, { bw = cluster.bw, delay = delay })
  local machines, workers = {}, {}
  for m = 1, cluster.machines or 0 do
    machines[m] = net:switch("m" .. m)
    net:link(machines[m], sw, { bw = cluster.bw, delay = delay })
  end
  for i = 1, n_workers do
    workers[i] = net:node("w" .. i, { profile = cluster.device })
    if #machines > 0 then
      net:link(workers[i], machines[(i - 1) % #machines + 1], { bw = cluster.internal_bw, delay = delay })
    else
      net:link(workers[i], sw, { bw = cluster.bw, delay = delay })
    end
  end
  net:start()
  return net, server, workers, uplink
end

return paper
