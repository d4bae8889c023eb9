"""Host settings that make a healthy GPU node fail in distributed jobs: a small `/dev/shm`, a
locked-memory limit (RDMA must pin buffers), a CPU governor that is not `performance`, an
NVSwitch system without its fabric manager, and Xid lines in the kernel log. Paths are
arguments so tests point at fake trees; every probe answers None when it cannot read."""

from __future__ import annotations

import glob
import os
import re
import resource
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, (.*))?")
KMSG_MAX_RECORDS = 50_000


@dataclass
class XidLine:
    """One `NVRM: Xid (PCI:0000:3b:00): 79, ...` kernel message."""

    pci: str
    xid: int
    text: str


@dataclass
class HostFacts:
    hostname: str | None = None
    cpu_count: int | None = None
    shm_total_bytes: int | None = None
    memlock_soft_bytes: int | None = None  # None = unknown; -1 = unlimited
    memlock_hard_bytes: int | None = None
    governors: dict[str, int] = field(default_factory=dict)  # governor -> number of CPUs
    nvswitch_count: int | None = None
    fabric_manager_running: bool | None = None
    kernel_xids: list[XidLine] | None = None


def shm_bytes(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def memlock() -> tuple[int | None, int | None]:
    """`ulimit -l` (soft, hard) in bytes; -1 means unlimited."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError):
        return None, None

    def norm(v: int) -> int:
        return -1 if v == resource.RLIM_INFINITY else int(v)

    return norm(soft), norm(hard)


def governors(cpu_root: str = "/sys/devices/system/cpu") -> dict[str, int]:
    """How many CPUs run each frequency governor; {} where cpufreq is not exposed (VMs,
    containers)."""
    seen: Counter[str] = Counter()
    for path in glob.glob(os.path.join(cpu_root, "cpu[0-9]*", "cpufreq", "scaling_governor")):
        try:
            with open(path) as fh:
                seen[fh.read().strip()] += 1
        except OSError:
            continue
    return dict(seen)


def nvswitch_count(proc_root: str = "/proc/driver/nvidia-nvswitch/devices") -> int | None:
    """NVSwitches the driver knows; 0 without any; None where it cannot tell."""
    if not os.path.isdir(proc_root):
        nodes = glob.glob("/dev/nvidia-nvswitch[0-9]*")
        return len(nodes)
    try:
        return len(os.listdir(proc_root))
    except OSError:
        return None


def fabric_manager_running() -> bool | None:
    """Whether an `nv-fabricmanager` process runs on this host (NVSwitch systems need it)."""
    try:
        import psutil

        return any(p.info["name"] == "nv-fabricmanager" for p in psutil.process_iter(["name"]))
    except Exception:  # noqa: BLE001 - no psutil or no /proc: unknown
        return None


def parse_xid_lines(lines: list[str]) -> list[XidLine]:
    out = []
    for line in lines:
        m = XID_LINE.search(line)
        if m:
            out.append(XidLine(m.group(1).lower(), int(m.group(2)), (m.group(3) or "").strip()))
    return out


def kernel_xids(path: str = "/dev/kmsg") -> list[XidLine] | None:
    """Xid lines in the kernel ring buffer, read without blocking; None when it cannot be read
    (not root, or a container without /dev/kmsg)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines: list[str] = []
    try:
        with os.fdopen(fd, "rb", buffering=0) as fh:
            for _ in range(KMSG_MAX_RECORDS):
                try:
                    chunk = fh.read(8192)  # /dev/kmsg: one record per read; a file: a block
                except BlockingIOError:
                    break  # the end of the ring buffer
                except OSError:
                    continue  # EPIPE: records overwritten while we read
                if not chunk:
                    break
                lines.extend(chunk.decode(errors="replace").splitlines())
    except OSError:
        return None
    return parse_xid_lines(lines)


def collect(
    cpu_root: str = "/sys/devices/system/cpu",
    kmsg: str = "/dev/kmsg",
    shm: str = "/dev/shm",
) -> HostFacts:
    import socket

    def guard(fn: Any) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - collectors never raise
            return None

    soft, hard = memlock()
    switches = guard(nvswitch_count)
    return HostFacts(
        hostname=guard(socket.gethostname),
        cpu_count=os.cpu_count(),
        shm_total_bytes=shm_bytes(shm),
        memlock_soft_bytes=soft,
        memlock_hard_bytes=hard,
        governors=guard(lambda: governors(cpu_root)) or {},
        nvswitch_count=switches,
        fabric_manager_running=guard(fabric_manager_running) if switches else None,
        kernel_xids=guard(lambda: kernel_xids(kmsg)),
    )
