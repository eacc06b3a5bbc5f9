#!/usr/bin/env bash
# test_cluster_spread_ps.sh — the same parameter-server training on one
# machine and spread over three of the namespace cluster (label netns,
# parallel pass; issue 20): a cloud, 2 edges and 3 terminals an edge
# (topo.hier, backend kernel, rates only: this kernel has no netem), BSP
# for a fixed 6 rounds of a logistic regression on a synthetic data set.
# Placed over m1..m3 the controller builds m1's part and the agents the
# others', every command of the algorithm to a remote node is relayed
# and the tensors cross the machines' VXLAN links; the rounds, the updates applied and the
# final accuracy equal the single-machine run's exactly (same seeds, same
# order of the BSP rounds), on backend kernel and on backend user with
# delays and loss on the links (hiernet-linkd carries the cut links over
# UDP). The runs leave nothing behind.
# Usage: test_cluster_spread_ps.sh HIERNET
set -uo pipefail
HN=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"

cluster_spread_up 3

cat >"$D/ps.lua" <<LUA
local hn = require("hiernet")
local topo = require("hiernet.topo")
local ps = require("hiernet.algo.ps")
local spread = hn.param("spread", true)
local backend = hn.param("backend", "kernel")
local net = hn.network{ name = "q", backend = backend, seed = 1, hosts = spread and "$D/hosts" or nil }
-- delays and loss only where linkd emulates them (this kernel has no netem)
local user = backend == "user"
local t = topo.hier(net, {
  clouds = 1, edges_per_cloud = 2, terminals_per_edge = 3,
  links = { cloud_edge = { bw = "1Gbit", delay = user and "5ms" or nil },
            edge_terminal = { bw = "20Mbit", delay = user and "10ms" or nil, loss = user and "0.5%" or nil } },
})
net:start()
local s = ps.train{ server = t.cloud[1], workers = t.terminal, mode = "bsp", model = "logreg:32-4",
                    dataset = { name = "synthetic", n = 2000, dim = 32, classes = 4, partition = "shuffle" },
                    batch = 32, steps = 6, worker_opt = { method = "sgd", lr = 0.1 },
                    server_opt = { method = "sgd", lr = 1.0 }, eval_every = 6, final_eval_limit = 500 }
print(string.format("result steps %d updates %d accuracy %.6f", s.steps, s.updates_applied, s.final_accuracy))
print("backend " .. net.backend)
net:stop()
LUA

run() { # NAME SPREAD BACKEND
  cluster_exec 1 env HIERNET_SSH_CONFIG="$D/ssh_config" TMPDIR="$D" "$HN" run "$D/ps.lua" \
    --out "$D/r-$1" --quiet --set spread=$2 --set backend=$3 >"$D/out-$1" 2>"$D/err-$1"
  expect_eq "$1: exit status" "$?" 0
}
run one false kernel
run three true kernel
run three_user true user
for r in three three_user; do
  grep -q "placed over .*m2 .*m3" "$D/r-$r/log.txt" && pass "$r: placed over m1..m3" ||
    fail "$r: $(grep 'placed over' "$D/r-$r/log.txt")"
  expect_eq "$r: m2 and m3 built their parts" "$(grep -c 'machine m[23] built its part' "$D/r-$r/log.txt")" 2
done
expect_eq "three_user: backend user" "$(grep '^backend ' "$D/out-three_user")" "backend user"
one=$(grep '^result ' "$D/out-one")
[[ $one =~ ^result\ steps\ 6\ updates\ 36\ accuracy ]] && pass "one machine: $one" || fail "one machine: '$one' $(tail -n3 "$D/err-one")"
expect_eq "three machines: the same rounds, updates and accuracy" "$(grep '^result ' "$D/out-three")" "$one"
expect_eq "three machines, backend user with delays and loss: the same" "$(grep '^result ' "$D/out-three_user")" "$one"

cluster_expect_nothing_left "the runs"
checks_exit
