"""The `bench` job that `ddpdoctor bench-allreduce` runs on every rank: an all_reduce sweep over
message sizes, shaped like a check (run on ranks, judge from data) so it reuses the launcher, the
heartbeats, the deadlines and the collector unchanged."""

from __future__ import annotations

from typing import Any

from ddpdoctor import registry
from ddpdoctor.bench import engine
from ddpdoctor.report import problems
from ddpdoctor.report.model import Judgement, Level, World

ID = "bench"
TITLE = "all_reduce sweep"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = True


def sizes(min_bytes: int, max_bytes: int, factor: int, dtype: str) -> list[int]:
    """nccl-tests' -b/-e/-f: from min to max multiplying by factor, whole elements only."""
    unit = engine.DTYPE_BYTES[dtype]
    out, n = [], max(min_bytes, unit)
    while n <= max_bytes:
        rounded = max(unit, n // unit * unit)
        if not out or rounded != out[-1]:
            out.append(rounded)
        n *= factor
    return out


def run(ctx: Any) -> dict[str, Any]:
    o = ctx.options["bench"]
    rows = []
    for nbytes in sizes(o["min_bytes"], o["max_bytes"], o["factor"], o["dtype"]):
        rows.append(engine.measure(ctx, nbytes, o["dtype"], o["op"], o["iters"], o["warmup"]))
    return {"sizes": rows}


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    o = world.options.get("bench", {})
    measured = {r: d["sizes"] for r, d in per_rank.items() if d.get("sizes")}
    rows = engine.summarize(measured, world.world_size)
    avg = engine.avg_busbw(rows)
    findings = []
    wrong = engine.wrong_values(rows)
    if wrong:
        findings.append(wrong)
    expect = o.get("expect_busbw")
    if expect is not None:
        if avg is None:
            findings.append(
                problems.ALLREDUCE_SLOW.finding(
                    "--expect-busbw needs sizes of 1 MiB or more (raise --max-bytes)",
                    [],
                    level=Level.FAIL,
                )
            )
        elif avg < expect:
            findings.append(
                problems.ALLREDUCE_SLOW.finding(
                    f"average busbw {avg:.3f} GB/s over sizes >= 1 MiB is below --expect-busbw {expect:g} GB/s",
                    sorted(measured),
                    level=Level.FAIL,
                    avg_busbw_gbps=avg,
                    expected_gbps=expect,
                    hint="Check the transport (NCCL_DEBUG=INFO), NCCL_SOCKET_IFNAME/IB settings and link speeds; "
                    "--pairs names the slow node or link.",
                )
            )
    summary = (
        f"{len(rows)} sizes, avg busbw {avg:.3f} GB/s (sizes >= 1 MiB)"
        if avg is not None
        else f"{len(rows)} sizes (none >= 1 MiB for an average)"
    )
    return Judgement(
        summary=summary,
        findings=findings,
        metrics={"rows": [r.to_json() for r in rows], "avg_busbw_gbps": avg},
    )
