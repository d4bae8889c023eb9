"""What the tracer of `ddpdoctor run` costs a healthy training loop: the same DDP script (4
Linear 512x512 layers, a DataLoader with a DistributedSampler, 200 optimizer steps, gloo, 2
ranks) under plain torchrun and under `torchrun -m ddpdoctor.trace --steps 0`, in alternating
rounds. The script times each of its own steps (after 10 warm-up steps), so start-up is not
counted; the figure is the median over rounds of (median traced step / median plain step).
Target: <= 1.05.

    python benchmarks/run_overhead.py [--rounds 3] [--steps 200] [--nproc 2]
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
    print(f"loop:    {args.steps} steps x {args.nproc} ranks, 4x Linear(512,512), batch 64, gloo")
    print(f"plain:   {1000 * statistics.median(plain_s):.2f} ms/step (median step, median round)")
    print(f"traced:  {1000 * statistics.median(traced_s):.2f} ms/step")
    print(f"ratio:   {statistics.median(ratios):.3f}x median step  (target <= 1.05)")
    print(f"cpu:     {statistics.median(cpu_ratios):.3f}x CPU time of the timed steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
