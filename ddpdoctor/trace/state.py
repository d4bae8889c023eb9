"""The tracer's state on one rank: the record being built, the lock around it, the side thread
that writes it, and the step counter that stops the run. The hooks (hooks_*.py) only call the
methods here; nothing in this module imports torch at module level."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpdoctor.trace import record as rec
from ddpdoctor.trace.digest import seq_digest
from ddpdoctor.trace.record import Collective, Event, TraceRecord, Write
from ddpdoctor.trace.sites import Site, caller_site

FLUSH_EVERY_S = 1.0
STOP_BARRIER_S = 30.0


class StopRun(BaseException):
    """Raised from the optimizer-step hook when the run reached --steps or --max-time. A
    BaseException, so the user's `except Exception:` does not swallow it; their `finally:` runs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Config:
    run_dir: Path
    steps: int = 50  # 0: run to the end
    max_time: float | None = None
    fingerprint_every: int = 10


def identity() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from the launcher's variables; 0, 0, 1 without one."""

    def num(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    return num("RANK", 0), num("LOCAL_RANK", 0), num("WORLD_SIZE", 1)


class Tracer:
    """One per process (`Tracer.current`). Thread-safe: hooks run on the main thread and the
    DataLoader's, the flusher on its own."""

    current: Tracer | None = None

    def __init__(self, config: Config, script: str, argv: list[str]) -> None:
        rank, local_rank, world_size = identity()
        self.config = config
        self.lock = threading.RLock()
        self.record = TraceRecord(
            rank=rank,
            world_size=world_size,
            local_rank=local_rank,
            host=socket.gethostname(),
            pid=os.getpid(),
            script=script,
            argv=list(argv),
            started=time.time(),
            steps_limit=config.steps,
            fingerprint_every=config.fingerprint_every,
        )
        self.dirty = True
        self._written: Path | None = None
        self._closed = False
        self._forked = False
        os.register_at_fork(after_in_child=self._after_fork)
        self.t0 = time.monotonic()
        self._opt_steps: dict[int, int] = {}
        self._events: dict[tuple[str, Site | None], Event] = {}
        self._coll_digest = seq_digest([])
        self.last_collective = ""
        self.last_collective_step = -1
        self.stopping: str | None = None
        self.stop_at: int | None = None  # agreed by --max-time
        # timing: the step clock, the DataLoader clock, and when the batch arrived
        self.t_step = time.perf_counter()
        self.t_mark = self.t_step
        self.data_wait = 0.0
        self.forward = None  # type: float | None
        self._stopper: Any = None
        self.ddp_modules: list[Any] = []
        self.hook_handles: list[Any] = []
        self.open_passes: weakref.WeakSet[Any] = weakref.WeakSet()
        self._flusher = threading.Thread(
            target=self._flush_loop, name="ddpdoctor-trace", daemon=True
        )
        Tracer.current = self

    # -- writing ---------------------------------------------------------------------------------
    def start(self) -> None:
        self.write()
        self._flusher.start()

    def _after_fork(self) -> None:
        """A DataLoader worker forked from this rank: it must never write the rank's record,
        and the lock may have been held by the side thread, which did not survive the fork."""
        self.lock = threading.RLock()
        self._forked = True
        self._closed = True

    def write(self) -> None:
        if self._forked:
            return
        with self.lock:
            self.record.updated = time.time()
            self.dirty = False
            # a full disk must not break the user's run; the next write retries
            with contextlib.suppress(OSError):
                path = self.record.path(self.config.run_dir)
                if self._written is not None and self._written != path:
                    self._written.unlink(missing_ok=True)  # the rank was renamed (mp.spawn)
                self.record.write(self.config.run_dir)
                self._written = path

    def close(self) -> None:
        """Stop the side thread (tests and benchmarks install several tracers in one process)."""
        self._closed = True

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(FLUSH_EVERY_S)
            if self.dirty:
                try:
                    self.write()
                except Exception:  # noqa: BLE001 - the side thread must outlive any one write
                    self.dirty = True

    # -- events ----------------------------------------------------------------------------------
    def event(self, kind: str, where: Site | None = None, **data: Any) -> Event:
        """Record an event once per (kind, place); later ones only count."""
        with self.lock:
            key = (kind, where)
            known = self._events.get(key)
            if known is not None:
                known.count += 1
                self.dirty = True
                return known
            ev = Event(
                kind, where, self.record.steps, round(time.monotonic() - self.t0, 4), 1, data
            )
            if len(self.record.events) < rec.MAX_EVENTS:
                self.record.events.append(ev)
                self._events[key] = ev
            self.dirty = True
            return ev

    def collective(self, c: Collective) -> None:
        with self.lock:
            r = self.record
            r.collective_count += 1
            self._coll_digest = seq_digest([self._coll_digest, c.key()])
            r.collective_digest = self._coll_digest
            if len(r.collectives) < rec.MAX_COLLECTIVES:
                r.collectives.append(c)
            self.last_collective = c.op
            self.last_collective_step = r.steps
            self.dirty = True

    def write_path(self, path: str, api: str, where: Site | None) -> None:
        with self.lock:
            for w in self.record.writes:
                if w.path == path and w.api == api and w.where == where:
                    w.count += 1
                    return
            if len(self.record.writes) < rec.MAX_WRITES:
                self.record.writes.append(Write(path, api, where))
                self.dirty = True

    # -- steps -----------------------------------------------------------------------------------
    def data_waited(self, seconds: float) -> None:
        self.data_wait += seconds
        self.t_mark = time.perf_counter()

    def backward_started(self) -> None:
        if self.forward is None:
            self.forward = time.perf_counter() - self.t_mark

    def optimizer_stepped(self, optimizer: Any) -> bool:
        """Count a step; True when it is a new step of the run (the first optimizer to step)."""
        key = id(optimizer)
        n = self._opt_steps.get(key, 0) + 1
        self._opt_steps[key] = n
        r = self.record
        if n <= r.steps:
            return False
        now = time.perf_counter()
        with self.lock:
            r.steps = n
            if len(r.step_s) < rec.MAX_STEPS_KEPT:
                r.step_s.append(round(now - self.t_step, 6))
                r.data_s.append(round(self.data_wait, 6))
                r.forward_s.append(round(self.forward or 0.0, 6))
            self.dirty = True
        self.t_step = self.t_mark = now
        self.data_wait = 0.0
        self.forward = None
        return True

    def fingerprint_due(self) -> bool:
        k = self.config.fingerprint_every
        return k > 0 and (self.record.steps == 1 or self.record.steps % k == 0)

    def check_stop(self) -> None:
        """Raise StopRun when every rank should stop after this step (same step everywhere)."""
        steps = self.record.steps
        if self.config.steps and steps >= self.config.steps:
            self.stop("steps")
        if self.config.max_time is not None:
            if self._stopper is None:
                from ddpdoctor.trace.stopping import MaxTime

                self._stopper = MaxTime(self.config.max_time, self.t0)
            if self._stopper.should_stop(steps):
                self.stop("max-time")

    def flush_passes(self) -> None:
        for it in list(self.open_passes):
            it.flush()

    def stop(self, reason: str) -> None:
        self.stopping = reason
        with self.lock:
            self.record.exit = rec.Exit(kind=reason, code=0)
        self.write()
        raise StopRun(reason)


def site() -> Site | None:
    """The user's file:line of the call being hooked (skips the hook's own frames)."""
    return caller_site(2)


def active() -> Tracer | None:
    return Tracer.current


def log(msg: str) -> None:
    print(f"ddpdoctor.trace: {msg}", file=sys.stderr, flush=True)
