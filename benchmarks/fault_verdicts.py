"""Time-to-verdict of `ddpdoctor check` for each fault, injected for real from outside:

    python benchmarks/fault_verdicts.py [--timeout 10] [--nproc 2]

For each fault it prints how long after the fault the report was out (ddpdoctor exited) and
what the report said. Not a test: the tests assert the verdicts; this measures them."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def start(run_dir: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ddpdoctor",
            "check",
            "--run-dir",
            str(run_dir),
            "--json",
            str(run_dir / "report.json"),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def beat_pid(run_dir: Path, rank: int, check: str, proc: subprocess.Popen) -> int:
    while proc.poll() is None:
        try:
            b = json.loads((run_dir / f"rank-{rank}.beat").read_text())
            if b.get("check") == check:
                return int(b["pid"])
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    raise SystemExit(f"rank {rank} never reached {check}")


def early_pid(proc: subprocess.Popen, rank: int) -> int:
    while proc.poll() is None:
        for c in psutil.Process(proc.pid).children(recursive=True):
            try:
                if c.environ().get("RANK") == str(rank) and "ddpdoctor.worker" in " ".join(
                    c.cmdline()
                ):
                    return c.pid
            except psutil.Error:
                continue
        time.sleep(0.005)
    raise SystemExit("worker never started")


def summary(run_dir: Path) -> str:
    rep = json.loads((run_dir / "report.json").read_text())
    rc = rep.get("root_cause") or {}
    if rc:
        return f"{rc['state']}: {rc['message'][:90]}"
    first = next((f for c in rep["checks"] for f in c["findings"]), None)
    return f"{first['code']}: {first['message'][:90]}" if first else rep["status"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args()
    base = ["--nproc", str(a.nproc), "--timeout", str(a.timeout)]
    print(f"--timeout {a.timeout:g}, --nproc {a.nproc}")
    print(f"{'fault':<32} {'verdict after fault':>20} {'total':>7}  report says")
    with tempfile.TemporaryDirectory() as d:
        for name in (
            "SIGKILL mid-run",
            "SIGSTOP before join",
            "SIGSTOP mid-collective",
            "busy --master-port",
            "bad GLOO_SOCKET_IFNAME",
        ):
            run_dir = Path(d) / name.replace(" ", "_")
            run_dir.mkdir()
            holder = None
            env = None
            args = list(base)
            if name == "busy --master-port":
                holder = socket.socket()
                holder.bind(("", 0))
                holder.listen()
                args += ["--master-port", str(holder.getsockname()[1])]
            if name.startswith("bad"):
                env = {"GLOO_SOCKET_IFNAME": "nosuchif0"}
            t0 = time.monotonic()
            proc = start(run_dir, args, env)
            at = t0
            if name == "SIGKILL mid-run":
                os.kill(beat_pid(run_dir, 1, "allreduce", proc), signal.SIGKILL)
                at = time.monotonic()
            elif name == "SIGSTOP before join":
                os.kill(early_pid(proc, 1), signal.SIGSTOP)
                at = time.monotonic()
            elif name == "SIGSTOP mid-collective":
                os.kill(beat_pid(run_dir, 1, "allreduce", proc), signal.SIGSTOP)
                at = time.monotonic()
            proc.wait()
            end = time.monotonic()
            if holder:
                holder.close()
            print(
                f"{name:<32} {end - at:>19.1f}s {end - t0:>6.1f}s  {summary(run_dir)}", flush=True
            )


if __name__ == "__main__":
    main()
