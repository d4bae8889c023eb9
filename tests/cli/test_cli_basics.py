"""The CLI's contract for bad input: one line on stderr, exit 2, never a traceback."""

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_commands() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    for cmd in ("check", "lint", "explain", "env", "problems"):
        assert cmd in r.stdout


def test_unknown_option_is_one_line_exit_2() -> None:
    r = run_cli("check", "--no-such-option")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
