"""Stopping and interrupting through the tracer (fork launcher, real gloo ranks): --max-time
stops every rank after the same step, Ctrl-C is recorded at the user's line, and bad tracer
arguments are one line and exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trace_forkrun import fork_run, warm_up
from trace_harness import FIXTURES, ROOT, leftovers

from ddpdoctor.trace.entry import parse_args
from ddpdoctor.trace.record import read_records

LOOP = FIXTURES / "clean_long_loop.py"


def test_parse_args_keeps_the_users_arguments_untouched() -> None:
    a = parse_args(["--steps", "5", "--run-dir=/tmp/x", "train.py", "--steps", "9", "-m", "x"])
    assert (a.script, a.args, a.config.steps, str(a.config.run_dir)) == (
        "train.py", ["--steps", "9", "-m", "x"], 5, "/tmp/x")  # fmt: skip
    m = parse_args(["--max-time", "2", "-m", "pkg.train", "--lr", "1"])
    assert (m.module, m.args, m.config.max_time, m.config.steps) == (
        "pkg.train",
        ["--lr", "1"],
        2.0,
        50,
    )
    d = parse_args(["--", "--weird-name.py"])
    assert d.script == "--weird-name.py"


@pytest.mark.parametrize(
    "argv, message",
    [([], "no script to run"), (["--steps", "x", "t.py"], "bad option value"),
     (["--bogus", "t.py"], "unknown option --bogus"), (["nosuch.py"], "no such script: nosuch.py"),
     (["--steps", "-1", "t.py"], "must not be negative")],
)  # fmt: skip
def test_bad_arguments_one_line_exit_2(argv: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor.trace", *argv], capture_output=True,
                          text=True, cwd=tmp_path, env=env)  # fmt: skip
    assert proc.returncode == 2
    assert (
        proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    )


@pytest.mark.slow
def test_max_time_stops_every_rank_after_the_same_step(tmp_path: Path) -> None:
    warm_up()
    run = fork_run(
        LOOP, tmp_path / "run", tracer_args=("--steps", "0", "--max-time", "1.5"), deadline=60
    )
    assert not run.timed_out and run.returncode == 0, run.output[-3000:]
    steps = {r.steps for r in run.records.values()}
    assert len(steps) == 1 and steps.pop() > 5
    assert {r.exit.kind for r in run.records.values()} == {"max-time"}
    assert not [f for f in run.findings if f.code != "DDR101"]


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped by fork_run)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.serial
def test_ctrl_c_is_recorded_at_the_users_line(tmp_path: Path) -> None:
    """Ctrl-C in a traced rank: KeyboardInterrupt is recorded at the user's line and the rank
    exits 130. One rank, so the signal never lands while a peer waits in a collective (with no
    torchrun to end them, two forked ranks could wait for ever); serial, like the other signal
    tests. The launcher's Ctrl-C of a 2-rank job is tested through `ddpdoctor run` in
    test_run_command."""
    warm_up()
    stuck: list[int] = []

    def interrupt(run_dir: Path, pids: list[int]) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            recs = read_records(run_dir)
            if len(recs) == 1 and all(r.steps >= 3 for r in recs.values()):
                break
            time.sleep(0.05)
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        grace = time.monotonic() + 15
        while time.monotonic() < grace and any(_alive(p) for p in pids):
            time.sleep(0.1)
        for rank, pid in enumerate(pids):
            if _alive(pid):  # fail below instead of waiting for the 60 s deadline
                stuck.append(rank)
                os.kill(pid, signal.SIGKILL)

    run = fork_run(
        LOOP,
        tmp_path / "run",
        nproc=1,
        tracer_args=("--steps", "0"),
        deadline=60,
        during=interrupt,
    )
    assert not run.timed_out and not stuck, (run.exit_codes, stuck, run.output[-3000:])
    assert run.exit_codes == {0: 130}
    e = run.records[0].exit
    assert e is not None and e.kind == "exception" and e.exception == "KeyboardInterrupt"
    assert e.where is not None and e.where.path.endswith("clean_long_loop.py")
    assert leftovers(run) == []


@pytest.mark.slow
def test_module_mode_sees_what_plain_python_m_gives(tmp_path: Path) -> None:
    """`-m MODULE`: argv[0], sys.path[0], cwd and __name__ as `python -m MODULE` has them."""
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(
        "import json, os, sys\nprint(json.dumps([sys.argv, sys.path[0], os.getcwd(), __name__]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    plain = subprocess.run([sys.executable, "-m", "mypkg.train", "--lr", "1"], capture_output=True,
                           text=True, cwd=tmp_path, env=env)  # fmt: skip
    traced = subprocess.run(
        [sys.executable, "-m", "ddpdoctor.trace", "--run-dir", str(tmp_path / "run"), "-m",
         "mypkg.train", "--lr", "1"], capture_output=True, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.splitlines()[-1] == plain.stdout.strip()
    [rec] = read_records(tmp_path / "run").values()
    assert (rec.exit.kind, rec.exit.code, rec.script) == ("returned", 0, "mypkg.train")
