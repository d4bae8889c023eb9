"""Real runs of the tracer for tests: `torchrun -m ddpdoctor.trace` on gloo, in its own session,
under a deadline; at the deadline every unfinished rank is asked for its stacks (SIGUSR1) and
then killed, as the launcher of `ddpdoctor run` does. Also reads the `# expect:` comments."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ddpdoctor.trace import stacks as st
from ddpdoctor.trace.judges import TraceFinding, judge
from ddpdoctor.trace.record import TraceRecord, read_records, stack_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "run"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z]{3}\d{3}(?:[ ,]+[A-Z]{3}\d{3})*)")


@dataclass
class TracedRun:
    returncode: int | None
    output: str
    run_dir: Path
    records: dict[int, TraceRecord]
    stacks: dict[int, str]
    findings: list[TraceFinding]
    elapsed: float
    timed_out: bool
    pids: list[int] = field(default_factory=list)
    exit_codes: dict[int, int] = field(default_factory=dict)

    def codes_at(self, script: Path) -> set[tuple[str, int]]:
        """(code, line) of every finding that points into `script`."""
        name = script.name
        return {
            (f.code, f.where.line)
            for f in self.findings
            if f.where is not None and Path(f.where.path).name == name
        }


def expected(script: Path) -> set[tuple[str, int]]:
    out = set()
    for n, line in enumerate(script.read_text().splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            out |= {(code, n) for code in re.split(r"[ ,]+", m.group("codes"))}
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False
    return True


def watch(
    running: Callable[[], bool], run_dir: Path, nproc: int, deadline: float,
    on_ready: Callable[[], None] | None,
) -> bool:  # fmt: skip
    """Wait while `running()`; call `on_ready` once every rank has a record. True: timed out."""
    while running():
        if on_ready is not None and len(read_records(run_dir)) >= nproc:
            on_ready()
            on_ready = None
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)
    return False


def run_traced(
    script: Path, run_dir: Path, *, nproc: int = 2, args: tuple[str, ...] = (),
    tracer_args: tuple[str, ...] = (), deadline: float = 60.0,
    during: Callable[[Path, subprocess.Popen], None] | None = None,
) -> TracedRun:  # fmt: skip
    """Launch, wait (calling `during` once the ranks have records), collect, judge."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "-m", "ddpdoctor.trace", "--run-dir", str(run_dir), *tracer_args, "--", str(script), *args,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    log = run_dir / "torchrun.log"
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=script.parent, start_new_session=True)  # fmt: skip
    ready = None if during is None else (lambda: during(run_dir, proc))
    timed_out = watch(lambda: proc.poll() is None, run_dir, nproc, t0 + deadline, ready)
    records = read_records(run_dir)
    pids = [r.pid for r in records.values()]
    stacks: dict[int, str] = {}
    if timed_out:
        stacks = dump_unfinished(run_dir)
        for pid in pids:  # torchrun starts its workers in sessions of their own
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        records = read_records(run_dir)
    findings = judge(records, nproc, stacks=stacks)
    return TracedRun(proc.returncode, log.read_text(errors="replace"), run_dir, records, stacks,
                     findings, time.monotonic() - t0, timed_out, pids)  # fmt: skip


def dump_unfinished(run_dir: Path, finished: set[int] = frozenset()) -> dict[int, str]:  # type: ignore[assignment]
    """At the deadline, as the launcher does: the stacks of every rank still working."""
    stacks: dict[int, str] = {}
    for rank, rec in read_records(run_dir).items():
        if rank not in finished and rec.exit.kind == "running" and _alive(rec.pid):
            text = st.request_dump(rec.pid, stack_file(run_dir, rank), wait_s=2.0)
            if text:
                stacks[rank] = text
    return stacks


def leftovers(run: TracedRun) -> list[int]:
    """Rank processes still alive after the run (must be none)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in run.pids):
        time.sleep(0.1)
    return [p for p in run.pids if _alive(p)]
