"""Wall time of `ddpdoctor check --nproc N` against a bare torchrun job that only inits gloo,
barriers and exits, run alternately in one process so both see the same machine load.

    python benchmarks/check_overhead.py [--nproc 2] [--rounds 3]
        [--base-python /work/venv-base/bin/python --base-path /work/wt-base]

With --base-python (and --base-path, put on its PYTHONPATH), each round also times the same
`check` from another checkout (an earlier commit), in turn with this one: "no slower than
before" as a ratio under the same load.

Target: ddpdoctor / bare <= 1.5x. Not a test: it prints numbers, it asserts nothing."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    # from a neutral folder: `python -m` puts the working folder before PYTHONPATH
    r = subprocess.run(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    elapsed = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base-python", default=None, help="python of an earlier checkout's venv")
    ap.add_argument("--base-path", default=None, help="that checkout (put on PYTHONPATH)")
    args = ap.parse_args()
    base_env = dict(os.environ)
    if args.base_path:
        base_env["PYTHONPATH"] = args.base_path
    bare, ours, base = [], [], []
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
        line = f"round {i + 1}: bare torchrun {bare[-1]:.2f} s   ddpdoctor check {ours[-1]:.2f} s"
        if args.base_python:
            cmd = [args.base_python, "-m", "ddpdoctor", "check", "--nproc", str(args.nproc)]
            base.append(timed(cmd, base_env))
            line += f"   base check {base[-1]:.2f} s"
        print(line, flush=True)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"\nmedian of {args.rounds}, --nproc {args.nproc}:")
    print(f"  bare torchrun (init gloo, barrier, exit)  {b:6.2f} s")
    print(f"  ddpdoctor check (6 checks)                {o:6.2f} s")
    print(f"  ratio ddpdoctor / bare                    {o / b:6.2f}x   (target <= 1.50x)")
    if base:
        m = statistics.median(base)
        print(f"  base check ({args.base_path or args.base_python})  {m:6.2f} s")
        print(f"  ratio ddpdoctor / base                    {o / m:6.2f}x   (target <= 1.00x)")


if __name__ == "__main__":
    main()
