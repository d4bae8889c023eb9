"""A third-party check, installed for real with pip into a folder of its own and found through the
`ddpdoctor.checks` entry-point group: it runs on every rank under torchrun, is judged, shows as a
row, and is selectable with --only. This is the README's "Adding a check" path end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harness import run_check

pytestmark = pytest.mark.slow

CHECK_MODULE = '''
"""A tiny third-party check: every rank reports its rank; the judge wants them all."""
from ddpdoctor import registry
from ddpdoctor.report.model import Finding, Judgement, Level

ID = "hello"
TITLE = "Hello from a plugin"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = False


def run(ctx):
    return {"rank": ctx.rank, "world": ctx.world_size}


def judge(per_rank, world):
    seen = sorted(d["rank"] for d in per_rank.values())
    findings = []
    if seen != list(range(world.world_size)):
        findings.append(Finding("HEL001", Level.FAIL, f"ranks {seen} answered"))
    return Judgement(summary=f"{len(seen)} ranks said hello", findings=findings)
'''

PYPROJECT = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "ddpdoctor-hello"
version = "0.0.1"

[project.entry-points."ddpdoctor.checks"]
hello = "ddpdoctor_hello"

[tool.setuptools]
py-modules = ["ddpdoctor_hello"]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("plugin-src")
    (src / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (src / "ddpdoctor_hello.py").write_text(textwrap.dedent(CHECK_MODULE))
    target = tmp_path_factory.mktemp("plugin-site")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run([*cmd, "--no-build-isolation", str(src)], capture_output=True, text=True)
    if done.returncode != 0:  # an older setuptools here: let pip build in isolation
        done = subprocess.run([*cmd, str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(target.glob("ddpdoctor_hello-*.dist-info/entry_points.txt"))
    return target


def test_an_installed_plugin_check_runs_on_every_rank(site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "check", "--only", "nope"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert listed.returncode == 2 and "hello" in listed.stderr  # a known id now
    run = run_check(tmp_path / "run", "--nproc", "2", "--only", "hello", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    row = run.check("hello")
    assert row["title"] == "Hello from a plugin" and row["status"] == "pass"
    assert row["summary"] == "2 ranks said hello"
    assert [c["id"] for c in run.report["checks"]] == ["hello"]  # the group's creator stays hidden
    assert row["ranks"]["1"] == {"rank": 1, "world": 2, "status": "ok"}
