"""`ddpdoctor run` end to end: the CLI, the launcher, torchrun, the tracer on every rank, the
judges and the report, with real processes on gloo. Each fixture's `# expect:` comments give the
exact codes and lines (tests/trace runs every fixture under torchrun directly; these runs take
the user's path). Faults from outside are real: SIGKILL to a rank, Ctrl-C to ddpdoctor."""

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
sys.path.insert(0, str(ROOT / "tests" / "trace"))
from trace_harness import expected  # noqa: E402  (the fixtures' `# expect:` comments)


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


def found(report: dict, script: str) -> set[tuple[str, int]]:
    return {
        (f["code"], f["where"]["line"])
        for c in report["checks"]
        for f in c["findings"]
        if f.get("where") and Path(f["where"]["path"]).name == script
    }


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


@pytest.fixture(scope="module")
def no_sampler(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict]:
    tmp = tmp_path_factory.mktemp("no-sampler")
    return finish(start(tmp, "no_sampler.py"), tmp)


def test_the_seed_pitfall_is_named_at_the_users_line(no_sampler: tuple[int, str, dict]) -> None:
    code, output, report = no_sampler
    assert code == 1, output
    assert report["mode"] == "run" and report["status"] == "fail"
    assert found(report, "no_sampler.py") == expected(FIXTURES / "no_sampler.py")
    (f,) = [f for c in report["checks"] for f in c["findings"] if f["code"] == "DDL002"]
    assert f["symbol"] == "sampler-missing" and f["ranks"] == [0, 1]
    rows = [c["id"] for c in report["checks"]]
    assert rows == [
        "group",
        "devices",
        "data",
        "gradscaler",
        "replicas",
        "collectives",
        "writes",
        "timing",
    ]
    assert "ddpdoctor run no_sampler.py" in output and "DDL002" in output


def test_a_clean_script_passes_and_its_output_is_shown(tmp_path: Path) -> None:
    code, output, report = finish(start(tmp_path, "clean_trainer_class.py"), tmp_path)
    assert code == 0, output
    bad = [(f["code"], f["level"]) for c in report["checks"] for f in c["findings"]]
    assert [b for b in bad if b[1] != "info"] == []
    assert [r["state"] for r in report["ranks"]] == ["ok", "ok"]


def test_a_crash_in_the_users_code_names_its_line(tmp_path: Path) -> None:
    code, output, report = finish(start(tmp_path, "ddp_before_init.py"), tmp_path)
    assert code == 1, output
    assert found(report, "ddp_before_init.py") == expected(FIXTURES / "ddp_before_init.py")
    assert report["root_cause"]["where"]["line"] == 8
    assert leftovers(tmp_path / "run") == []


def test_uneven_batches_hang_is_named_with_each_ranks_line(tmp_path: Path) -> None:
    t0 = time.monotonic()
    code, output, report = finish(start(tmp_path, "uneven_batches.py", "--timeout", "6"), tmp_path)
    assert code == 1, output
    assert found(report, "uneven_batches.py") == expected(FIXTURES / "uneven_batches.py")
    states = {r["rank"]: r["state"] for r in report["ranks"]}
    assert "hung" in states.values()
    # the flight recorder: rank 1 never joined the gradient all_reduce of rank 0's extra batch
    seq = never_joined(report, rank=1, at="uneven_batches.py:22")
    group = report["launch"]["flight"]["groups"][0]
    assert group["last_enqueued"] == {"0": seq, "1": seq - 1}
    assert f"called at {FIXTURES / 'uneven_batches.py'}:20" in finding(report, "DDP701")["message"]
    assert time.monotonic() - t0 < 90
    assert leftovers(tmp_path / "run") == []


def finding(report: dict, code: str) -> dict:
    (f,) = [f for c in report["checks"] for f in c["findings"] if f["code"] == code]
    return f


def never_joined(report: dict, rank: int, at: str) -> int:
    """The DDP701 finding: `rank` (host, pid) never joined collective #N (returned), and its
    stack put it at `at`; the others wait in #N; every rank completed #N-1."""
    f = finding(report, "DDP701")
    me = next(r for r in report["ranks"] if r["rank"] == rank)
    seq = f["data"]["seq"]
    assert f["ranks"] == [rank] and f["data"]["last_completed_by_all"] == seq - 1
    assert f["message"].startswith(
        f"rank {rank} ({me['host']}, pid {me['pid']}) never joined all_reduce #{seq} of group 0"
    )
    assert f"it is at {FIXTURES / at.split(':')[0]}:{at.split(':')[1]} " in f["message"]
    return seq


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


def test_a_rank_spinning_in_python_is_named_at_its_line(tmp_path: Path) -> None:
    code, output, report = finish(start(tmp_path, "spin_rank.py", "--timeout", "6"), tmp_path)
    assert code == 1, output
    assert found(report, "spin_rank.py") >= expected(FIXTURES / "spin_rank.py")
    r1 = next(r for r in report["ranks"] if r["rank"] == 1)
    assert r1["state"] == "hung" and "busy on the CPU" in r1["detail"]
    assert any("spin_rank.py:15" in frame for frame in r1["stack"])
    # its flight recorder stops before the all_reduce rank 0 waits in
    never_joined(report, rank=1, at="spin_rank.py:15")
    assert leftovers(tmp_path / "run") == []
