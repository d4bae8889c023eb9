"""The tracer under real torchrun (what `ddpdoctor run` launches): the script sees its launch as
under plain torchrun, and a rank SIGKILLed mid-training leaves the other rank's record naming
the user's line, with no process left behind. Two launches: each costs 6-25 s here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from trace_harness import FIXTURES, leftovers, run_traced

from ddpdoctor.trace.record import read_records

pytestmark = pytest.mark.slow


def test_script_sees_its_launch_as_plain_torchrun_gives_it(tmp_path: Path) -> None:
    script = FIXTURES / "clean_launch_echo.py"
    run = run_traced(script, tmp_path / "run", args=(str(tmp_path), "--lr", "1"))
    assert run.returncode == 0, run.output[-3000:]
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"launch-{rank}.json").read_text())
        # plain `python -u SCRIPT ARGS` in the script's folder (the harness's cwd):
        assert seen["argv"] == [str(script), str(tmp_path), "--lr", "1"]
        assert seen["path0"] == str(script.parent.resolve())
        assert seen["cwd"] == str(script.parent)
        assert (seen["name"], seen["file"]) == ("__main__", str(script))
    recs = run.records
    assert [(r.exit.kind, r.exit.code) for r in recs.values()] == [("returned", 0)] * 2
    assert [f.code for f in run.findings] == []


def test_sigkill_of_a_rank_mid_training(tmp_path: Path) -> None:
    script = FIXTURES / "clean_long_loop.py"
    killed: dict[str, float] = {}

    def kill_rank_1(run_dir: Path, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            recs = read_records(run_dir)
            if len(recs) == 2 and all(r.steps >= 3 for r in recs.values()):
                os.kill(recs[1].pid, signal.SIGKILL)
                killed["t"] = time.monotonic()
                return
            time.sleep(0.1)

    run = run_traced(
        script, tmp_path / "run", tracer_args=("--steps", "0"), deadline=90, during=kill_rank_1
    )
    assert "t" in killed and not run.timed_out, run.output[-3000:]
    survivor, victim = run.records[0], run.records[1]
    assert victim.exit.kind == "running" and victim.steps >= 3  # its last second is kept
    assert survivor.exit.kind in ("exception", "running"), survivor.exit
    if survivor.exit.kind == "exception":  # gloo noticed the lost peer before torchrun's SIGTERM
        assert survivor.exit.where is not None and survivor.exit.where.path.endswith(
            "clean_long_loop.py"
        )
        assert survivor.exit.where.line in (18, 19, 20, 21)
    assert leftovers(run) == []
