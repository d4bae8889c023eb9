"""Issue 11's lint items: special files in a folder are skipped (never read), an empty --select
is a usage error, and an output path that cannot be written fails before any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lint"
HIT = FIXTURES / "ddl004_bare_cuda.py"


def run_lint(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "lint", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def special_folder(tmp_path: Path) -> Path:
    """A FIFO named x.py (reading it blocks forever), zero.py -> /dev/zero (never ends), a
    sparse file past the size cap, and one real script that must still be reported."""
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    with open(tmp_path / "huge.py", "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    (tmp_path / "train.py").write_text(HIT.read_text())
    return tmp_path


def test_special_files_are_skipped_and_named(special_folder: Path) -> None:
    r = run_lint(str(special_folder), timeout=20)  # before the fix: hangs on the FIFO
    assert r.returncode == 1, r.stderr
    assert "train.py:11:13: DDL004" in r.stdout
    assert "Found 1 problem" in r.stdout
    skipped = sorted(line for line in r.stderr.splitlines() if "skipped" in line)
    assert len(skipped) == 3
    assert "huge.py: larger than 8 MiB" in skipped[0]
    assert "x.py: not a regular file (a FIFO)" in skipped[1]
    assert "zero.py: not a regular file (a character device)" in skipped[2]


def test_a_named_fifo_alone_is_a_usage_error(special_folder: Path) -> None:
    r = run_lint(str(special_folder / "x.py"), timeout=20)
    assert r.returncode == 2
    assert "skipped" in r.stderr and "no Python files" in r.stderr


@pytest.mark.parametrize("codes", ["", ",", " , "])
def test_empty_select_is_a_usage_error(codes: str) -> None:
    r = run_lint("--select", codes, str(HIT))
    assert r.returncode == 2, r.stdout
    assert r.stderr.strip().splitlines() == [
        "ddpdoctor: error: --select: no rule code given (selecting nothing would always pass)"
    ]


@pytest.mark.parametrize("target", ["/proc/x", "/proc/self/nope/report.json"])
def test_unwritable_output_is_checked_before_any_work(target: str, tmp_path: Path) -> None:
    """The output is tried first: even with a path argument that does not exist, the error
    is about the output (nothing was walked or linted), in one line, exit 2."""
    r = run_lint("-o", target, str(tmp_path / "missing.py"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ddpdoctor: error: cannot write {target}")


def test_output_probe_leaves_no_file_behind(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    r = run_lint("-o", str(out), str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such file" in r.stderr
    assert not out.exists()
