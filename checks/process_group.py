"""`process_group`: init_process_group with a deadline, a side gloo group for the doctor's own
traffic, a monitored barrier that names absent ranks, and barrier latency. Every other check
needs this one, so the worker always runs it (the row is hidden when the user skips it)."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

from ddpdoctor import registry
from ddpdoctor.report import problems
from ddpdoctor.report.model import Judgement, World
from ddpdoctor.report.ranks import plural, ranks_txt

ID = "process_group"
TITLE = "Process group"
STAGE = registry.CREATES_GROUP
COLLECTIVE = True
BARRIERS = 5
SLOW_BARRIER_MS = {1: 50.0, 2: 200.0}  # one host / several hosts


def control_timeout(timeout: float) -> float:
    """The doctor's own exchanges outlive a data collective's deadline, so a rank that finished a
    collective can wait for peers that are still timing out in it."""
    return timeout + 5


def run(ctx: Any) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build")
    if ctx.backend == "nccl":
        if not torch.cuda.is_available():
            raise RuntimeError("backend nccl asked for, but torch sees no CUDA device")
        torch.cuda.set_device(ctx.local_rank % torch.cuda.device_count())
        ctx.device = torch.device("cuda", torch.cuda.current_device())
    else:
        ctx.device = torch.device("cpu")

    ctx.phase("init_process_group")
    t0 = time.perf_counter()
    dist.init_process_group(backend=ctx.backend, timeout=timedelta(seconds=ctx.timeout))
    init_s = time.perf_counter() - t0
    ctx.group = dist.group.WORLD

    ctx.phase("creating the control group")
    ctx.control = dist.new_group(
        backend="gloo", timeout=timedelta(seconds=control_timeout(ctx.timeout))
    )

    ctx.phase("monitored barrier")
    dist.monitored_barrier(
        group=ctx.control, timeout=timedelta(seconds=ctx.timeout), wait_all_ranks=True
    )

    ctx.phase("barrier latency")
    token = torch.zeros(1, device=ctx.device)
    times = []
    for _ in range(BARRIERS):
        t = time.perf_counter()
        ctx.wait(dist.all_reduce(token, async_op=True), "barrier")
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return {
        "backend": dist.get_backend(),
        "world_size": dist.get_world_size(),
        "rank": dist.get_rank(),
        "init_s": round(init_s, 4),
        "barrier_ms": round(statistics.median(times), 4),
        "device": str(ctx.device),
    }


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    findings = []
    if not per_rank:
        return Judgement(summary="no rank initialised a process group")
    backends = {d.get("backend") for d in per_rank.values()}
    barrier = max(d.get("barrier_ms", 0.0) for d in per_rank.values())
    init_s = max(d.get("init_s", 0.0) for d in per_rank.values())
    limit = SLOW_BARRIER_MS[1 if world.nnodes <= 1 else 2]
    if barrier > limit:
        slow = [r for r, d in per_rank.items() if d.get("barrier_ms", 0.0) > limit]
        findings.append(
            problems.BARRIER_SLOW.finding(
                f"barrier takes {barrier:.1f} ms (expected < {limit:g} ms) on {ranks_txt(slow)}",
                slow,
                barrier_ms=barrier,
            )
        )
    sizes = {d.get("world_size") for d in per_rank.values()}
    if len(sizes) > 1:
        findings.append(
            problems.WORLD_SIZE_MISMATCH.finding(
                f"process groups of different sizes: {sorted(sizes)}", list(per_rank)
            )
        )
    summary = (
        f"{'/'.join(sorted(b for b in backends if b))}, {plural(len(per_rank), 'rank')} joined, "
        f"init {init_s:.2f} s, barrier {barrier:.2f} ms"
    )
    return Judgement(
        summary=summary, findings=findings, metrics={"init_s": init_s, "barrier_ms": barrier}
    )
