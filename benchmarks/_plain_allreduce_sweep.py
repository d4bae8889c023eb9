"""The plain-torch baseline for bench_vs_plain.py: an all_reduce sweep written the obvious way.

torchrun --nproc-per-node 2 _plain_allreduce_sweep.py OUT.json MIN MAX FACTOR ITERS WARMUP
"""

import json
import sys
import time

import torch
import torch.distributed as dist

out, lo, hi, factor, iters, warmup = sys.argv[1], *map(int, sys.argv[2:7])
dist.init_process_group("gloo")
world = dist.get_world_size()
rows = []
n = lo
while n <= hi:
    x = torch.ones(n // 4, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    t = (time.perf_counter() - t0) / iters
    slowest = [None] * world
    dist.all_gather_object(slowest, t)
    t = max(slowest)
    algbw = n / t / 1e9
    rows.append({"bytes": n, "time_us": t * 1e6, "busbw_gbps": algbw * 2 * (world - 1) / world})
    n *= factor
if dist.get_rank() == 0:
    with open(out, "w") as fh:
        json.dump(rows, fh)
dist.destroy_process_group()
