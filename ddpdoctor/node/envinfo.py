"""One node's snapshot for a ticket or a report: what runs here, and what NCCL/gloo will use.

Collectors never raise (torch's collect_env habit): every probe is guarded and answers None
("unknown") when it cannot read something. The snapshot is redacted before it is returned, so
no caller can print a secret by accident. It is cheap enough for every rank of `ddpdoctor check`
(no subprocesses; torch is only imported when asked or already loaded; NVML when present).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ddpdoctor.node.redact import redact_env, redact_text

SHM_WARN_BYTES = 1 << 30
RELEVANT_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "TORCHELASTIC_",
    "GLOO_",
    "CUDA_",
    "CUDNN_",
    "OMP_",
    "MKL_",
    "MASTER_",
    "SLURM_",
    "PMI_",
    "PMIX_",
    "OMPI_",
    "MPI_",
    "KUBERNETES_",
    "NVIDIA_",
    "PYTORCH_",
    "LD_",
    "FI_",
    "UCX_",
)
RELEVANT_NAMES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "NODE_RANK",
    "CUDA_VISIBLE_DEVICES",
    "HOSTNAME",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_DEFAULT_ENV",
)

T = TypeVar("T")


def _guard(fn: Callable[[], T], default: Any = None) -> T | Any:
    """Run one probe; any failure means 'unknown'."""
    try:
        return fn()
    except Exception:
        return default


# --- variables and launcher -------------------------------------------------------------------


def variables(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The distributed-relevant variables, redacted."""
    env = os.environ if env is None else env
    picked = {
        k: v for k, v in env.items() if k.startswith(RELEVANT_PREFIXES) or k in RELEVANT_NAMES
    }
    return dict(sorted(redact_env(picked).items()))


