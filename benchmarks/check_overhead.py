"""Wall time of `ddpdoctor check --nproc N` against a bare torchrun job that only inits gloo,
barriers and exits, run alternately in one process so both see the same machine load.

    python benchmarks/check_overhead.py [--nproc 2] [--rounds 3]

Target: ddpdoctor / bare <= 1.5x. Not a test: it prints numbers, it asserts nothing."""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    bare, ours = [], []
    for i in range(args.rounds):
        bare.append(
            timed(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nproc-per-node",
                    str(args.nproc),
                    "--master-addr",
                    "127.0.0.1",
                    "--master-port",
                    str(free_port()),
                    str(HERE / "_bare_gloo_job.py"),
                ]
            )
        )
        ours.append(timed([sys.executable, "-m", "ddpdoctor", "check", "--nproc", str(args.nproc)]))
        print(
            f"round {i + 1}: bare torchrun {bare[-1]:.2f} s   ddpdoctor check {ours[-1]:.2f} s",
            flush=True,
        )
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"\nmedian of {args.rounds}, --nproc {args.nproc}:")
    print(f"  bare torchrun (init gloo, barrier, exit)  {b:6.2f} s")
    print(f"  ddpdoctor check (6 checks)                {o:6.2f} s")
    print(f"  ratio ddpdoctor / bare                    {o / b:6.2f}x   (target <= 1.50x)")


if __name__ == "__main__":
    main()
