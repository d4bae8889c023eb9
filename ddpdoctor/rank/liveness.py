"""Cross-node liveness through the rendezvous store, per node rather than per rank. Heartbeat files
only reach the launcher on the same node; with several nodes, each node's first rank (its leader)
reads its node's heartbeat files and publishes, twice a second, one counter for the node and, when
it changed, one small document with each local rank's phase and whether its alive tick is fresh.
The other ranks never touch the store. After a failure rank 0 samples the node counters twice: a
node whose counter stood still is stuck or cut off (all its ranks), one whose counter moved was
alive, and its document says which of its ranks are. Counters, not clocks, across nodes; the
freshness of a heartbeat is judged on its own node, so skewed node clocks do not matter.

At 16,384 ranks on 2,048 nodes that is about 4,100 store operations per second on the master
(one add per node per tick, plus a set when a phase changes), not 33,000."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from ddpdoctor.runfiles import Heartbeat, RunFolder, read_json

TICK_S = 0.5
FINISHED = "finished"
SAMPLE_GAP_S = 2.5
STALE_S = 2.0  # a local heartbeat whose alive tick is older than this: that process is stopped
FINISH_WAIT_S = 1.0  # the leader waits this long for its node's ranks to say finished


class StorePulse:
    """A node's pulse in the store, published by the node's leader on a thread of its own (a store
    call to an unreachable master blocks until its timeout; that must not stall anything else).
    The node's ranks are `first .. first + count - 1` (torchrun gives each node a block)."""

    def __init__(
        self,
        prefix: str,
        rank: int,
        timeout: float,
        first: int | None = None,
        count: int = 1,
        run_dir: Path | None = None,
    ) -> None:
        import torch.distributed as dist

        self.prefix, self.rank = prefix, rank
        self.first = rank if first is None else first
        self.count = count
        self.folder = RunFolder(run_dir) if run_dir is not None else None
        self.store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(seconds=max(2.0, min(timeout, 10.0))),
            wait_for_workers=False,
        )
        self.phase_text = "starting"
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.store.add(self.key("pulse", self.first), 1)  # visible from the first moment
        self._published: str | None = None
        self._publish()
        threading.Thread(target=self._run, name="ddpdoctor-pulse", daemon=True).start()

    def key(self, what: str, node: int) -> str:
        return f"{self.prefix}/{what}/{node}"

    def set_phase(self, text: str) -> None:
        with self.lock:
            self.phase_text = text

    def node_view(self, finished: bool = False) -> dict[str, list[Any]]:
        """{rank: [phase, alive, finished]} for this node's ranks, from their heartbeat files (the
        leader's own from memory)."""
        now = time.time()
        view: dict[str, list[Any]] = {}
        for r in range(self.first, self.first + self.count):
            if r == self.rank:
                with self.lock:
                    view[str(r)] = [FINISHED if finished else self.phase_text, True, finished]
                continue
            b = self._beat(r)
            if b is None:
                continue
            done = b.finished
            phase = FINISHED if done else f"{b.check} ({b.phase})"
            view[str(r)] = [phase, done or now - b.t_alive < STALE_S, done]
        return view

    def _beat(self, rank: int) -> Heartbeat | None:
        """One local rank's heartbeat file, read by name (a run folder shared by every node over
        NFS holds thousands: never list it)."""
        raw = read_json(self.folder.beat_file(rank)) if self.folder is not None else None
        try:
            b = Heartbeat.from_json(raw) if isinstance(raw, dict) else None
        except (TypeError, ValueError):
            return None
        return b if b is not None and b.rank == rank else None

    def _publish(self, finished: bool = False) -> None:
        text = json.dumps(self.node_view(finished), sort_keys=True)
        if text != self._published:
            self.store.set(self.key("node", self.first), text)
            self._published = text

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.store.add(self.key("pulse", self.first), 1)
                self._publish()
            except Exception:  # noqa: BLE001 - cut off from the master: nothing to tell it
                continue

    def stop(self, finished: bool = False) -> None:
        """Stop pulsing; a leader that finished says so for its node first (best effort, within
        FINISH_WAIT_S + 1 s), so rank 0 does not mistake the silence for a hang."""
        self._stop.set()
        if finished:
            t = threading.Thread(target=self._say_finished, daemon=True)
            t.start()
            t.join(timeout=FINISH_WAIT_S + 1.0)

    def _say_finished(self) -> None:
        deadline = time.monotonic() + FINISH_WAIT_S
        while time.monotonic() < deadline:
            view = self.node_view(finished=True)
            if len(view) == self.count and all(v[2] for v in view.values()):
                break
            time.sleep(0.1)
        with contextlib.suppress(Exception):
            self._publish(finished=True)

    def sample(self, world_size: int, per_node: int) -> dict[int, dict[str, Any]]:
        """Rank 0, after a failure: which nodes still pulse, and what each rank last did. Nodes are
        blocks of `per_node` ranks; a rank its node's document does not list has no phase."""
        nodes = list(range(0, world_size, max(1, per_node)))

        def counts() -> dict[int, int | None]:
            out: dict[int, int | None] = {}
            for n in nodes:
                try:
                    out[n] = int(self.store.add(self.key("pulse", n), 0))
                except Exception:  # noqa: BLE001
                    out[n] = None
            return out

        first = counts()
        time.sleep(SAMPLE_GAP_S)
        second = counts()
        view: dict[int, dict[str, Any]] = {}
        for n in nodes:
            try:
                key = self.key("node", n)
                doc = json.loads(self.store.get(key)) if self.store.check([key]) else {}
            except Exception:  # noqa: BLE001
                doc = {}
            a, b = first[n], second[n]
            moving = a is not None and b is not None and b > a
            for r in range(n, min(n + per_node, world_size)):
                phase, alive, _done = (doc.get(str(r)) or [None, False, False])[:3]
                view[r] = {"alive": moving and bool(alive), "pulses": b, "phase": phase}
        return view
