"""Cross-node liveness through the rendezvous store. Heartbeat files only reach the launcher on the
same node; with several nodes, every rank also bumps a counter and publishes its phase in the
TCP store that torchrun runs on the master node. After a failure rank 0 samples the counters
twice: a rank whose counter stood still is stuck or cut off, one whose counter moved was alive
and waiting. Counters, not clocks, so skewed node clocks do not matter."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import timedelta
from typing import Any

TICK_S = 0.5
FINISHED = "finished"
SAMPLE_GAP_S = 2.5


class StorePulse:
    """This rank's pulse in the store, on a thread of its own (a store call to an unreachable
    master blocks until its timeout; that must not stall anything else)."""

    def __init__(self, prefix: str, rank: int, timeout: float) -> None:
        import torch.distributed as dist

        self.prefix, self.rank = prefix, rank
        self.store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(seconds=max(2.0, min(timeout, 10.0))),
            wait_for_workers=False,
        )
        self.phase_text = "starting"
        self.store.add(self.key("pulse", rank), 1)  # visible from the first moment
        self.lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="ddpdoctor-pulse", daemon=True).start()

    def key(self, what: str, rank: int) -> str:
        return f"{self.prefix}/{what}/{rank}"

    def set_phase(self, text: str) -> None:
        with self.lock:
            self.phase_text = text

    def _run(self) -> None:
        published = None
        while not self._stop.wait(TICK_S):
            try:
                self.store.add(self.key("pulse", self.rank), 1)
                with self.lock:
                    text = self.phase_text
                if text != published:
                    self.store.set(self.key("phase", self.rank), text)
                    published = text
            except Exception:  # noqa: BLE001 - cut off from the master: nothing to tell it
                continue

    def stop(self, finished: bool = False) -> None:
        """Stop pulsing; a rank that finished says so first (best effort, at most a second), so
        rank 0 does not mistake its silence for a hang."""
        self._stop.set()
        if finished:
            t = threading.Thread(target=self._say_finished, daemon=True)
            t.start()
            t.join(timeout=1.0)

    def _say_finished(self) -> None:
        with contextlib.suppress(Exception):
            self.store.set(self.key("phase", self.rank), FINISHED)

    def sample(self, world_size: int) -> dict[int, dict[str, Any]]:
        """Rank 0, after a failure: who is still pulsing, and what each rank last said it did."""

        def counts() -> dict[int, int | None]:
            out: dict[int, int | None] = {}
            for r in range(world_size):
                try:
                    out[r] = int(self.store.add(self.key("pulse", r), 0))
                except Exception:  # noqa: BLE001
                    out[r] = None
            return out

        first = counts()
        time.sleep(SAMPLE_GAP_S)
        second = counts()
        view = {}
        for r in range(world_size):
            try:
                phase = (
                    self.store.get(self.key("phase", r)).decode()
                    if self.store.check([self.key("phase", r)])
                    else None
                )
            except Exception:  # noqa: BLE001
                phase = None
            a, b = first[r], second[r]
            view[r] = {
                "alive": a is not None and b is not None and b > a,
                "pulses": b,
                "phase": phase,
            }
        return view
