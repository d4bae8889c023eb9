"""What turning the flight recorder on costs a training loop: the same DDP script (4 Linear
512x512 layers, 200 steps, gloo, 2 ranks, plain torchrun) with TORCH_FR_BUFFER_SIZE=256 (what
`check` and `run` set) and without it, in alternating launches. Each rank times its own steps
after 10 warm-up steps, wall and CPU (process_time: less swayed by the neighbours' load on a
shared machine); the figures are medians over rounds of (median step with / without).

    python benchmarks/flight_overhead.py [--rounds 3] [--steps 200]
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
from pathlib import Path

LOOP = textwrap.dedent("""\
    import json, sys, time
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    steps, out = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, 512) for _ in range(4)]
    model = DDP(torch.nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 512)
    wall, cpu = [], []
    for step in range(steps + 10):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        if step >= 10:
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    wall.sort(); cpu.sort()
    if dist.get_rank() == 0:
        with open(out, "w") as fh:
            json.dump({"wall": wall[len(wall) // 2], "cpu": cpu[len(cpu) // 2]}, fh)
    dist.destroy_process_group()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(script: Path, steps: int, recorder: bool, out: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if "FR_BUFFER" not in k and "TRACE_BUFFER" not in k}
    if recorder:
        env["TORCH_FR_BUFFER_SIZE"] = "256"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(free_port()), str(script), str(steps), str(out)]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "loop.py"
        script.write_text(LOOP)
        ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {on: launch(script, args.steps, on, Path(tmp) / f"{on}.json") for on in order}
            for k in ratios:
                ratios[k].append(got[True][k] / got[False][k])
            print(
                f"round {r + 1}: step with/without the recorder: wall "
                f"{got[True]['wall'] * 1e3:.2f}/{got[False]['wall'] * 1e3:.2f} ms, cpu "
                f"{got[True]['cpu'] * 1e3:.2f}/{got[False]['cpu'] * 1e3:.2f} ms"
            )
        for k, v in ratios.items():
            print(f"{k}: {statistics.median(v):.3f}x (median of {len(v)} rounds; target <= 1.05)")


if __name__ == "__main__":
    main()
