"""Rank claims in a run folder under a hand launch: the first process to take a rank owns it, a
second live one is a duplicate, and a claim whose process is gone (or whose pid now belongs to
another program) does not block the next run. Real processes, no fakes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from ddpdoctor.runfiles import RunFolder


def _sleeper(tag: str) -> subprocess.Popen:
    """A live process whose command line says `tag` (a stand-in rank owner), once it does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if tag.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
        time.sleep(0.01)
    return proc


def test_first_claim_owns_the_rank(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.claim(0) is None
    assert folder.claimants(0) == [os.getpid()]
    assert folder.duplicates() == {}


def test_a_live_owner_makes_the_second_claim_a_duplicate(tmp_path: Path) -> None:
    owner = _sleeper("ddpdoctor-owner")
    try:
        folder = RunFolder(tmp_path)
        folder.claim_file(0).write_text(f"{owner.pid}\n")
        assert folder.claim(0) == owner.pid
        assert folder.duplicates() == {0: [owner.pid, os.getpid()]}
    finally:
        owner.kill()
        owner.wait()


def test_a_dead_or_foreign_owner_is_replaced(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    gone = _sleeper("ddpdoctor-gone")
    gone.kill()
    gone.wait()
    folder.claim_file(0).write_text(f"{gone.pid}\n")
    assert folder.claim(0) is None
    assert folder.claimants(0) == [os.getpid()]

    other = _sleeper("not-ours")  # a live pid that is some other program: a reused pid
    try:
        folder.claim_file(1).write_text(f"{other.pid}\n")
        assert folder.claim(1) is None
        assert folder.claimants(1) == [os.getpid()]
    finally:
        other.kill()
        other.wait()
