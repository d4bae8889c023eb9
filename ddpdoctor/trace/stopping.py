"""Stopping without causing a hang. --steps is the same number on every rank, so every rank
stops after the same optimizer step with no collective pending. --max-time is a clock, and clocks
differ: the first rank past the limit proposes a step a little ahead through the launcher's store
(no collective on the user's group), and every rank stops there. Before leaving, the ranks meet
once more (a gloo monitored_barrier, or the store elsewhere) and only then destroy the group: on
torch 2.13 CPU, destroy_process_group() with a peer still busy in gloo can abort the process with
"terminate called without an active exception"."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

POLL_EVERY = 5  # steps between looks at the store
_PREFIX = "ddpdoctor/trace/"


def _store(timeout_s: float = 10.0) -> Any | None:
    """A client of the launcher's store (torchrun's agent store at MASTER_ADDR:MASTER_PORT)."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    try:
        import torch.distributed as dist

        return dist.TCPStore(
            addr, int(port), is_master=False, timeout=timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - no store: fall back to the local clock
        return None


def _key(name: str) -> str:
    return _PREFIX + os.environ.get("TORCHELASTIC_RUN_ID", "run") + "/" + name


class MaxTime:
    """Agree on the step to stop at once any rank's clock passes the limit."""

    def __init__(self, limit_s: float, t0: float) -> None:
        self.deadline = t0 + limit_s
        self.stop_at: int | None = None
        self.store = _store()

    def should_stop(self, step: int) -> bool:
        if self.stop_at is not None:
            return step >= self.stop_at
        if self.store is None:  # alone (or no launcher store): the local clock decides
            return time.monotonic() >= self.deadline
        if time.monotonic() >= self.deadline and self.store.add(_key("stop-votes"), 1) == 1:
            # ranks in lockstep are at most a step apart: two polls ahead is safe for all
            self.store.set(_key("stop-at"), str(step + 2 * POLL_EVERY + 2))
        if step % POLL_EVERY == 0 and self.store.check([_key("stop-at")]):
            self.stop_at = int(self.store.get(_key("stop-at")))
        return self.stop_at is not None and step >= self.stop_at


def leave_group(backend: str | None, world_size: int, timeout_s: float) -> str | None:
    """Meet every rank, then destroy the group. Returns a problem text, or None when clean."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    problem = None
    try:
        if backend == "gloo" and world_size > 1:
            barrier = getattr(
                dist.monitored_barrier, "__ddpdoctor_original__", dist.monitored_barrier
            )
            barrier(timeout=timedelta(seconds=timeout_s))  # the tracer's own: not in the sequence
        elif world_size > 1:
            problem = _store_barrier(world_size, timeout_s)
    except Exception as exc:  # noqa: BLE001 - a peer gone: say so, still leave
        problem = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    try:
        getattr(dist.destroy_process_group, "__ddpdoctor_original__", dist.destroy_process_group)()
    except Exception as exc:  # noqa: BLE001
        problem = problem or f"destroy_process_group: {exc}"
    return problem


def _store_barrier(world_size: int, timeout_s: float) -> str | None:
    store = _store(timeout_s)
    if store is None:
        return "no launcher store to meet the other ranks"
    store.add(_key("left"), 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.add(_key("left"), 0) >= world_size:
            return None
        time.sleep(0.02)
    return f"not every rank reached the stop within {timeout_s:.0f} s"
