"""Every unfinished rank's Python stacks at a verdict, before anything is killed: each rank (worker
or tracer) registered faulthandler for SIGUSR1, which writes all threads' stacks from its signal
handler even while the main thread is blocked inside a C++ collective. One signal to every rank,
then one short wait for all the files (and the flight-recorder dumps asked for at the same
moment); a stopped (SIGSTOP) rank cannot answer: pystack reads it from outside when installed."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from ddpdoctor.report.model import RankState
from ddpdoctor.runfiles import RunFolder

DUMP_WAIT_S = 1.5
_TRACER = f"{os.sep}ddpdoctor{os.sep}trace{os.sep}"  # `ddpdoctor run`'s entry and hooks
SHOWN_FRAMES = 3


def take(folder: RunFolder, alive: dict[int, Any], into: dict[int, str]) -> None:
    """Ask every rank in `alive` ({rank: psutil.Process}) for its stacks and every live rank for
    its flight recorder (one request file their side threads watch); put the stacks that came
    back into `into` ({rank: dump text}). A stopped rank answers neither: its stacks are read
    from outside (pystack, when installed) while the others write theirs, in the same wait."""
    from ddpdoctor.job import remote_stack
    from ddpdoctor.trace.stacks import DUMP_SIGNAL

    t0 = time.monotonic()
    with contextlib.suppress(OSError):
        folder.flight_request.touch()
    before: dict[int, int] = {}
    outside: dict[int, Any] = {}
    for rank, proc in alive.items():
        if _stopped(proc):
            reader = remote_stack.start(proc.pid)
            if reader is not None:
                outside[rank] = reader
            continue
        path = folder.stack_file(rank)
        before[rank] = path.stat().st_size if path.exists() else 0
        try:
            os.kill(proc.pid, DUMP_SIGNAL)
        except (ProcessLookupError, PermissionError):
            before.pop(rank)
    deadline = time.monotonic() + DUMP_WAIT_S
    pending = dict(before)
    flights = {r: _mtime(folder.flight_file(r)) for r in before}
    sizes: dict[int, int] = {}
    while (pending or flights) and time.monotonic() < deadline:
        time.sleep(0.05)
        for rank in list(pending):
            path = folder.stack_file(rank)
            size = path.stat().st_size if path.exists() else 0
            if size > pending[rank] and sizes.get(rank) == size:  # grown, and done growing
                with open(path, encoding="utf-8", errors="replace") as fh:
                    fh.seek(pending.pop(rank))
                    into[rank] = fh.read()
            sizes[rank] = size
        for rank in list(flights):
            if _mtime(folder.flight_file(rank)) != flights[rank]:
                flights.pop(rank)
    for rank, proc in outside.items():
        left = t0 + remote_stack.TIMEOUT_S - time.monotonic()
        text = remote_stack.finish(proc, left, pid=alive[rank].pid)
        if text:
            into[rank] = text


def _mtime(path: Any) -> int:
    try:
        return int(path.stat().st_mtime_ns)
    except OSError:
        return 0


def _stopped(proc: Any) -> bool:
    import psutil

    try:
        return proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def frames(text: str) -> list[str]:
    """The main thread's frames, innermost first, as 'function (path:line)', torch's own and
    the tracer's wrappers left out: where the rank's own code was (a probe's line, or the
    user's)."""
    from ddpdoctor.trace.stacks import main_thread, parse_dump

    thread = main_thread(parse_dump(text))
    if thread is None:
        return []
    return [
        f"{func} ({path}:{line})"
        for path, line, func in thread.frames
        if f"{os.sep}torch{os.sep}" not in path and not path.startswith("<") and _TRACER not in path
    ]


def attach(states: list[RankState], dumps: dict[int, str]) -> None:
    """Each rank with a dump keeps its frames, and a failed one says where it was."""
    for st in states:
        text = dumps.get(st.rank)
        if not text:
            continue
        st.stack = frames(text)
        if st.stack and st.state != "ok":
            where = " ← ".join(st.stack[:SHOWN_FRAMES])
            st.detail = f"{st.detail}; main thread in {where}" if st.detail else where
        elif not st.stack and st.state != "ok":
            st.detail += "; its stacks showed no frame outside torch"
