"""Helpers shared by the triage tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"


def run_cli(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `python -m ddpdoctor ...` the way a user would (bytes in, bytes out)."""
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **env} if env is not None else None,
        timeout=timeout,
    )
