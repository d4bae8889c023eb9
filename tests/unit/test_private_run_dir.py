"""The run folder a rank picks by itself under the user's own launcher (issue 11, item 2): it is
predictable by design (the ranks must agree without talking), so it must be ours: created 0700,
refused when it is a symlink, another user's, or open to others; a log is never appended through
a symlink. Real files, real permissions; the other user is `nobody` via chown (we run as root
here; the test skips that case otherwise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpdoctor.runfiles import UnsafeRunDir, private_dir


@pytest.fixture()
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path


def test_created_private_and_reused(tmpdir_env: Path) -> None:
    path = private_dir("ddpdoctor-job1")
    assert path == tmpdir_env / f"ddpdoctor-job1-{os.getuid()}"
    assert (path.stat().st_mode & 0o777) == 0o700
    assert private_dir("ddpdoctor-job1") == path  # the next rank finds the same folder


def test_a_planted_symlink_is_refused_and_its_target_untouched(tmpdir_env: Path) -> None:
    victim = tmpdir_env / "victim"
    victim.mkdir()
    (tmpdir_env / f"ddpdoctor-job2-{os.getuid()}").symlink_to(victim)
    with pytest.raises(UnsafeRunDir, match="symlink"):
        private_dir("ddpdoctor-job2")
    assert list(victim.iterdir()) == []


def test_a_folder_open_to_others_is_refused(tmpdir_env: Path) -> None:
    d = tmpdir_env / f"ddpdoctor-job3-{os.getuid()}"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(UnsafeRunDir, match="open to other users"):
        private_dir("ddpdoctor-job3")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a folder to another user")
def test_another_users_folder_is_refused(tmpdir_env: Path) -> None:
    d = tmpdir_env / f"ddpdoctor-job4-{os.getuid()}"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    with pytest.raises(UnsafeRunDir, match="belongs to uid 65534"):
        private_dir("ddpdoctor-job4")


def test_the_worker_refuses_it_with_one_line_and_exit_2(tmpdir_env: Path) -> None:
    victim = tmpdir_env / "victim.log"
    victim.write_text("precious\n")
    (tmpdir_env / f"ddpdoctor-29999-{os.getuid()}").symlink_to(tmpdir_env)
    env = {**os.environ, "TMPDIR": str(tmpdir_env), "MASTER_PORT": "29999"}
    env.pop("TORCHELASTIC_RUN_ID", None)
    env.pop("SLURM_JOB_ID", None)
    done = subprocess.run(
        [sys.executable, "-m", "ddpdoctor.worker", "--only", "env"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "refusing to use it" in done.stderr and "Traceback" not in done.stderr
    assert victim.read_text() == "precious\n"
