"""This rank's rank file and heartbeat (see `ddpdoctor.runfiles`). Written atomically after every
change; a side thread keeps `t_alive` fresh so the launcher can tell a rank that waits (alive)
from one that is stopped (stale)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ddpdoctor.runfiles import (
    ORPHANED,
    CheckEntry,
    ExchangeError,
    Heartbeat,
    RankDoc,
    RunFolder,
    Termination,
)

ALIVE_EVERY_S = 0.5
EXIT_ORPHANED = 129  # as SIGHUP: the controlling side went away


# Polled by the alive thread: where the rank is now, as (check, phase); a new answer moves the
# heartbeat's t_phase. Lets a traced training loop beat without a write per step.
Progress = Callable[[], tuple[str | None, str]]


class Recorder:
    def __init__(
        self,
        folder: RunFolder,
        rank: int,
        local_rank: int,
        nonce: str,
        progress: Progress | None = None,
    ) -> None:
        now = time.time()
        self.folder = folder
        self.lock = threading.Lock()
        host, pid = socket.gethostname(), os.getpid()
        self.doc = RankDoc(
            rank=rank, local_rank=local_rank, host=host, pid=pid, nonce=nonce, started_at=now
        )
        self.beat = Heartbeat(rank=rank, pid=pid, host=host, nonce=nonce, t_phase=now, t_alive=now)
        self._stop = threading.Event()
        self.parent = os.getppid()  # torchrun (or the user's launcher)
        self.progress = progress
        self.pulse: Any = None  # liveness.StorePulse on multi-node runs
        self._write_beat()
        threading.Thread(target=self._alive, name="ddpdoctor-alive", daemon=True).start()

    @property
    def rank(self) -> int:
        return self.doc.rank

    def _write_beat(self) -> None:
        with self.lock:
            self.beat.t_alive = time.time()
            self.folder.write_beat(self.beat)

    def _write_doc(self) -> None:
        self.folder.write_rank(self.doc)

    def _alive(self) -> None:
        while not self._stop.wait(ALIVE_EVERY_S):
            if os.getppid() != self.parent:
                self.orphaned()
            if self.progress is not None:
                with contextlib.suppress(Exception):
                    check, phase = self.progress()
                    with self.lock:
                        if (check, phase) != (self.beat.check, self.beat.phase):
                            self.beat.check, self.beat.phase = check, phase
                            self.beat.t_phase = time.time()
            try:
                self._write_beat()
            except OSError:
                return

    def orphaned(self) -> None:
        """The launcher died (killed with ddpdoctor, or by hand): a rank must not live on alone
        holding a port, a GPU, or a peer's collective. Say so, then end this process."""
        with self.lock:
            self.doc.terminated = Termination(
                signal=ORPHANED, t=time.time(), check=self.beat.check, phase=self.beat.phase
            )
            with contextlib.suppress(OSError):
                self._write_doc()
        os._exit(EXIT_ORPHANED)

    def phase(self, check: str | None, phase: str) -> None:
        with self.lock:
            self.beat.check, self.beat.phase, self.beat.t_phase = check, phase, time.time()
        self._write_beat()
        if self.pulse is not None:
            self.pulse.set_phase(f"{check} ({phase})")

    def record(self, check_id: str, entry: CheckEntry) -> None:
        with self.lock:
            self.doc.checks[check_id] = entry
            self.doc.last_check = check_id
            self._write_doc()

    def set_device(self, device: str) -> None:
        with self.lock:
            if self.doc.device != device:
                self.doc.device = device
                self._write_doc()

    def exchange_failed(self, check_id: str, error: str) -> None:
        with self.lock:
            self.doc.exchange_error = ExchangeError(check_id, error)
            self._write_doc()

    def count_exchange(self, sent: int, received: int) -> None:
        """Bytes of the result exchanges so far, so `-v` and the scale test can show they stay
        flat in N on every rank but 0."""
        with self.lock:
            b = self.doc.exchange_bytes
            b["sent"] = b.get("sent", 0) + sent
            b["received"] = b.get("received", 0) + received
            b["exchanges"] = b.get("exchanges", 0) + 1
            self._write_doc()

    def finish(self) -> None:
        self._stop.set()
        now = time.time()
        with self.lock:
            self.doc.finished, self.doc.finished_at = True, now
            self._write_doc()
            self.beat.finished, self.beat.phase, self.beat.t_phase = True, "finished", now
        self._write_beat()

    def terminated(self, signame: str) -> None:
        """The launcher is tearing us down (another rank failed): say so, keep what we have."""
        self._stop.set()
        with self.lock:
            self.doc.terminated = Termination(
                signal=signame, t=time.time(), check=self.beat.check, phase=self.beat.phase
            )
            self._write_doc()
