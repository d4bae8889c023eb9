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
    """A bounded recorder for every group this process creates; a value the user set wins."""
    if not any(os.environ.get(name) for name in BUFFER_ENV):
        for name in BUFFER_ENV:
            os.environ[name] = BUFFER_ENTRIES


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


def dump(path: Path, rank: int) -> bool:
    data = snapshot()
    if data is None:
        return False
    data.update(rank=rank, host=socket.gethostname(), pid=os.getpid())
    write_json(path, data)
    return True


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
