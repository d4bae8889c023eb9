"""`ddpdoctor run` end to end under faults from outside, with real processes on gloo: SIGKILL to
a rank mid-training, Ctrl-C to ddpdoctor. Every fixture's own run (codes and lines, a crash, a
hang, a spinning rank, the report's rows and schema) is in tests/trace/test_trace_fixtures.py,
through the same CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from harness import leftovers, send

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "run"


def start(tmp: Path, fixture: str, *options: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--nproc", "2", "--run-dir", str(tmp / "run")]
    cmd += ["--json", str(tmp / "report.json"), *options, "--", str(FIXTURES / fixture)]
    # in a folder of its own: the user's script writes where it is started (a checkpoint)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)


def finish(proc: subprocess.Popen, tmp: Path, timeout: float = 240) -> tuple[int, str, dict]:
    out, err = proc.communicate(timeout=timeout)
    report = json.loads((tmp / "report.json").read_text())
    jsonschema.validate(report, schema.schema_for("report"))
    return proc.returncode, out + err, report


def wait_for_step(run_dir: Path, rank: int, proc: subprocess.Popen, limit: float = 90) -> int:
    """The pid of a rank once its heartbeat says it is training."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            beat = json.loads((run_dir / f"rank-{rank}.beat").read_text())
        except (OSError, ValueError):
            beat = {}
        if str(beat.get("phase", "")).startswith("step "):
            return int(beat["pid"])
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} never started training")


def test_a_rank_killed_mid_training_is_named_and_the_others_kept(tmp_path: Path) -> None:
    proc = start(tmp_path, "clean_long_loop.py", "--steps", "0", "--timeout", "10")
    pid = wait_for_step(tmp_path / "run", 1, proc)
    send(pid, signal.SIGKILL)
    code, output, report = finish(proc, tmp_path)
    assert code == 1, output
    r1 = next(r for r in report["ranks"] if r["rank"] == 1)
    assert r1["state"] == "crashed" and r1["signal"] == "SIGKILL"
    assert "step" in r1["detail"]
    assert report["root_cause"]["rank"] == 1
    group = report["checks"][0]
    assert group["status"] == "fail"
    assert leftovers(tmp_path / "run") == []


def test_ctrl_c_ends_the_run_with_where_every_rank_was(tmp_path: Path) -> None:
    proc = start(tmp_path, "clean_long_loop.py", "--steps", "0")
    wait_for_step(tmp_path / "run", 1, proc)
    send(proc.pid, signal.SIGINT)
    code, output, report = finish(proc, tmp_path)
    assert code == 130, output
    assert report["launch"]["verdict"] == "interrupted"
    assert all(r["state"] == "ok" for r in report["ranks"])
    wheres = [f for c in report["checks"] for f in c["findings"] if f.get("where")]
    assert any(Path(f["where"]["path"]).name == "clean_long_loop.py" for f in wheres), wheres
    assert leftovers(tmp_path / "run") == []
