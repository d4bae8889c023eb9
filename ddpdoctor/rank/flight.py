"""This rank's flight recorder: turned on before the process group exists (a bounded buffer, unless
the user set one), and dumped into the run folder when the launcher asks at a verdict. The main
thread may be blocked inside a C++ collective, so a side thread watches for the launcher's request
file and dumps from there (torch's dump takes the recorder's own lock, not the GIL-held main
thread). The dump is torch's pickle with the Python stacks of every collective, read back through
our safe loader and written as JSON with this rank's identity."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from typing import Any

from ddpdoctor.runfiles import RunFolder, write_json

BUFFER_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # torch ≥2.6, older
BUFFER_ENTRIES = "256"
POLL_S = 0.1


def enable() -> None:
    """A bounded recorder for every group this process creates; a value the user set wins.
    Only the name this torch reads (the old one warns on a new torch)."""
    if any(os.environ.get(name) for name in BUFFER_ENV):
        return
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("torch").split(".")[:2])
    except Exception:  # noqa: BLE001 - unknown: the current name
        major, minor = 2, 6
    os.environ[BUFFER_ENV[0] if (major, minor) >= (2, 6) else BUFFER_ENV[1]] = BUFFER_ENTRIES


def snapshot() -> dict[str, Any] | None:
    """This process's recorder as plain data, or None (an old torch, or nothing recorded)."""
    try:
        from torch._C import _distributed_c10d as c10d
    except ImportError:
        return None
    try:
        from ddpdoctor.flight.safe_pickle import loads

        data = loads(c10d._dump_fr_trace(True, True, False))
    except Exception:  # noqa: BLE001 - an older torch: the JSON form has no stacks
        try:
            import json

            data = json.loads(c10d._dump_fr_trace_json(True, False))
        except Exception:  # noqa: BLE001
            return None
    return data if isinstance(data, dict) else None


# (group name, collective seq) this rank gave up on: every later dump says so too
_timed_out: set[tuple[str, int]] = set()
_writing = threading.Lock()  # the side thread and the main thread may both dump
_own_groups: set[str] = set()  # ddpdoctor's own groups (check's control group): not the job's


def own_group(group: Any) -> None:
    """A process group of ddpdoctor's own traffic: its dumps say so and the analysis skips it."""
    name = getattr(group, "group_name", None)
    if name is not None:
        _own_groups.add(str(name))


def dump(path: Path, rank: int, timed_out_in: str | None = None) -> bool:
    """Write this rank's recorder to `path`. `timed_out_in`: the group (its name) whose newest
    collective this rank just gave up on: gloo retires a timed-out work like a finished one, so
    this dump and every later one say it did not complete."""
    with _writing:
        return _dump(path, rank, timed_out_in)


def _dump(path: Path, rank: int, timed_out_in: str | None) -> bool:
    data = snapshot()
    if data is None:
        return False
    entries = [e for e in data.get("entries") or [] if isinstance(e, dict)]
    if timed_out_in is not None:
        mine = [e for e in entries if _group_name(e) == timed_out_in]
        if mine:
            last = max(mine, key=lambda e: int(e.get("collective_seq_id") or 0))
            _timed_out.add((timed_out_in, int(last.get("collective_seq_id") or 0)))
    for e in entries:
        if (_group_name(e), int(e.get("collective_seq_id") or 0)) in _timed_out:
            e["state"], e["retired"] = "timed out", False
            st = (data.get("pg_status") or {}).get(str(e.get("pg_id")))
            if isinstance(st, dict):
                seq = int(e.get("collective_seq_id") or 0)
                done = int(st.get("last_completed_collective") or 0)
                st["last_completed_collective"] = min(done, seq - 1)
    data.update(rank=rank, host=socket.gethostname(), pid=os.getpid())
    if _own_groups:
        data["ddpdoctor_groups"] = sorted(_own_groups)
    write_json(path, data)
    return True


def _group_name(e: dict[str, Any]) -> str:
    return str((e.get("process_group") or [""])[0])


def watch(folder: RunFolder, rank: int) -> None:
    """Dump into `folder.flight_file(rank)` each time the launcher touches its request file."""

    def loop() -> None:
        request, seen = folder.flight_request, None
        with contextlib.suppress(OSError):
            seen = request.stat().st_mtime_ns  # a request from before this rank began: stale
        while True:
            threading.Event().wait(POLL_S)
            try:
                stamp = request.stat().st_mtime_ns
            except OSError:
                continue
            if stamp != seen:
                seen = stamp
                with contextlib.suppress(Exception):
                    dump(folder.flight_file(rank), rank)

    threading.Thread(target=loop, name="ddpdoctor-flight", daemon=True).start()
