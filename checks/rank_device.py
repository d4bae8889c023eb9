"""`rank_device`: which device each rank really uses. On GPUs: the GPU's UUID and PCI bus (NVML /
torch), so two ranks on one GPU or a LOCAL_RANK that points elsewhere are caught. On CPU: core
affinity and intra-op threads, so oversubscription is caught."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from ddpdoctor import registry
from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding, Judgement, World
from ddpdoctor.report.ranks import by_host, fmt_ranks, plural

ID = "rank_device"
TITLE = "Rank ↔ device"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = False


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _nvml(uuid: str | None) -> dict[str, Any]:
    """Health facts from NVML for our GPU; empty when NVML is unavailable."""
    if not uuid:
        return {}
    from ddpdoctor.node import nvml

    g = nvml.device_by_uuid(uuid)
    if g is None:
        return {}
    return {
        "name": g.name,
        "pci_bus_id": g.pci_bus_id,
        "temperature_c": g.temperature_c,
        "throttle_reasons": g.clock_event_reasons,
        "pcie_gen": g.pcie_gen,
        "pcie_width": g.pcie_width,
    }


def run(ctx: Any) -> dict[str, Any]:
    import torch

    data: dict[str, Any] = {
        "host": ctx.host,
        "local_rank": ctx.local_rank,
        "local_world_size": ctx.local_world_size,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cpu_count": os.cpu_count(),
        "affinity": _affinity(),
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "device_type": "cpu",
    }
    if ctx.backend == "nccl" or (ctx.device is not None and ctx.device.type == "cuda"):
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        uuid = str(getattr(props, "uuid", "") or "") or None
        pci = None
        if hasattr(props, "pci_bus_id"):
            pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}"
        data.update(
            device_type="cuda",
            device_index=idx,
            device_count=torch.cuda.device_count(),
            gpu_name=props.name,
            uuid=uuid,
            pci_bus_id=pci,
            nvml=_nvml(uuid),
        )
    return data


def _cpu_findings(per_rank: dict[int, dict[str, Any]]) -> list[Finding]:
    findings = []
    for host, ranks in by_host(per_rank).items():
        cores = set().union(*(set(per_rank[r]["affinity"]) for r in ranks))
        threads = sum(per_rank[r]["threads"] for r in ranks)
        if threads > len(cores):
            per_rank_threads = {per_rank[r]["threads"] for r in ranks}
            if per_rank_threads == {1}:
                msg = f"{plural(len(ranks), 'rank')} on {host} share {plural(len(cores), 'core')}: fewer cores than ranks"
                hint = (
                    f"Run at most one rank per core on this host (--nproc {len(cores)} or fewer)."
                )
            else:
                msg = (
                    f"{plural(len(ranks), 'rank')} on {host} run {threads} threads on {plural(len(cores), 'core')} "
                    f"(OMP_NUM_THREADS={per_rank[ranks[0]].get('omp_num_threads') or 'unset'})"
                )
                hint = None
            findings.append(
                problems.CPU_OVERSUBSCRIBED.finding(
                    msg, ranks, host=host, threads=threads, cores=len(cores), hint=hint
                )
            )
        pinned = [
            r for r in ranks if len(per_rank[r]["affinity"]) < (per_rank[r].get("cpu_count") or 0)
        ]
        overlap = [
            r
            for r in pinned
            for o in pinned
            if o != r and set(per_rank[r]["affinity"]) & set(per_rank[o]["affinity"])
        ]
        if overlap:
            findings.append(
                problems.CPU_AFFINITY_OVERLAP.finding(
                    f"ranks {fmt_ranks(overlap)} on {host} are pinned to overlapping cores",
                    sorted(set(overlap)),
                    host=host,
                )
            )
    return findings


def _gpu_findings(per_rank: dict[int, dict[str, Any]]) -> list[Finding]:
    findings = []
    owners: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r, d in per_rank.items():
        key = d.get("uuid") or d.get("pci_bus_id") or f"index {d.get('device_index')}"
        owners[(d.get("host", "?"), str(key))].append(r)
    for (host, gpu), ranks in sorted(owners.items()):
        if len(ranks) > 1:
            findings.append(
                problems.SHARED_GPU.finding(
                    f"ranks {fmt_ranks(ranks)} on {host} all use GPU {gpu}",
                    ranks,
                    host=host,
                    gpu=gpu,
                )
            )
    for r, d in sorted(per_rank.items()):
        count = d.get("device_count") or 0
        if count > 1 and d.get("device_index") != d.get("local_rank") % count:
            findings.append(
                problems.LOCAL_RANK_DEVICE_MISMATCH.finding(
                    f"rank {r} has LOCAL_RANK={d.get('local_rank')} but computes on cuda:{d.get('device_index')}",
                    [r],
                    host=d.get("host"),
                )
            )
        throttle = (d.get("nvml") or {}).get("throttle_reasons") or 0
        if throttle & 0x68:  # HW slowdown | HW thermal | HW power brake
            findings.append(
                problems.GPU_UNHEALTHY.finding(
                    f"GPU {d.get('uuid')} on {d.get('host')} is throttled by hardware (reasons 0x{throttle:x})",
                    [r],
                    host=d.get("host"),
                )
            )
    for host, ranks in by_host(per_rank).items():
        # Per-rank CUDA_VISIBLE_DEVICES (Slurm-style binding) legitimately shows one GPU each.
        shared_view = len({per_rank[r].get("cuda_visible_devices") for r in ranks}) == 1
        count = per_rank[ranks[0]].get("device_count") or 0
        local = per_rank[ranks[0]].get("local_world_size") or len(ranks)
        if shared_view and count and local > count:
            findings.append(
                problems.MORE_RANKS_THAN_GPUS.finding(
                    f"{local} ranks per node on {host} but {count} GPU(s) visible", ranks, host=host
                )
            )
    return findings


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    if not per_rank:
        return Judgement(summary="no rank reported its device")
    gpu = [r for r, d in per_rank.items() if d.get("device_type") == "cuda"]
    if gpu:
        findings = _gpu_findings({r: per_rank[r] for r in gpu})
        distinct = len(
            {(d.get("host"), d.get("uuid") or d.get("device_index")) for d in per_rank.values()}
        )
        summary = f"{plural(len(gpu), 'rank')} on {plural(distinct, 'distinct GPU')}"
    else:
        findings = _cpu_findings(per_rank)
        threads = sorted({d["threads"] for d in per_rank.values()})
        cores = max(len(d["affinity"]) for d in per_rank.values())
        summary = (
            f"{plural(len(per_rank), 'rank')} on CPU, {'/'.join(map(str, threads))} thread(s) each, "
            f"{plural(cores, 'core')} per host"
        )
    return Judgement(summary=summary, findings=findings)
