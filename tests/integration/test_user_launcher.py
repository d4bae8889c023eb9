"""The worker started by the user's own launcher, so `env` examines exactly the environment their
training job gets: `torchrun ... -m ddpdoctor.worker`, and plain `python -m ddpdoctor.worker`
(the seed's "started with python train.py" mistake)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("DDPDOCTOR_FAULT", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    env["TMPDIR"] = os.environ.get("TMPDIR", "/tmp")
    return env


def test_under_users_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = _env() | {"TMPDIR": str(tmp_path)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "ddpdoctor.worker",
            "--json",
            str(out),
            "--timeout",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "No problems" in r.stdout and "[✓] GradScaler + DDP" in r.stdout
    )  # rank 0 prints the report
    rep = json.loads(out.read_text())
    jsonschema.validate(rep, schema.schema_for("report"))
    assert rep["status"] == "pass" and rep["world_size"] == 2
    assert [x["state"] for x in rep["ranks"]] == ["ok", "ok"]
    assert rep["checks"][0]["ranks"]["1"]["vars"]["LOCAL_WORLD_SIZE"] == "2"


def test_plain_python_without_launcher(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpdoctor.worker",
            str(tmp_path / "run"),
            "--json",
            str(out),
            "--timeout",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    env_check = rep["checks"][0]
    assert env_check["findings"][0]["code"] == "DDP101"
    assert "not started by torchrun" in env_check["findings"][0]["message"]
    pg = rep["checks"][1]
    assert pg["status"] == "error"
    assert (
        "MASTER_ADDR" in pg["findings"][0]["message"]
        or "environment variable" in pg["findings"][0]["message"]
    )


def test_two_processes_given_rank_0_are_named_as_a_duplicate(tmp_path: Path) -> None:
    """A hand launch that exports RANK=0 for both processes: the second one stops at once with
    one line and exit 2; the first one's report names the duplicate as the root cause (before,
    each wrote the other's rank files and the report said only "rank 1 missing")."""
    from ddpdoctor.job.launch import free_port

    out = tmp_path / "report.json"
    env = _env() | {
        "TMPDIR": str(tmp_path),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "RANK": "0",
        "WORLD_SIZE": "2",
    }
    cmd = [sys.executable, "-m", "ddpdoctor.worker", "--timeout", "5"]
    first = subprocess.Popen(
        [*cmd, "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        claim = next(tmp_path.glob("ddpdoctor-*/rank-0.claim"), None)
        for _ in range(200):
            if claim is not None and claim.read_text().strip():
                break
            time.sleep(0.05)
            claim = next(tmp_path.glob("ddpdoctor-*/rank-0.claim"), None)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        first.communicate(timeout=120)
    finally:
        first.kill()
    assert second.returncode == 2
    assert second.stderr.count("\n") == 1, second.stderr
    assert f"rank 0 is already run by pid {first.pid}" in second.stderr
    rep = json.loads(out.read_text())
    assert rep["root_cause"]["code"] == "DDP103"
    assert f"pids {first.pid}, " in rep["root_cause"]["message"]
