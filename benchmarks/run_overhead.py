"""What the tracer of `ddpdoctor run` costs a healthy training loop: the same DDP script (4
Linear 512x512 layers, a DataLoader with a DistributedSampler, 200 optimizer steps, gloo, 2
ranks) under plain torchrun and under `torchrun -m ddpdoctor.trace --steps 0`, in alternating
rounds. The script times each of its own steps (after 10 warm-up steps), so start-up is not
counted; the figure is the median over rounds of (median traced step / median plain step).
Target: <= 1.05.

    python benchmarks/run_overhead.py [--rounds 3] [--steps 200] [--nproc 2] [--blocks 8]

On a shared machine the launches' figures swing by +-30 % from round to round (other jobs'
load); the second figure runs both sides in one launch, in alternating blocks of steps (ABBA),
so both meet the same load: that is the one to read there.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOOP = textwrap.dedent("""\
    import json, sys, time
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    steps, out = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    n = 64 * steps * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 512), torch.randn(n, 1))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(512, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sampler.set_epoch(0)
    warm, times, cpu0 = 10, [], 0.0
    t = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        now = time.perf_counter()
        if i >= warm:
            times.append(now - t)
        elif i == warm - 1:
            cpu0 = time.process_time()
        t = now
    cpu = time.process_time() - cpu0
    if dist.get_rank() == 0:
        with open(out, "w") as fh:
            json.dump({"times": times, "cpu": cpu}, fh)
    dist.barrier()
    dist.destroy_process_group()
""")


# The same loop, both ways in one launch: blocks of steps alternate between plain and traced
# (the hooks installed before a block, removed after it), so both sides meet the same load.
INTERLEAVED = textwrap.dedent("""\
    import json, statistics, sys, time
    from pathlib import Path
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    from ddpdoctor.trace.install import install, uninstall
    from ddpdoctor.trace.state import Config, Tracer

    blocks, per_block, out, run_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    n = 64 * per_block * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 512), torch.randn(n, 1))
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(512, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    res = {"plain": [], "traced": [], "plain_cpu": 0.0, "traced_cpu": 0.0}
    for b in range(2 * blocks):
        traced = (b % 2 == 1) if (b // 2) % 2 == 0 else (b % 2 == 0)  # ABBA order
        tracer = None
        if traced:
            tracer = Tracer(Config(run_dir, steps=0), "loop", [])
            install(tracer)
            tracer.start()
        sampler = DistributedSampler(data)
        loader = DataLoader(data, batch_size=64, sampler=sampler)
        sampler.set_epoch(b)
        dist.barrier()
        times, t, c = [], time.perf_counter(), time.process_time()
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            now = time.perf_counter()
            times.append(now - t)
            t = now
        key = "traced" if traced else "plain"
        res[key] += times[2:]
        res[key + "_cpu"] += time.process_time() - c
        if tracer is not None:
            uninstall(tracer)
    if dist.get_rank() == 0:
        with open(out, "w") as fh:
            json.dump(res, fh)
    dist.barrier()
    dist.destroy_process_group()
""")


def interleaved(blocks: int, per_block: int, nproc: int, work: Path) -> dict:
    script = work / "interleaved.py"
    script.write_text(INTERLEAVED)
    out = work / "interleaved.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-addr", "127.0.0.1", "--master-port", str(_port()), str(script),
           str(blocks), str(per_block), str(out), str(work / "trace-interleaved")]  # fmt: skip
    (work / "trace-interleaved").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    script: Path, traced: bool, steps: int, nproc: int, work: Path
) -> tuple[float, float, float]:
    """(median seconds of one step on rank 0, CPU seconds of rank 0's timed steps, all its
    threads, the tracer's included; wall seconds of the whole launch). The median step and the
    CPU time, not the wall sum: on a shared machine other jobs' bursts land on a few steps."""
    out = work / f"result-{'traced' if traced else 'plain'}.json"
    out.unlink(missing_ok=True)
    head = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(_port())]  # fmt: skip
    tracer = ["-m", "ddpdoctor.trace", "--run-dir", str(work / "trace"), "--steps", "0", "--"]
    cmd = head + (tracer if traced else []) + [str(script), str(steps), str(out)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    result = json.loads(out.read_text())
    return statistics.median(result["times"]), result["cpu"], wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=8, help="interleaved blocks per side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "loop.py"
        script.write_text(LOOP)
        ratios, cpu_ratios, plain_s, traced_s = [], [], [], []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)  # alternate who goes first
            got = {traced: launch(script, traced, args.steps, args.nproc, work) for traced in order}
            plain_s.append(got[False][0])
            traced_s.append(got[True][0])
            ratios.append(got[True][0] / got[False][0])
            cpu_ratios.append(got[True][1] / got[False][1])
            print(f"round {r + 1}: plain {1000 * got[False][0]:.2f} ms/step, traced "
                  f"{1000 * got[True][0]:.2f} ms/step "
                  f"(ratio {ratios[-1]:.3f}; CPU {got[False][1]:.2f} s / {got[True][1]:.2f} s, "
                  f"ratio {cpu_ratios[-1]:.3f}; launches {got[False][2]:.1f} s / {got[True][2]:.1f} s)")  # fmt: skip
    if ratios:
        print(
            f"loop:    {args.steps} steps x {args.nproc} ranks, 4x Linear(512,512), batch 64, gloo"
        )
        print(
            f"plain:   {1000 * statistics.median(plain_s):.2f} ms/step (median step, median round)"
        )
        print(f"traced:  {1000 * statistics.median(traced_s):.2f} ms/step")
        print(f"ratio:   {statistics.median(ratios):.3f}x median step  (target <= 1.05)")
        print(f"cpu:     {statistics.median(cpu_ratios):.3f}x CPU time of the timed steps")
    with tempfile.TemporaryDirectory() as tmp:
        per_block = max(20, args.steps // 5)
        res = interleaved(args.blocks, per_block, args.nproc, Path(tmp))
    plain, traced = statistics.median(res["plain"]), statistics.median(res["traced"])
    print(f"interleaved in one launch ({args.blocks} blocks of {per_block} steps per side, ABBA):")
    print(f"  median step: plain {1000 * plain:.2f} ms, traced {1000 * traced:.2f} ms, "
          f"ratio {traced / plain:.3f}x")  # fmt: skip
    print(f"  CPU time:    plain {res['plain_cpu']:.2f} s, traced {res['traced_cpu']:.2f} s, "
          f"ratio {res['traced_cpu'] / res['plain_cpu']:.3f}x  (target <= 1.05)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
