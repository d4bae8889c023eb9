"""Signals to ddpdoctor itself and to torchrun (issue 11): what `timeout`, Slurm, Kubernetes, CI
cancellation and a closed ssh session send. SIGTERM/SIGHUP are handled like Ctrl-C (everything
killed, what is known printed, exit 128+N); SIGKILL leaves no orphans (torchrun dies with its
parent, the workers with torchrun); torchrun killed or torn down from outside is never a pass.
All with real processes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from harness import finish, leftovers, send, start_check, wait_for_check

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timing-sensitive verdicts
T = 5


def torchrun_of(proc_pid: int) -> psutil.Process:
    for child in psutil.Process(proc_pid).children(recursive=True):
        if any(m in " ".join(child.cmdline()) for m in ("torch.distributed.run", "loopback_store")):
            return child
    raise AssertionError("no torchrun below ddpdoctor")


def gone_within(run_dir: Path, seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = leftovers(run_dir)
        if not left:
            return []
        time.sleep(0.2)
    return leftovers(run_dir)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_to_ddpdoctor_end_everything_and_report(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    run_dir = tmp_path / "run"
    proc, t0 = start_check(run_dir, "--nproc", "2", "--timeout", str(T))
    wait_for_check(run_dir, 1, "allreduce", proc)
    send(proc.pid, sig)
    run = finish(proc, run_dir, t0)
    assert run.returncode == code, run.stderr
    assert run.report is not None and run.report["launch"]["verdict"] == "interrupted"
    assert run.report["launch"]["signal"] == sig.name
    assert run.check("env")["status"] == "pass"  # what was known is kept
    for r in (0, 1):  # the ranks did nothing wrong: not called hung
        state = run.rank(r)
        assert state["state"] == "ok", state
        assert "hung" not in state["detail"] and "before the verdict" not in state["detail"]
    assert gone_within(run_dir, 2) == []


def test_sigkill_to_ddpdoctor_leaves_no_orphans(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc, _t0 = start_check(run_dir, "--nproc", "2", "--timeout", str(T))
    wait_for_check(run_dir, 1, "allreduce", proc)
    assert len(leftovers(run_dir)) >= 3  # torchrun and two workers are running
    send(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # torchrun dies with its parent (PR_SET_PDEATHSIG), the workers see it gone within a tick
    assert gone_within(run_dir, 5) == []


def test_torchrun_killed_from_outside_is_named_and_never_a_pass(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc, t0 = start_check(run_dir, "--nproc", "2", "--timeout", str(T))
    wait_for_check(run_dir, 1, "allreduce", proc)
    os.kill(torchrun_of(proc.pid).pid, signal.SIGKILL)
    run = finish(proc, run_dir, t0)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report["status"] == "fail"
    launch = run.check("process_group")["findings"][0]
    assert launch["code"] == "DDP906" and "torchrun was killed by SIGKILL" in launch["message"]
    assert run.report["root_cause"]["rank"] is None  # the launcher, not rank 0
    assert gone_within(run_dir, 3) == []


def test_sigterm_to_torchrun_mid_run_fails_the_run(tmp_path: Path) -> None:
    """torchrun forwards SIGTERM to every rank: nobody else failed, so the torn-down ranks are the
    failure and the checks they never ran are no pass."""
    run_dir = tmp_path / "run"
    proc, t0 = start_check(run_dir, "--nproc", "2", "--timeout", str(T))
    wait_for_check(run_dir, 1, "allreduce", proc)
    os.kill(torchrun_of(proc.pid).pid, signal.SIGTERM)
    run = finish(proc, run_dir, t0)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report["status"] == "fail"
    levels = [f["level"] for c in run.report["checks"] for f in c["findings"]]
    assert "fail" in levels
    assert gone_within(run_dir, 3) == []
