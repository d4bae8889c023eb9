"""RDMA ports as the kernel shows them in sysfs (`/sys/class/infiniband/<dev>/ports/<n>/`), read
with a root argument so tests point at a fake tree. A port is read twice, some seconds apart:
a `link_downed` counter that grows between the samples is a link flapping right now, where a
non-zero total may be years old."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

SYSFS_ROOT = "/sys/class/infiniband"
# Counters that should stay at zero on a healthy link (the IB spec's port counters).
ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)


@dataclass
class RdmaPort:
    """One port; None = the file is absent or unreadable."""

    device: str
    port: int
    state: str | None = None
    phys_state: str | None = None
    rate: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _word(value: str | None) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    return None if value is None else value.split(":", 1)[-1].strip() or None


def _gbps(rate: str | None) -> float | None:
    """'200 Gb/sec (4X HDR)' -> 200.0."""
    m = re.match(r"\s*([\d.]+)\s*Gb/sec", rate or "")
    return float(m.group(1)) if m else None


def read_ports(root: str = SYSFS_ROOT) -> list[RdmaPort] | None:
    """Every RDMA port; [] with no RDMA device, None when sysfs cannot be read at all."""
    if not os.path.isdir(root):
        return []
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return None
    ports = []
    for dev in devices:
        base = os.path.join(root, dev, "ports")
        try:
            numbers = sorted(int(p) for p in os.listdir(base) if p.isdigit())
        except OSError:
            continue
        for n in numbers:
            d = os.path.join(base, str(n))
            rate = _read(os.path.join(d, "rate"))
            counters = {}
            for name in ERROR_COUNTERS:
                value = _read(os.path.join(d, "counters", name))
                if value is not None and value.isdigit():
                    counters[name] = int(value)
            ports.append(
                RdmaPort(
                    device=dev,
                    port=n,
                    state=_word(_read(os.path.join(d, "state"))),
                    phys_state=_word(_read(os.path.join(d, "phys_state"))),
                    rate=rate,
                    rate_gbps=_gbps(rate),
                    link_layer=_read(os.path.join(d, "link_layer")),
                    counters=counters,
                )
            )
    return ports


def deltas(first: list[RdmaPort], second: list[RdmaPort]) -> dict[str, dict[str, int]]:
    """How much each port's error counters grew between two samples (only those that grew)."""
    before = {p.name: p.counters for p in first}
    out: dict[str, dict[str, int]] = {}
    for p in second:
        old = before.get(p.name, {})
        grew = {k: v - old[k] for k, v in p.counters.items() if k in old and v > old[k]}
        if grew:
            out[p.name] = grew
    return out
