"""Devices at DDP construction: device_ids against LOCAL_RANK, the model's parameters against
DDP's device, the current CUDA device, and two ranks of one host on one GPU."""

from __future__ import annotations

from collections import defaultdict

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace import record as R
from ddpdoctor.trace.judges.findings import DEVICES, TraceFinding, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    out: list[TraceFinding] = []
    used: dict[tuple[str, str], list[int]] = defaultdict(list)
    where_of: dict[int, Site | None] = {}
    for rank, rec in sorted(records.items()):
        for ev in rec.events:
            if ev.kind != R.DDP_BUILT:
                continue
            d = ev.data
            ids = d.get("device_ids") or []
            cuda_params = [p for p in d.get("param_devices") or [] if p.startswith("cuda")]
            device = ids[0] if ids else (cuda_params[0] if cuda_params else None)
            where_of[rank] = ev.where
            if device is None:
                continue  # a CPU model: nothing to map
            used[(rec.host, device)].append(rank)
            local = d.get("local_rank")
            if ids and local is not None and ids[0] != f"cuda:{local}":
                out.append(TraceFinding.of(C.DEVICE_MISMATCH, DEVICES,
                    f"rank {rank}: DDP device_ids={ids} but LOCAL_RANK is {local}", [rank], ev.where,
                    device_ids=ids, local_rank=local))  # fmt: skip
            if ids and "cpu" in (d.get("param_devices") or []):
                out.append(TraceFinding.of(C.DEVICE_MISMATCH, DEVICES,
                    f"rank {rank}: DDP wraps a model still on the CPU with device_ids={ids}: move "
                    f"it first", [rank], ev.where, param_devices=d.get("param_devices")))  # fmt: skip
            current = d.get("current_device")
            if current and current != device:
                out.append(TraceFinding.of(C.CURRENT_DEVICE_MISMATCH, DEVICES,
                    f"rank {rank}: the current CUDA device is {current}, DDP uses {device}",
                    [rank], ev.where, current=current, device=device))  # fmt: skip
    for (host, device), ranks in sorted(used.items()):
        if len(ranks) > 1:
            out.append(TraceFinding.of(C.SHARED_DEVICE, DEVICES,
                f"{ranks_text(ranks)} on {host} all train on {device}", ranks,
                where_of.get(ranks[0]), device=device))  # fmt: skip
    return out
