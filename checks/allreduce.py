"""`allreduce`: exact results with rank-dependent values, and bus bandwidth against a floor for
the link, over a few sizes (the same engine as `bench-allreduce`)."""

from __future__ import annotations

from typing import Any

from ddpdoctor import registry
from ddpdoctor.bench import engine
from ddpdoctor.report import problems
from ddpdoctor.report.model import Judgement, World
from ddpdoctor.report.units import human_bytes

ID = "allreduce"
TITLE = "all_reduce"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = True

SIZES = {"cpu": (4 << 10, 1 << 20, 4 << 20), "cuda": (1 << 20, 16 << 20, 64 << 20)}
ITERS = {"cpu": (5, 2), "cuda": (20, 5)}
# busbw floors (GB/s) under which the link is called slow: deliberately low, they catch a broken
# or misrouted link (TCP instead of NVLink/IB, a 1 GbE fallback), not a slightly slow one.
FLOORS = {("gloo", 1): 0.05, ("gloo", 2): 0.05, ("nccl", 1): 5.0, ("nccl", 2): 1.0}


def run(ctx: Any) -> dict[str, Any]:
    kind = "cuda" if ctx.device.type == "cuda" else "cpu"
    iters, warmup = ITERS[kind]
    rows = [engine.measure(ctx, n, "float32", "sum", iters, warmup) for n in SIZES[kind]]
    return {"sizes": rows}


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    measured = {r: d["sizes"] for r, d in per_rank.items() if d.get("sizes")}
    rows = engine.summarize(measured, world.world_size)
    if not rows:
        return Judgement(summary="no measurement")
    findings = []
    wrong = engine.wrong_values(rows)
    if wrong:
        findings.append(wrong)
    best = max(rows, key=lambda r: r.bytes)
    floor = FLOORS.get((world.backend, 1 if world.nnodes <= 1 else 2))
    if floor and world.world_size > 1 and best.busbw_gbps < floor:
        findings.append(
            problems.ALLREDUCE_SLOW.finding(
                f"busbw {best.busbw_gbps:.2f} GB/s at {human_bytes(best.bytes)} is below the "
                f"{floor:g} GB/s floor for {world.backend} on {'one host' if world.nnodes <= 1 else 'several hosts'}",
                list(measured),
                busbw_gbps=best.busbw_gbps,
                floor_gbps=floor,
            )
        )
    summary = (
        f"{world.backend}, {world.world_size} ranks, busbw {best.busbw_gbps:.2f} GB/s at "
        f"{human_bytes(best.bytes)}, {'all values exact' if not wrong else 'WRONG values'}"
    )
    return Judgement(
        summary=summary,
        findings=findings,
        metrics={"rows": [r.to_json() for r in rows], "busbw_gbps": best.busbw_gbps},
    )
