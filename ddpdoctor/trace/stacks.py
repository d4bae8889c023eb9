"""Every rank's Python stack at the verdict, even while its main thread is blocked inside a C++
collective: faulthandler writes the stacks of all threads from its signal handler without the
GIL. The launcher calls `request_dump(pid)` and reads the file back with `read_dump`; the parser
is pure, so the judges and tests can use it on any text."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ddpdoctor.trace.sites import Site, first_user_site

DUMP_SIGNAL = signal.SIGUSR1
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])?")
_FRAME = re.compile(r'^\s+File "(?P<path>.*)", line (?P<line>\d+) in (?P<func>.*)$')

_dump_file: IO[Any] | None = None  # kept open: faulthandler writes to its file descriptor


@dataclass
class ThreadStack:
    """One thread of a dump; frames innermost first, as (path, line, function)."""

    ident: str
    current: bool = False
    name: str = ""
    frames: list[tuple[str, int, str]] = field(default_factory=list)

    def user_site(self) -> Site | None:
        return first_user_site((p, ln) for p, ln, _ in self.frames)


def install(path: Path) -> None:
    """Dump all threads' stacks into `path` on SIGUSR1 (appending: several requests keep all)."""
    import faulthandler

    global _dump_file
    _dump_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - must outlive this call
    faulthandler.register(DUMP_SIGNAL, file=_dump_file, all_threads=True, chain=False)


def request_dump(pid: int, path: Path | None = None, wait_s: float = 1.0) -> str | None:
    """Ask a traced rank for its stacks. With `path`, wait until the dump has landed there and
    return the newest dump's text (None: no such process, or nothing written in time)."""
    before = path.stat().st_size if path is not None and path.exists() else 0
    try:
        os.kill(pid, DUMP_SIGNAL)
    except (ProcessLookupError, PermissionError):
        return None
    if path is None:
        return None
    deadline = time.monotonic() + wait_s
    last = -1
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size > before and size == last:  # grown, and stopped growing
            break
        last = size
        time.sleep(0.05)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            fh.seek(before)
            text = fh.read()
    except OSError:
        return None
    return text or None


def parse_dump(text: str) -> list[ThreadStack]:
    """Threads of a faulthandler dump (the last dump when the text holds several)."""
    threads: list[ThreadStack] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            current = head.group(1) == "Current thread"
            if current and any(t.current for t in threads):
                threads = []  # a newer dump starts: keep only the last one
            threads.append(ThreadStack(head.group(2), current, head.group("name") or ""))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1].frames.append(
                (frame.group("path"), int(frame.group("line")), frame.group("func").strip())
            )
    return threads


def main_thread(threads: list[ThreadStack]) -> ThreadStack | None:
    """The thread running the user's script: the one whose outermost frame is the tracer's
    entry (runpy), else the one with a user frame, else the signalled one."""
    for t in threads:
        if any(
            path.endswith(("runpy.py", os.path.join("trace", "entry.py")))
            for path, _, _ in t.frames
        ):
            return t
    for t in threads:
        if t.user_site() is not None:
            return t
    return next((t for t in threads if t.current), threads[0] if threads else None)


def stopped_at(text: str) -> Site | None:
    """The user's file:line where the main thread of a dump was."""
    thread = main_thread(parse_dump(text))
    return thread.user_site() if thread else None
