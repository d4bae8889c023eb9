"""All facts of one node, gathered under one deadline. Each part runs in its own daemon thread
with the time that is left: a part that hangs (NVML on a GPU that fell off the bus does) is
named as unfinished and the others still report, so `ddpdoctor node` always ends in time."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ddpdoctor.node import host, nvml, perf, rdma

T = TypeVar("T")
XID_WINDOW_S = 0.5


@dataclass
class GatherOptions:
    timeout_s: float = 30.0
    rdma_root: str = rdma.SYSFS_ROOT
    rdma_interval_s: float = 2.0  # two samples this far apart tell a flapping link
    cpu_root: str = "/sys/devices/system/cpu"
    kmsg: str = "/dev/kmsg"
    shm: str = "/dev/shm"
    run_perf: bool = True
    perf_budget_s: float = 1.0  # per device
    nvml_factory: Callable[[], nvml.NvmlSource] | None = None
    node_name: str | None = None


@dataclass
class NodeFacts:
    node: str
    host: host.HostFacts
    gpus: nvml.GpuInventory
    rdma: list[rdma.RdmaPort] | None = None
    rdma_growth: dict[str, dict[str, int]] = field(default_factory=dict)
    rdma_interval_s: float | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    perf: list[perf.PerfResult] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # probes that crashed (a bug of ours)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def node_name(env: Mapping[str, str], override: str | None = None) -> str:
    """The name Slurm knows this node by (what `srun --exclude` takes), else the short hostname."""
    if override:
        return override
    if env.get("SLURMD_NODENAME"):
        return env["SLURMD_NODENAME"]
    return (socket.gethostname() or "localhost").split(".")[0]


def _torch_version_file() -> dict[str, str | None]:
    """torch's version and CUDA build read from torch/version.py, without importing torch
    (seconds on a loaded node, and nothing else here needs it)."""
    import importlib.util
    import re

    out: dict[str, str | None] = {"torch": None, "torch_cuda": None, "nccl": None}
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return out
    with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as fh:
        text = fh.read()
    for key, name in (("torch", "__version__"), ("torch_cuda", "cuda")):
        m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
        out[key] = m.group(1) if m else None
    return out


def versions(with_nccl: bool) -> dict[str, str | None]:
    """torch, the CUDA it was built with, and (with_nccl: GPUs are present, so torch is worth
    importing) the NCCL it carries."""
    import sys

    if not with_nccl and "torch" not in sys.modules:
        try:
            return _torch_version_file()
        except Exception:  # noqa: BLE001 - an unusual install: ask torch itself below
            pass
    out: dict[str, str | None] = {"torch": None, "torch_cuda": None, "nccl": None}
    try:
        import torch
    except Exception:  # noqa: BLE001
        return out
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    try:
        if torch.cuda.is_available():
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001
        pass
    return out


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.unfinished: list[str] = []
        self.errors: dict[str, str] = {}
        self.seconds: dict[str, float] = {}

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def run(self, name: str, fn: Callable[[], T], default: T) -> T:
        """fn() in a daemon thread, waited for as long as the deadline allows."""
        if self.left() <= 0:
            self.unfinished.append(name)
            return default
        box: list[T] = []

        def work() -> None:
            try:
                box.append(fn())
            except Exception as e:  # noqa: BLE001 - a crashed probe is a result, shown inline
                self.errors[name] = f"{type(e).__name__}: {e}"

        t0 = time.monotonic()
        worker = threading.Thread(target=work, name=f"node-{name}", daemon=True)
        worker.start()
        worker.join(self.left())
        self.seconds[name] = round(time.monotonic() - t0, 3)
        if name in self.errors:
            return default
        if not box:
            self.unfinished.append(name)
            return default
        return box[0]


def gather(opts: GatherOptions, env: Mapping[str, str] | None = None) -> NodeFacts:
    """Every fact, in an order that makes them mean more: the GPU test first, so NVML reads
    the PCIe generation and clocks of busy GPUs; the RDMA counters twice, around the rest."""
    env = os.environ if env is None else env
    dl = _Deadline(opts.timeout_s)
    facts = NodeFacts(
        node=node_name(env, opts.node_name),
        host=dl.run(
            "host", lambda: host.collect(opts.cpu_root, opts.kmsg, opts.shm), host.HostFacts()
        ),
        gpus=nvml.GpuInventory(available=False, error="not read: deadline"),
    )
    first = dl.run("rdma", lambda: rdma.read_ports(opts.rdma_root), None)
    sampled = time.monotonic()
    # torch takes seconds to import on a busy node: only for GPUs that NVML can see
    has_gpus = opts.run_perf and bool(
        dl.run("gpu-count", lambda: nvml.device_count(opts.nvml_factory), None)
    )
    gpu_perf = (
        dl.run("gpu-test", lambda: perf.gpus(4 * opts.perf_budget_s), None) if has_gpus else None
    )
    facts.gpus = dl.run(
        "nvml",
        lambda: nvml.inventory(opts.nvml_factory, xid_window_s=XID_WINDOW_S),
        facts.gpus,
    )
    if opts.run_perf:
        facts.perf = [
            *(gpu_perf or []),
            dl.run(
                "cpu-test",
                lambda: perf.cpu(opts.perf_budget_s),
                perf.PerfResult("cpu", error="not run: deadline"),
            ),
        ]
    facts.versions = dl.run("versions", lambda: versions(bool(facts.gpus.devices)), {})
    if first:
        wait = min(opts.rdma_interval_s - (time.monotonic() - sampled), dl.left() - 0.2)
        if wait > 0:
            time.sleep(wait)
        second = dl.run("rdma-again", lambda: rdma.read_ports(opts.rdma_root), None)
        if second is not None:
            facts.rdma_growth = rdma.deltas(first, second)
            facts.rdma_interval_s = round(time.monotonic() - sampled, 2)
            first = second
    facts.rdma = first
    facts.unfinished, facts.errors, facts.seconds = dl.unfinished, dl.errors, dl.seconds
    return facts
