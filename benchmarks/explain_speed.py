"""How fast is `ddpdoctor explain` on a big log, compared with `grep -E` for the same patterns?

    .venv/bin/python benchmarks/explain_speed.py [--size MB] [--keep PATH] [--engine auto|python]

Writes a log of --size MB (default 1024): realistic noise (training progress, NCCL INFO lines,
torchrun warnings, a traceback now and then) with a handful of real error lines spread through
it. Then times, on the same file:
- `grep -E -i -n PATTERN FILE` (LC_ALL=C) with PATTERN = the signature table's prefilter,
  exported by `ddpdoctor.triage.signatures.prefilter_pattern()`;
- `python -m ddpdoctor explain FILE --json OUT` (the full diagnosis: prefilter, signatures,
  ranking, JSON), with the chosen engine.
Prints the best of --repeat runs of each and the ratio. Not a test: numbers depend on the machine and the page cache
(the file is read once before timing so both start warm).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddpdoctor.triage.signatures import prefilter_pattern

NOISE = [
    "[rank{r}]: epoch {e} step {s} loss {l:.4f} lr 3.0e-04 grad_norm {g:.3f} {t:.1f} samples/s",
    "gpu-node{h}:{p}:{p2} [{d}] NCCL INFO Channel {c:02d}/32 :    0   1   2   3   4   5   6   7",
    "gpu-node{h}:{p}:{p2} [{d}] NCCL INFO Channel {c:02d}/0 : {d}[{d}] -> {d2}[{d2}] via P2P/CUMEM/read",
    "2024-05-01 12:{m:02d}:11,123 - INFO - trainer.py:{s} - Saving checkpoint to /ckpt/step_{s}.pt",
    "{s}/50000 [{m:02d}:11<03:22,  {t:.2f}it/s, loss={l:.3f}]",
    "W0501 12:{m:02d}:00.000000 {p} torch/distributed/run.py:793 Setting OMP_NUM_THREADS environment variable for each process to be 1",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line {s}, in _call_impl',
    "[default{r}]:[I501 12:{m:02d}:00.1 ProcessGroupNCCL.cpp:{s}] [PG 0 Rank {r}] ProcessGroupNCCL initialization options: size: 8",
]
ERRORS = [
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB",
    "[rank0]:[E501 12:00:00.1 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.",
    "gpu-node2:5555:5600 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.12<44120> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
]


def make_log(path: Path, size_mb: int, seed: int = 0) -> int:
    """Write about size_mb MiB of log; return the number of error lines planted."""
    rng = random.Random(seed)
    target = size_mb * 1024 * 1024
    # a pool of pre-rendered lines keeps generation fast; shuffle picks from it
    pool = [
        rng.choice(NOISE).format(
            r=rng.randrange(8),
            e=rng.randrange(100),
            s=rng.randrange(100000),
            l=rng.random(),
            g=rng.random() * 5,
            t=rng.random() * 1000,
            h=rng.randrange(16),
            p=rng.randrange(99999),
            p2=rng.randrange(99999),
            d=rng.randrange(8),
            d2=rng.randrange(8),
            c=rng.randrange(32),
            m=rng.randrange(60),
        )
        for _ in range(20000)
    ]
    block = ("\n".join(pool) + "\n").encode()
    written = planted = blocks = 0
    with open(path, "wb") as fh:
        while written < target:
            fh.write(block)
            written += len(block)
            blocks += 1
            if blocks % 8 == 4:  # a few error lines spread through the file
                fh.write((ERRORS[planted % len(ERRORS)] + "\n").encode())
                planted += 1
    return planted


def timed(cmd: list[str], **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=False, **kw)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="log size in MiB (default 1024)")
    ap.add_argument("--keep", help="write the log here and keep it (default: a temporary file)")
    ap.add_argument("--engine", default="auto", choices=["auto", "grep", "python"])
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs each (default 3)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep or Path(tmp, "big.log"))
        planted = make_log(path, args.size)
        size = path.stat().st_size
        pattern = prefilter_pattern()
        with open(path, "rb") as fh:  # warm the page cache for both contenders
            while fh.read(1 << 24):
                pass
        env = {**os.environ, "LC_ALL": "C"}
        # grep's output goes to a file: GNU grep stops at the first match when it writes to
        # /dev/null, which would time nothing
        grep_cmd = ["grep", "-E", "-i", "-n", pattern, str(path)]
        t_grep = min(
            timed(grep_cmd, stdout=open(Path(tmp, "grep.out"), "wb"), env=env)  # noqa: SIM115
            for _ in range(args.repeat)
        )
        out = Path(tmp, "explain.json")
        t_explain = min(
            timed(
                [
                    sys.executable,
                    "-m",
                    "ddpdoctor",
                    "explain",
                    str(path),
                    "--engine",
                    args.engine,
                    "--json",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(args.repeat)
        )
        doc = json.loads(out.read_text())
        print(
            f"log: {size / 2**20:.0f} MiB, {doc['lines_read']} lines, {planted} error lines planted"
        )
        print(f"grep -E -i (LC_ALL=C), {len(pattern.split('|'))} keywords: {t_grep:.2f} s")
        print(f"ddpdoctor explain ({doc['engine']} engine): {t_explain:.2f} s")
        print(f"ratio explain/grep: {t_explain / t_grep:.2f}x")
        print(
            "findings: "
            + ", ".join(f"{m['root_cause']} {m['code']} x{m['count']}" for m in doc["matches"])
        )


if __name__ == "__main__":
    main()
