"""What a check sees on its rank: identity, backend, device, deadlines and the way to wait for a
collective without ever waiting forever."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the rank side imports torch only once a check runs
    import torch
    from torch.distributed import ProcessGroup, Work


class CollectiveTimeout(Exception):
    """A collective did not finish before its deadline."""


def is_timeout_error(exc: BaseException) -> bool:
    """gloo/NCCL report deadlines with several wordings across versions."""
    if isinstance(exc, (CollectiveTimeout, TimeoutError)):
        return True
    text = str(exc).lower()
    return any(w in text for w in ("timed out", "timeout", "time out", "deadline"))


def faults_from_env() -> dict[str, set[int]]:
    """Self-test fault injection: DDPDOCTOR_FAULT="allreduce-bias@1;sampler-rank@0,1".

    Each fault makes the named ranks do something really wrong (add a bias to an all_reduce
    result, shard with the wrong rank, step without gradient sync); the checks must catch it.
    """
    out: dict[str, set[int]] = {}
    spec = os.environ.get("DDPDOCTOR_FAULT", "")
    for item in filter(None, (s.strip() for s in spec.split(";"))):
        name, _, ranks = item.partition("@")
        out[name.strip()] = {int(r) for r in ranks.split(",") if r.strip().lstrip("-").isdigit()}
    return out


@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    backend: str = "gloo"
    timeout: float = 30.0
    options: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, set[int]] = field(default_factory=dict)
    device: torch.device | None = None  # set by the check that creates the group
    group: ProcessGroup | None = None  # the default (data) group
    control: ProcessGroup | None = None  # a separate gloo group for results and skip decisions
    phase: Callable[[str], None] = lambda _p: None

    def fault(self, name: str) -> bool:
        return self.rank in self.faults.get(name, set())

    def wait(self, work: Work, what: str) -> None:
        """Wait for an async collective with our own deadline (NCCL's watchdog would otherwise
        tear the process down); gloo enforces the group timeout itself."""
        if self.backend != "nccl":
            work.wait()
            return
        deadline = time.monotonic() + self.timeout
        while not work.is_completed():
            if time.monotonic() > deadline:
                raise CollectiveTimeout(f"{what} did not complete within {self.timeout:g} s")
            time.sleep(0.001)
        work.wait()
