"""Helpers for integration tests: real `ddpdoctor check` runs through real torchrun on gloo, and
faults injected from outside the tool (signals to a worker found by its heartbeat or its env)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None
    run_dir: Path
    elapsed: float
    signalled_at: float | None = None
    listeners: set[tuple[str, int]] | None = None  # what torchrun's own process listened on

    def check(self, cid: str) -> dict[str, Any]:
        assert self.report is not None
        return next(c for c in self.report["checks"] if c["id"] == cid)

    def codes(self, cid: str) -> list[str]:
        return [f["code"] for f in self.check(cid)["findings"]]

    def rank(self, r: int) -> dict[str, Any]:
        assert self.report is not None
        return next(x for x in self.report["ranks"] if x["rank"] == r)


def command(run_dir: Path, *args: str) -> list[str]:
    """`ddpdoctor check` with its rank files in run_dir and its JSON beside it (unless the test
    passes its own --json, e.g. '-' to read the document from stdout)."""
    json_args = [] if "--json" in args else ["--json", str(run_dir.parent / f"{run_dir.name}.json")]
    return [
        sys.executable,
        "-m",
        "ddpdoctor",
        "check",
        "--run-dir",
        str(run_dir),
        *json_args,
        *args,
    ]


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DDPDOCTOR_FAULT"}
    env.update(extra or {})
    return env


def finish(
    proc: subprocess.Popen,
    run_dir: Path,
    t0: float,
    signalled_at: float | None = None,
    timeout: float = 240,
) -> Run:
    out, err = proc.communicate(timeout=timeout)
    path = run_dir.parent / f"{run_dir.name}.json"
    report = (
        json.loads(path.read_text())
        if path.exists()
        else json.loads(out)
        if out.startswith("{")
        else None
    )
    return Run(proc.returncode, out, err, report, run_dir, time.monotonic() - t0, signalled_at)


def start_check(
    run_dir: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        command(run_dir, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(env),
    )
    return proc, t0


def run_check(
    run_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 240,
    watch_listeners: bool = False,
) -> Run:
    proc, t0 = start_check(run_dir, *args, env=env)
    seen: set[tuple[str, int]] = set()
    watcher = None
    if watch_listeners:
        watcher = threading.Thread(target=_watch_listeners, args=(proc, seen), daemon=True)
        watcher.start()
    run = finish(proc, run_dir, t0, timeout=timeout)
    if watcher is not None:
        watcher.join(timeout=5)
        run.listeners = seen
    return run


def _watch_listeners(proc: subprocess.Popen, seen: set[tuple[str, int]]) -> None:
    """Every TCP address torchrun's own process (the one holding the rendezvous store) listens
    on, polled while the run lasts."""
    while proc.poll() is None:
        try:
            for child in psutil.Process(proc.pid).children():
                for conn in child.net_connections(kind="tcp"):
                    if conn.status == psutil.CONN_LISTEN:
                        seen.add((conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            pass
        time.sleep(0.05)


def wait_for_check(
    run_dir: Path,
    rank: int,
    check: str,
    proc: subprocess.Popen,
    limit: float = 60,
    phase: str | None = None,
) -> int:
    """The pid of `rank` once its heartbeat says it is inside `check` (and, with `phase`, in a
    phase the check's own code announces, beginning so: the worker's "running" is written
    before the check's code is entered)."""
    deadline = time.monotonic() + limit
    beat = run_dir / f"rank-{rank}.beat"
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            data = json.loads(beat.read_text())
        except (OSError, ValueError):
            data = {}
        if data.get("check") == check and str(data.get("phase", "")).startswith(phase or ""):
            return int(data["pid"])
        time.sleep(0.01)
    raise AssertionError(f"rank {rank} never reached {check}")


def wait_for_worker_process(proc: subprocess.Popen, rank: int, limit: float = 60) -> int:
    """The pid of `rank`'s worker as soon as torchrun has started it (before it can beat)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                env = child.environ()
                if env.get("RANK") == str(rank) and "ddpdoctor.worker" in " ".join(child.cmdline()):
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.005)
    raise AssertionError(f"worker of rank {rank} never started")


def send(pid: int, sig: signal.Signals) -> float:
    os.kill(pid, sig)
    return time.monotonic()


def leftovers(run_dir: Path) -> list[psutil.Process]:
    """Processes still running that belong to this run (their command line names its folder)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if str(run_dir) in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found
