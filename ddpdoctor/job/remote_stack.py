"""Stacks of a rank that cannot answer SIGUSR1 (a stopped process runs no signal handler), read
from outside with `pystack remote PID`, the optional `[stacks]` extra. pystack reads a stopped
process's memory and leaves it stopped; `py-spy dump` here fails on one ("Failed to suspend
process"), which is why pystack is the one used. Its text is turned into faulthandler's layout,
so one parser serves both."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

TIMEOUT_S = 3.5  # from its start, beside the in-process dumps' wait (1.5 s): at most 2 s more
_THREAD = re.compile(r"^Traceback for thread (\d+)")
_FRAME = re.compile(r'^\s*\(Python\) File "(?P<path>.*)", line (?P<line>\d+), in (?P<func>.*)$')


def tool() -> str | None:
    """pystack beside this Python (a venv's bin), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "pystack")
    return here if os.access(here, os.X_OK) else shutil.which("pystack")


def start(pid: int) -> subprocess.Popen | None:
    exe = tool()
    if exe is None:
        return None
    try:
        return subprocess.Popen(
            [exe, "remote", "--no-color", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    except OSError:
        return None


def finish(
    proc: subprocess.Popen, timeout: float = TIMEOUT_S, pid: int | None = None
) -> str | None:
    """Its output in faulthandler's layout, or None (it failed or ran out of time); the thread
    whose id is the process's `pid` (the main thread, on Linux) is marked current."""
    try:
        out, _ = proc.communicate(timeout=max(timeout, 0.05))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return as_faulthandler(out, pid) if proc.returncode == 0 else None


def as_faulthandler(text: str, pid: int | None = None) -> str | None:
    """pystack lists frames outermost first per thread; faulthandler innermost first. pystack
    lists the newest thread first (a side thread, often), and marks none as current: the main
    thread is the one whose id is the process's."""
    threads: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            threads.append((head.group(1), []))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1][1].append(
                f'  File "{frame["path"]}", line {frame["line"]} in {frame["func"].strip()}'
            )
    if not threads:
        return None
    out = []
    for tid, frames in threads:
        head = "Current thread" if pid is not None and int(tid) == pid else "Thread"
        out.append(f"{head} 0x{int(tid):x} (most recent call first):")
        out.extend(reversed(frames))
        out.append("")
    return "\n".join(out)
