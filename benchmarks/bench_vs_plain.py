"""busbw measured by `ddpdoctor bench-allreduce` against a plain torch all_reduce loop written the
obvious way, the same sweep run alternately in one process, plus where both stand against this
machine's memory-copy bandwidth (the ceiling for loopback gloo).

    python benchmarks/bench_vs_plain.py [--nproc 2] [--rounds 3] [--max-bytes 64M]

Target: ours/plain >= 0.95 at 1 MiB and above (timing overhead must not distort the figure).
Not a test: it prints numbers and asserts nothing."""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
from ddpdoctor.bench.engine import parse_size  # noqa: E402
from ddpdoctor.report.units import human_bytes  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain(nproc: int, lo: int, hi: int, iters: int, warmup: int, tmp: Path) -> dict[int, float]:
    out = tmp / "plain.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(nproc),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(free_port()),
            str(HERE / "_plain_allreduce_sweep.py"),
            str(out),
            str(lo),
            str(hi),
            "2",
            str(iters),
            str(warmup),
        ],
        check=True,
        capture_output=True,
    )
    return {r["bytes"]: r["busbw_gbps"] for r in json.loads(out.read_text())}


def ours(nproc: int, lo: int, hi: int, iters: int, warmup: int, tmp: Path) -> dict[int, float]:
    out = tmp / "ours.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpdoctor",
            "bench-allreduce",
            "--nproc",
            str(nproc),
            "--min-bytes",
            str(lo),
            "--max-bytes",
            str(hi),
            "--iters",
            str(iters),
            "--warmup",
            str(warmup),
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    return {r["bytes"]: r["busbw_gbps"] for r in json.loads(out.read_text())["rows"]}


def memcpy_gbps(nbytes: int = 64 << 20, reps: int = 20) -> float:
    """Single-thread copy bandwidth (read + write counted once, as busbw counts bytes once)."""
    import torch

    torch.set_num_threads(1)
    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-bytes", default="64K")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    lo, hi = parse_size(a.min_bytes), parse_size(a.max_bytes)
    runs: dict[str, list[dict[int, float]]] = {"plain": [], "ours": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(a.rounds):
            runs["plain"].append(plain(a.nproc, lo, hi, a.iters, a.warmup, tmp))
            runs["ours"].append(ours(a.nproc, lo, hi, a.iters, a.warmup, tmp))
            print(f"round {i + 1}/{a.rounds} done", flush=True)
    copy = memcpy_gbps()
    print(
        f"\n{a.nproc} ranks, gloo, float32 sum, {a.iters} iters + {a.warmup} warm-up, median of {a.rounds} "
        f"alternating rounds; memory copy (1 thread): {copy:.2f} GB/s"
    )
    print(
        f"{'size':>9} {'plain busbw':>12} {'ours busbw':>11} {'ours/plain':>11} {'ours/memcpy':>12}"
    )
    ratios = []
    for size in sorted(runs["plain"][0]):
        p = statistics.median(r[size] for r in runs["plain"])
        o = statistics.median(r[size] for r in runs["ours"])
        if size >= 1 << 20:
            ratios.append(o / p)
        print(f"{human_bytes(size):>9} {p:>12.3f} {o:>11.3f} {o / p:>11.2f} {o / copy:>12.2%}")
    if ratios:
        print(
            f"\nours/plain at >= 1 MiB: min {min(ratios):.2f}, median {statistics.median(ratios):.2f} "
            f"(target >= 0.95)"
        )


if __name__ == "__main__":
    main()
