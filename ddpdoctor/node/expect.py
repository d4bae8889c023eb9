"""What a node should look like: `--expect FILE` (JSON or TOML) with cluster-wide values and
per-machine-type overrides, and `--save-baseline FILE`, which writes such a file from a node
known to be good. A baseline is an expect file, so the two never drift apart.

    gpu_count = 8                  # cluster-wide defaults
    driver = "550.54.15"
    [machines.h100]                # one table per machine type
    hosts = "gpu[001-064]"         # which nodes are of this type (Slurm host list) ...
    gpu_model = "H100"             # ... or which GPU model they carry
    gpu_gemm_tflops = 600          # floors: a device below them fails

Unknown keys are usage errors: a typo must not silently switch a check off.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ddpdoctor.errors import UsageError
from ddpdoctor.node.hostlist import expand_hostlist

BASELINE_MARGIN = 0.85  # floors saved from a good node: 85 % of what it measured


@dataclass(frozen=True)
class Expectations:
    machine: str | None = None  # the machine type that matched, for the report
    gpu_count: int | None = None
    gpu_model: str | None = (
        None  # a substring of the NVML name: "H100" matches "NVIDIA H100 80GB HBM3"
    )
    driver: str | None = None  # a prefix: "550" matches "550.54.15"
    cuda: str | None = None
    nccl: str | None = None
    torch: str | None = None
    gpu_gemm_tflops: float | None = None
    gpu_copy_gbps: float | None = None
    cpu_gemm_gflops: float | None = None
    cpu_copy_gbps: float | None = None
    busbw_gbps: float | None = (
        None  # for bench-allreduce --expect-busbw; carried, not measured here
    )
    rdma_ports: int | None = None
    rdma_rate_gbps: float | None = None
    retired_pages_max: int = 10
    mig: bool = False


_KEYS = {f.name: f for f in fields(Expectations) if f.name != "machine"}
_NUMBERS = {"gpu_count", "rdma_ports", "retired_pages_max"}
_FLOATS = {
    "gpu_gemm_tflops",
    "gpu_copy_gbps",
    "cpu_gemm_gflops",
    "cpu_copy_gbps",
    "busbw_gbps",
    "rdma_rate_gbps",
}


def _load(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if p.suffix == ".toml":
        try:
            import tomllib
        except ImportError:
            raise UsageError(f"{path}: TOML needs Python 3.11 or newer; use JSON") from None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"{path} is not valid TOML: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON: {e.msg} (line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected an object of settings")
    return doc


def _checked(values: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in _KEYS:
            raise UsageError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_KEYS))})")
        if key in _NUMBERS and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise UsageError(f"{where}: {key} must be a whole number >= 0, not {value!r}")
        if key in _FLOATS and (
            not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0
        ):
            raise UsageError(f"{where}: {key} must be a number > 0, not {value!r}")
        if key == "mig" and not isinstance(value, bool):
            raise UsageError(f"{where}: mig must be true or false")
        if key not in _NUMBERS | _FLOATS | {"mig"}:
            value = str(value)
        out[key] = value
    return out


def load(path: str, hostname: str | None, gpu_name: str | None) -> Expectations:
    """The expectations for this node: the cluster defaults, overridden by the first machine
    type whose `hosts` contain this node or whose `gpu_model` its GPUs carry."""
    doc = _load(path)
    machines = doc.pop("machines", {})
    if not isinstance(machines, dict):
        raise UsageError(f"{path}: 'machines' must be a table of machine types")
    base = _checked(doc, path)
    chosen: str | None = None
    for name, spec in machines.items():
        if not isinstance(spec, dict):
            raise UsageError(f"{path}: machines.{name} must be a table")
        spec = dict(spec)
        hosts = spec.pop("hosts", None)
        checked = _checked(spec, f"{path} machines.{name}")
        by_host = hosts is not None and hostname in expand_hostlist(str(hosts))
        model = checked.get("gpu_model")
        by_model = (
            hosts is None and model is not None and gpu_name is not None and model in gpu_name
        )
        if by_host or by_model:
            base.update(checked)
            chosen = name
            break
    return Expectations(machine=chosen, **base)


def baseline(measured: dict[str, Any]) -> dict[str, Any]:
    """An expect document from a good node's facts: its inventory and versions exactly, its
    speed figures as floors with a margin (noise must not fail the next good node)."""
    doc = {k: v for k, v in measured.items() if k in _KEYS and v is not None}
    for key in _FLOATS & doc.keys():
        if key not in ("busbw_gbps", "rdma_rate_gbps"):
            doc[key] = round(doc[key] * BASELINE_MARGIN, 2)
    return doc


def as_dict(expect: Expectations) -> dict[str, Any]:
    return {k: v for k, v in asdict(expect).items() if v is not None}
