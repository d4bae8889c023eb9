"""How many GPUs this node shows, without importing torch (the CLI must start fast): NVML first,
honouring CUDA_VISIBLE_DEVICES, then the device nodes. Never raises."""

from __future__ import annotations

import glob
import os


def _visible_from_env() -> int | None:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    count = 0
    for e in entries:  # CUDA stops at the first invalid entry ("-1" hides everything after)
        if e.startswith("-"):
            break
        count += 1
    return count


def nvml_count() -> int | None:
    from ddpdoctor.node import nvml

    return nvml.device_count()


def visible_gpus() -> tuple[int, str]:
    """(count, how we know) — the reason goes into the report header."""
    physical = nvml_count()
    if physical is None:
        nodes = [p for p in glob.glob("/dev/nvidia[0-9]*") if p[len("/dev/nvidia") :].isdigit()]
        physical = len(nodes)
        source = (
            "/dev/nvidia* nodes, NVML unavailable" if nodes else "NVML unavailable, no /dev/nvidia*"
        )
    else:
        source = "NVML"
    env = _visible_from_env()
    if env is not None and physical:
        return min(
            env, physical
        ), f"{source}, CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}"
    return physical, source


def resolve_backend(requested: str, gpu_count: int, source: str) -> tuple[str, str]:
    """auto → nccl with GPUs, else gloo. Returns (backend, why) for the report header."""
    if requested == "auto":
        if gpu_count > 0:
            return "nccl", f"auto: {gpu_count} GPU(s) visible ({source})"
        return "gloo", f"auto: no GPU visible ({source})"
    return requested, f"asked for {requested}"
