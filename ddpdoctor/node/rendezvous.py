"""Which nodes never joined a rendezvous: the expected host list against the hosts that did
arrive, as torchrun's c10d rendezvous records them.

Two sources, both real torch behaviour: the rendezvous state in the store (key
`torch.rendezvous.<run_id>`, a base64 pickle of torch's `_RendezvousState`, whose
`participants` are the nodes in the round being formed and `wait_list` those waiting for the
next), and the dynamic rendezvous' log lines ("The node 'HOST_PID_LOCALID' attempts to join the
next round of the rendezvous 'ID'." / "... has joined round N of the rendezvous 'ID' as rank R
in a world of size W."), which torch only logs at INFO. Node descriptors are
`<fqdn>_<pid>_<local id>`; hosts are compared by their short name, as Slurm lists them.

This is the pure part, for the launcher to call when `check` or `bench-allreduce` times out in
the rendezvous; only `read_store` touches the network (and imports torch).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.node import codes
from ddpdoctor.node.hostlist import compress_hostlist
from ddpdoctor.report.model import Finding

STORE_KEY = "torch.rendezvous.{run_id}"


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """torch's C++ store client logs a failed connect with a page of C++ frames straight to
    file descriptor 2; while we only ask whether the store answers, that goes to /dev/null."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_LINE = re.compile(
    r"The node '(?P<node>[^']+)' (?:(?P<attempt>attempts to join the next round)|has joined round \d+)"
    r" of the rendezvous '(?P<run>[^']*)'"
)


@dataclass
class Arrivals:
    """Short host names seen in a rendezvous: in the round being formed, or only waiting."""

    joined: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)


def short_host(node_desc: str) -> str:
    """'gpu001.cluster.local_4242_0' -> 'gpu001'; a bare host name stays as it is."""
    parts = node_desc.rsplit("_", 2)
    host = parts[0] if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() else node_desc
    return host.split(".")[0]


def from_log(lines: Iterable[str], run_id: str | None = None) -> Arrivals:
    """Arrivals from torchrun's INFO log lines (all nodes' output merged, as srun does)."""
    seen = Arrivals()
    for line in lines:
        m = _LINE.search(line)
        if m is None or (run_id is not None and m.group("run") != run_id):
            continue
        host = short_host(m.group("node"))
        (seen.waiting if m.group("attempt") else seen.joined).add(host)
    seen.waiting -= seen.joined
    return seen


def from_state(state: Any) -> Arrivals:
    """Arrivals from torch's `_RendezvousState` (duck-typed: `participants`, `wait_list`)."""
    joined = {short_host(repr(n)) for n in getattr(state, "participants", {}) or {}}
    waiting = {short_host(repr(n)) for n in getattr(state, "wait_list", set()) or set()}
    return Arrivals(joined, waiting - joined)


def read_store(endpoint: str, run_id: str, timeout_s: float = 5.0) -> Arrivals | None:
    """The state a c10d rendezvous keeps in its store, read as a client; None when the store
    does not answer within the deadline or holds no state yet. The state is a pickle written by
    the nodes of this job: only point this at your own job's endpoint."""
    import pickle
    from base64 import b64decode
    from datetime import timedelta

    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    try:
        with quiet_stderr():
            store = TCPStore(
                host or endpoint,
                int(port),
                is_master=False,
                timeout=timedelta(seconds=timeout_s),
                wait_for_workers=False,
            )
            raw = store.get(STORE_KEY.format(run_id=run_id))
        return from_state(pickle.loads(b64decode(raw)))  # noqa: S301 - our own job's store
    except Exception:  # noqa: BLE001 - no store, no key, a foreign format: unknown
        return None


ROLE_INFO_KEY = "{run_id}/torchelastic/role_info/{node_rank}"


def read_static_store(
    host: str, port: int, run_id: str, nnodes: int, timeout_s: float = 5.0
) -> set[int] | None:
    """The node ranks that reached a static rendezvous: torchrun's store on node 0 holds a
    `role_info` key per node that connected (node 0 itself waits in the store for the others,
    so it is there whenever the store answers). None when the store does not answer."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    try:
        with quiet_stderr():
            store = TCPStore(
                host,
                port,
                is_master=False,
                timeout=timedelta(seconds=timeout_s),
                wait_for_workers=False,
            )
            keys = {k: ROLE_INFO_KEY.format(run_id=run_id, node_rank=k) for k in range(1, nnodes)}
            return {0} | {k for k, key in keys.items() if store.check([key])}
    except Exception:  # noqa: BLE001 - no store, a refused or cut connection: unknown
        return None


def never_joined(expected: Iterable[str], arrivals: Arrivals) -> list[str]:
    """The expected hosts (short names) that neither joined nor waited."""
    arrived = arrivals.joined | arrivals.waiting
    return sorted(h for h in {e.split(".")[0] for e in expected} if h not in arrived)


def findings(expected: Iterable[str], arrivals: Arrivals) -> list[Finding]:
    """DDN191 for the hosts that never arrived (one finding, a host list)."""
    absent = never_joined(expected, arrivals)
    if not absent:
        return []
    joined = compress_hostlist(arrivals.joined) or "none"
    return [
        codes.NEVER_JOINED.finding(
            f"{compress_hostlist(absent)} never joined the rendezvous (joined: {joined})",
            hosts=absent,
            joined=sorted(arrivals.joined),
        )
    ]
