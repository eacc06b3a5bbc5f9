#!/usr/bin/env python3
"""gloo_allreduce.py — the anchor of tools/bench/algorithms: torch.distributed
with the gloo backend doing all_reduce of the same size, one process per
hiernet node, started inside the nodes by the bench scenario. Prints
"median_ms X" (rank 0's median over the timed repetitions, after one warm-up).

gloo binds to the interface named by GLOO_SOCKET_IFNAME: the node's link
interface, found here from the node's routes."""
import argparse
import os
import statistics
import time


def link_interface():
    """The interface the node's routes leave by (hiernet names a link's end
    after the node at its other end; a node on one switch has one), the
    default route's where there is one."""
    routes = []
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[0] != "lo":
                routes.append((fields[1] != "00000000", fields[0]))
    if not routes:
        raise SystemExit("gloo_allreduce: this node has no route")
    return min(routes)[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--mb", type=float, default=16)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", link_interface())
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{a.port}", rank=a.rank,
                            world_size=a.world)
    t = torch.rand(int(a.mb * 1024 * 1024 / 4))
    times = []
    for r in range(a.reps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        ms = (time.perf_counter() - t0) * 1e3
        if r > 0:
            times.append(ms)
    dist.barrier()
    dist.destroy_process_group()
    print(f"median_ms {statistics.median(times):.1f}", flush=True)


if __name__ == "__main__":
    main()
