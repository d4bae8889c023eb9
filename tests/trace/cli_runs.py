"""Fixture runs through the user's path: `ddpdoctor run --nproc 2 -- SCRIPT` (the CLI, the
launcher, torchrun, the tracer on every rank, the judges, the report), each in a folder of its
own, two launches at a time (most of a launch is waiting: torch imports, rendezvous, teardown).
A run keeps its report JSON, its output and its run folder (the ranks' trace records)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpdoctor.trace.record import TraceRecord, read_records

LEVELS = ("info", "warn", "fail")


@dataclass
class CliRun:
    returncode: int
    output: str
    report: dict[str, Any]
    run_dir: Path
    records: dict[int, TraceRecord]
    elapsed: float

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [f for c in self.report["checks"] for f in c["findings"]]

    def codes_at(self, script: Path) -> set[tuple[str, int]]:
        """(code, line) of every finding that points into `script`."""
        return {
            (f["code"], f["where"]["line"])
            for f in self.findings
            if f.get("where") and Path(f["where"]["path"]).name == script.name
        }

    def loud(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if LEVELS.index(f["level"]) >= 1]

    def rank(self, r: int) -> dict[str, Any]:
        return next(x for x in self.report["ranks"] if x["rank"] == r)


@dataclass(frozen=True)
class Job:
    script: Path
    folder: Path
    nproc: int = 2
    options: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


def command(job: Job) -> list[str]:
    return [
        sys.executable, "-m", "ddpdoctor", "run", "--nproc", str(job.nproc),
        "--run-dir", str(job.folder / "run"), "--json", str(job.folder / "report.json"),
        *job.options, "--", str(job.script), *job.args,
    ]  # fmt: skip


def cli_run(job: Job, timeout: float = 240) -> CliRun:
    job.folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # started in its own folder: the user's script writes where it is started (a checkpoint)
    proc = subprocess.run(
        command(job), capture_output=True, text=True, cwd=job.folder, timeout=timeout
    )
    report = json.loads((job.folder / "report.json").read_text())
    return CliRun(
        proc.returncode, proc.stdout + proc.stderr, report, job.folder / "run",
        read_records(job.folder / "run"), time.monotonic() - t0,
    )  # fmt: skip


def cli_runs(jobs: dict[str, Job], alone: set[str], parallel: int = 2) -> dict[str, CliRun]:
    """Every job, `parallel` at a time; the ones in `alone` (whose verdict depends on timing: a
    hang against a deadline) afterwards, one at a time."""
    out: dict[str, CliRun] = {}
    shared = [n for n in jobs if n not in alone]
    with ThreadPoolExecutor(parallel) as pool:
        for name, run in zip(shared, pool.map(lambda n: cli_run(jobs[n]), shared), strict=True):
            out[name] = run
    for name in jobs:
        if name in alone:
            out[name] = cli_run(jobs[name])
    return out