def launcher(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Which launcher started this process and which scheduler runs it."""
    env = os.environ if env is None else env
    if "TORCHELASTIC_RUN_ID" in env or "TORCHELASTIC_RESTART_COUNT" in env:
        name = "torchrun"
    elif "OMPI_COMM_WORLD_RANK" in env:
        name = "mpirun (Open MPI)"
    elif "PMI_RANK" in env or "PMIX_RANK" in env:
        name = "mpirun (PMI)"
    elif "SLURM_PROCID" in env and "RANK" not in env:
        name = "srun"
    elif "RANK" in env and "WORLD_SIZE" in env:
        name = "environment (RANK/WORLD_SIZE set by hand or another launcher)"
    else:
        name = "none (plain python)"
    if "SLURM_JOB_ID" in env:
        scheduler = "slurm"
    elif "KUBERNETES_SERVICE_HOST" in env:
        scheduler = "kubernetes"
    elif "PBS_JOBID" in env:
        scheduler = "pbs"
    elif "LSB_JOBID" in env:
        scheduler = "lsf"
    else:
        scheduler = None
    keys = (
        "SLURM_JOB_ID",
        "SLURM_NNODES",
        "SLURM_NTASKS",
        "SLURM_JOB_NODELIST",
        "TORCHELASTIC_RUN_ID",
    )
    return {
        "launcher": name,
        "scheduler": scheduler,
        "rank": env.get("RANK"),
        "local_rank": env.get("LOCAL_RANK"),
        "world_size": env.get("WORLD_SIZE"),
        "details": redact_env({k: env[k] for k in keys if k in env}),
    }


# --- network ----------------------------------------------------------------------------------


def ifname_matches(name: str, spec: str, exact: bool = False) -> bool:
    """Whether interface `name` is picked by a *_SOCKET_IFNAME list (without its '^'). NCCL reads
    each entry as a prefix unless the list starts with '='; gloo takes exact names."""
    exact = exact or spec.startswith("=")
    items = [i for i in spec.lstrip("=").split(",") if i]
    return any(name == i if exact else name.startswith(i) for i in items)


def nccl_interface_choice(names: list[str], spec: str | None) -> tuple[list[str], str]:
    """Which of `names` (up interfaces with an address) NCCL would use, and why.

    As NCCL documents it: NCCL_SOCKET_IFNAME is a comma-separated list of prefixes; '^' excludes
    them, '=' asks for exact names. Without it NCCL prefers ib*, then anything except docker*
    and lo*, then docker*, then lo.
    """
    if spec:
        if spec.startswith("^"):
            chosen = [n for n in names if not ifname_matches(n, spec[1:])]
        else:
            chosen = [n for n in names if ifname_matches(n, spec)]
        return chosen, f"NCCL_SOCKET_IFNAME={spec}"
    for rule, pick in (
        ("prefers ib* (InfiniBand IPoIB)", lambda n: n.startswith("ib")),
        ("any interface except docker* and lo*", lambda n: not n.startswith(("docker", "lo"))),
        ("only docker* left", lambda n: n.startswith("docker")),
        ("only lo left (single node only)", lambda n: n.startswith("lo")),
    ):
        chosen = [n for n in names if pick(n)]
        if chosen:
            return chosen, f"default: {rule}"
    return [], "default: no usable interface"


def _resolve_hostname(timeout: float) -> str | None:
    """The IPv4 address the hostname resolves to (what gloo binds to), with a deadline."""
    import threading

    out: list[str] = []

    def work() -> None:
        out.append(socket.gethostbyname(socket.gethostname()))

    t = threading.Thread(target=lambda: _guard(work), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else None


def interfaces(env: Mapping[str, str] | None = None, resolve_hostname: bool = False) -> dict:
    """Network interfaces (up, MTU, speed, addresses) and what NCCL and gloo would pick."""
    import psutil

    env = os.environ if env is None else env
    addrs = _guard(psutil.net_if_addrs, {})
    stats = _guard(psutil.net_if_stats, {})
    rows = []
    for name in sorted(set(addrs) | set(stats)):
        st = stats.get(name)
        fam = {a.family: [] for a in addrs.get(name, [])}
        for a in addrs.get(name, []):
            fam[a.family].append(a.address)
        rows.append(
            {
                "name": name,
                "up": getattr(st, "isup", None),
                "mtu": getattr(st, "mtu", None) or None,
                "speed_mbps": getattr(st, "speed", None) or None,
                "ipv4": fam.get(socket.AF_INET, []),
                "ipv6": [a.split("%")[0] for a in fam.get(socket.AF_INET6, [])],
            }
        )
    usable = [r["name"] for r in rows if r["up"] and (r["ipv4"] or r["ipv6"])]
    nccl, nccl_why = nccl_interface_choice(usable, env.get("NCCL_SOCKET_IFNAME"))
    gloo_spec = env.get("GLOO_SOCKET_IFNAME")
    if gloo_spec:
        wanted = [n for n in gloo_spec.split(",") if n]
        gloo = [n for n in wanted if n in usable]
        gloo_why = f"GLOO_SOCKET_IFNAME={gloo_spec}"
        if len(gloo) < len(wanted):
            gloo_why += " (missing here: " + ", ".join(n for n in wanted if n not in usable) + ")"
    else:
        ip = _resolve_hostname(0.5) if resolve_hostname else None
        gloo = [r["name"] for r in rows if ip and ip in r["ipv4"]]
        if ip is None:
            gloo_why = "resolves the hostname (not resolved here)"
        else:
            gloo_why = f"hostname resolves to {ip}"
            if ip.startswith("127."):
                gloo_why += ": loopback, other nodes cannot connect (set GLOO_SOCKET_IFNAME)"
    return {
        "interfaces": rows,
        "nccl": {"interfaces": nccl[:4], "why": nccl_why},
        "gloo": {"interfaces": gloo, "why": gloo_why},
    }


# --- hardware -----------------------------------------------------------------------------------


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def _numa_nodes() -> list[dict[str, Any]] | None:
    base = "/sys/devices/system/node"
    if not os.path.isdir(base):
        return None
    nodes = []
    for d in sorted(os.listdir(base)):
        if d.startswith("node") and d[4:].isdigit():
            cpus = _guard(lambda d=d: _read(f"{base}/{d}/cpulist"))
            nodes.append({"node": int(d[4:]), "cpus": cpus})
    return nodes


def _compress(cpus: list[int]) -> str:
    """[0,1,2,3,8] -> '0-3,8'."""
    parts: list[str] = []
    for c in sorted(cpus):
        if parts and "-" not in parts[-1].split(",")[-1] and int(parts[-1]) == c - 1:
            parts[-1] = f"{parts[-1]}-{c}"
        elif parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == c - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{c}"
        else:
            parts.append(str(c))
    return ",".join(parts)


def cpu() -> dict[str, Any]:
    import psutil

    affinity = _guard(lambda: sorted(os.sched_getaffinity(0)))
    return {
        "model": _guard(_cpu_model),
        "logical": _guard(psutil.cpu_count),
        "physical": _guard(lambda: psutil.cpu_count(logical=False)),
        "affinity": _compress(affinity) if affinity else None,
        "affinity_count": len(affinity) if affinity else None,
        "numa_nodes": _guard(_numa_nodes),
        "load_avg": _guard(lambda: [round(x, 2) for x in os.getloadavg()]),
    }


def _cpu_model() -> str | None:
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def memory() -> dict[str, Any]:
    import psutil

    vm = _guard(psutil.virtual_memory)
    return {
        "total_bytes": getattr(vm, "total", None),
        "available_bytes": getattr(vm, "available", None),
    }


def shm(path: str = "/dev/shm") -> dict[str, Any]:
    """Size of /dev/shm, with the warning a small one deserves."""
    import psutil

    du = _guard(lambda: psutil.disk_usage(path))
    total = getattr(du, "total", None)
    warning = None
    if total is not None and total < SHM_WARN_BYTES:
        warning = (
            f"{path} is only {total / 2**20:.0f} MiB: NCCL keeps intra-node buffers and "
            "DataLoader workers pass batches there; expect 'Bus error' or NCCL shm failures. "
            "Use docker --shm-size=16g or --ipc=host."
        )
    return {
        "path": path,
        "total_bytes": total,
        "free_bytes": getattr(du, "free", None),
        "warning": warning,
    }


def _nvml() -> dict[str, Any]:
    """GPUs as NVML sees them (driver, memory, PCI bus, NVLink, topology), through the project's
    one NVML wrapper; the shape is `ddpdoctor.env/1`'s."""
    from ddpdoctor.node import nvml

    inv = nvml.inventory(health=False)
    if not inv.available:
        return {"available": False, "error": inv.error, "devices": []}
    devices = []
    for g in inv.devices:
        links = [link.active for link in g.nvlinks if link.active is not None]
        devices.append(
            {
                "index": g.index,
                "name": g.name,
                "memory_total_bytes": g.memory_total_bytes,
                "memory_used_bytes": g.memory_used_bytes,
                "pci_bus_id": g.pci_bus_id,
                "nvlink_active": sum(links) if links else None,
                "nvlink_links": len(links) if links else None,
            }
        )
    return {
        "available": True,
        "driver": inv.driver,
        "cuda_driver": inv.cuda_driver,
        "devices": devices,
        "topology": inv.topology,
    }


def torch_info(include_torch: bool) -> dict[str, Any]:
    """torch and what it was built with. Imports torch only when asked (a second or more)."""
    if "torch" not in sys.modules and not include_torch:
        return {"imported": False, "version": None}
    t0 = time.perf_counter()
    try:
        import torch
    except Exception as e:
        return {"imported": False, "version": None, "error": f"cannot import torch: {e}"}
    cuda = torch.cuda
    info: dict[str, Any] = {
        "imported": True,
        "version": _guard(lambda: torch.__version__),
        "debug_build": _guard(lambda: bool(torch.version.debug)),
        "cuda_build": _guard(lambda: torch.version.cuda),
        "hip_build": _guard(lambda: getattr(torch.version, "hip", None)),
        "cudnn": _guard(lambda: torch.backends.cudnn.version()),
        "nccl": _guard(
            lambda: ".".join(map(str, cuda.nccl.version())) if cuda.is_available() else None
        ),
        "distributed": _guard(lambda: torch.distributed.is_available()),
        "nccl_backend": _guard(lambda: torch.distributed.is_nccl_available()),
        "gloo_backend": _guard(lambda: torch.distributed.is_gloo_available()),
        "cuda_available": _guard(cuda.is_available),
        "device_count": _guard(cuda.device_count),
    }
    # Names need a CUDA context; only read them where one exists already, or every rank of a
    # job would create a context on GPU 0 just to be described.
    if _guard(cuda.is_initialized):
        info["devices"] = [
            _guard(lambda i=i: cuda.get_device_name(i)) for i in range(cuda.device_count())
        ]
    info["import_seconds"] = round(time.perf_counter() - t0, 3)
    return info


def _redact_tree(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_tree(v) for v in value]
    return value


def snapshot(include_torch: bool = False, resolve_hostname: bool = False) -> dict[str, Any]:
    """The whole snapshot (JSON-able, redacted). Never raises.

    include_torch: import torch if it is not loaded yet (costs about a second); otherwise torch
    is described only when the caller already imported it.
    resolve_hostname: look up this host's name (what gloo binds to); DNS can be slow, so off by
    default on ranks and on in `ddpdoctor env`.
    """
    t0 = time.perf_counter()
    uname = _guard(platform.uname)
    doc: dict[str, Any] = {
        "host": {
            "hostname": _guard(socket.gethostname),
            "os": _guard(platform.platform),
            "kernel": getattr(uname, "release", None),
            "machine": getattr(uname, "machine", None),
            "container": _guard(_container),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "torch": _guard(lambda: torch_info(include_torch), {"imported": False, "version": None}),
        "gpus": _guard(_nvml, {"available": False, "devices": []}),
        "cpu": _guard(cpu, {}),
        "memory": _guard(memory, {}),
        "shm": _guard(shm, {"path": "/dev/shm", "total_bytes": None}),
        "network": _guard(lambda: interfaces(resolve_hostname=resolve_hostname), {}),
        "launcher": _guard(launcher, {}),
        "variables": _guard(variables, {}),
    }
    doc["warnings"] = _warnings(doc)
    doc["collect_seconds"] = round(time.perf_counter() - t0, 3)
    return _redact_tree(doc)


def _container() -> str | None:
    if os.path.exists("/.dockerenv"):
        return "docker"
    if "KUBERNETES_SERVICE_HOST" in os.environ:
        return "kubernetes"
    with open("/proc/1/cgroup") as fh:
        text = fh.read()
    for word in ("docker", "kubepods", "containerd", "lxc"):
        if word in text:
            return word
    return None


def _warnings(doc: dict[str, Any]) -> list[str]:
    out = []
    shm_warning = (doc.get("shm") or {}).get("warning")
    if shm_warning:
        out.append(shm_warning)
    net = doc.get("network") or {}
    if net and not (net.get("nccl") or {}).get("interfaces"):
        out.append("NCCL would find no usable network interface (" + net["nccl"]["why"] + ").")
    gloo = net.get("gloo") or {}
    if "missing here" in gloo.get("why", "") or "loopback" in gloo.get("why", ""):
        out.append("gloo: " + gloo["why"])
    if (doc.get("variables") or {}).get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL":
        out.append("TORCH_DISTRIBUTED_DEBUG=DETAIL is set: slow, for debugging only.")
    return out
