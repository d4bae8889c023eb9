"""The all_reduce timing engine, shared by the `allreduce` check and `bench-allreduce`.

Method (as nccl-tests): warm up, then `iters` collectives back to back timed as one block (CUDA
events on GPU; a barrier then perf_counter on CPU), per-op time = block / iters on each rank,
the collective's time = the slowest rank's. algbw = bytes / time, busbw = algbw × 2(n−1)/n,
GB = 1e9. Correctness is a separate pass with rank-dependent values and an exact expected
result. The measuring half runs on ranks (torch); the summarising half is pure.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ddpdoctor.report.units import human_bytes

if TYPE_CHECKING:
    from ddpdoctor.report.model import Finding

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}
OPS = ("sum", "max", "min", "avg")
BANDWIDTH_MIN_BYTES = 1 << 20  # smaller messages measure latency, not bandwidth
PATTERN = 4  # values cycle through 1..PATTERN, exact in every dtype for thousands of ranks


def bus_factor(world_size: int) -> float:
    return 2 * (world_size - 1) / world_size if world_size > 1 else 0.0


def count_for(nbytes: int, dtype: str) -> int:
    return max(1, nbytes // DTYPE_BYTES[dtype])


def expected_values(world_size: int, op: str) -> list[float]:
    """Expected result for each position class i % PATTERN, where rank r holds (r + i) % P + 1."""
    out = []
    for k in range(PATTERN):
        vals = [((r + k) % PATTERN) + 1 for r in range(world_size)]
        out.append(
            {"sum": sum(vals), "max": max(vals), "min": min(vals), "avg": sum(vals) / world_size}[
                op
            ]
        )
    return out


# --- on the ranks -----------------------------------------------------------------------------


def _torch_op(op: str) -> Any:
    import torch.distributed as dist

    return {
        "sum": dist.ReduceOp.SUM,
        "max": dist.ReduceOp.MAX,
        "min": dist.ReduceOp.MIN,
        "avg": dist.ReduceOp.AVG,
    }[op]


def _dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def check_values(ctx: Any, count: int, dtype: str, op: str, bias: bool = False) -> int:
    """Run one all_reduce with rank-dependent values and count the wrong elements it returns.
    `bias` is the self-test fault: this rank adds 1 to its result, as a broken link would."""
    import torch
    import torch.distributed as dist

    idx = torch.arange(count, device=ctx.device)
    x = (((idx + ctx.rank) % PATTERN) + 1).to(_dtype(dtype))
    ctx.wait(
        dist.all_reduce(x, op=_torch_op(op), group=ctx.group, async_op=True),
        "all_reduce (correctness)",
    )
    if bias:
        x += 1
    exp = torch.tensor(expected_values(ctx.world_size, op), dtype=torch.float64, device=ctx.device)[
        idx % PATTERN
    ]
    tol = 0.0 if op != "avg" else 1e-2 * float(exp.abs().max())
    return int(((x.double() - exp).abs() > tol).sum().item())


def time_block(ctx: Any, count: int, dtype: str, op: str, iters: int, warmup: int) -> float:
    """Seconds per all_reduce on this rank, timed over `iters` back-to-back ops."""
    import torch
    import torch.distributed as dist

    x = torch.ones(count, dtype=_dtype(dtype), device=ctx.device)
    rop = _torch_op(op)
    for _ in range(warmup):
        ctx.wait(dist.all_reduce(x, op=rop, group=ctx.group, async_op=True), "all_reduce (warm-up)")
    if ctx.device.type == "cuda":
        torch.cuda.synchronize()
        ctx.wait(
            dist.all_reduce(torch.zeros(1, device=ctx.device), group=ctx.group, async_op=True),
            "barrier",
        )
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        works = [dist.all_reduce(x, op=rop, group=ctx.group, async_op=True) for _ in range(iters)]
        end.record()
        for w in works:
            ctx.wait(w, "all_reduce")
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    dist.barrier(group=ctx.group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, op=rop, group=ctx.group)
    return (time.perf_counter() - t0) / iters


def measure(
    ctx: Any,
    nbytes: int,
    dtype: str = "float32",
    op: str = "sum",
    iters: int = 20,
    warmup: int = 5,
    check: bool = True,
) -> dict[str, Any]:
    """One size on this rank: its time per op and its wrong-element count."""
    count = count_for(nbytes, dtype)
    size = human_bytes(count * DTYPE_BYTES[dtype])
    ctx.phase(f"all_reduce {size} (timing)")
    seconds = time_block(ctx, count, dtype, op, iters, warmup)
    # correctness after timing: its temporaries must not disturb the timed loop's caches
    ctx.phase(f"all_reduce {size} (correctness)")
    wrong = check_values(ctx, count, dtype, op, bias=ctx.fault("allreduce-bias")) if check else 0
    return {"bytes": count * DTYPE_BYTES[dtype], "count": count, "time_s": seconds, "wrong": wrong}


# --- summarising (pure) -----------------------------------------------------------------------


@dataclass
class Row:
    bytes: int
    count: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    wrong_ranks: list[int]
    slowest_rank: int
    fastest_rank: int
    slowest_us: float
    fastest_us: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(per_rank: dict[int, list[dict[str, Any]]], world_size: int) -> list[Row]:
    """Per-rank measurements (same sizes in the same order on every rank) → one row per size."""
    ranks = sorted(per_rank)
    if not ranks:
        return []
    rows = []
    for i, first in enumerate(per_rank[ranks[0]]):
        times = {r: per_rank[r][i]["time_s"] for r in ranks if i < len(per_rank[r])}
        wrong = {r: per_rank[r][i]["wrong"] for r in ranks if i < len(per_rank[r])}
        slowest = max(times, key=lambda r: times[r])
        fastest = min(times, key=lambda r: times[r])
        t = times[slowest]
        algbw = first["bytes"] / t / 1e9 if t > 0 else 0.0
        rows.append(
            Row(
                bytes=first["bytes"],
                count=first["count"],
                time_us=t * 1e6,
                algbw_gbps=algbw,
                busbw_gbps=algbw * bus_factor(world_size),
                wrong=sum(wrong.values()),
                wrong_ranks=sorted(r for r, w in wrong.items() if w),
                slowest_rank=slowest,
                fastest_rank=fastest,
                slowest_us=t * 1e6,
                fastest_us=times[fastest] * 1e6,
            )
        )
    return rows


def wrong_values(rows: list[Row]) -> Finding | None:
    """The correctness verdict shared by the allreduce check and the sweep: which ranks saw wrong
    values, at how many sizes."""
    from ddpdoctor.report import problems
    from ddpdoctor.report.ranks import ranks_txt

    ranks = sorted({r for row in rows for r in row.wrong_ranks})
    if not ranks:
        return None
    bad = [row for row in rows if row.wrong]
    sizes = ", ".join(human_bytes(r.bytes) for r in bad[:4]) + (", ..." if len(bad) > 4 else "")
    total = sum(r.wrong for r in bad)
    return problems.ALLREDUCE_WRONG.finding(
        f"{ranks_txt(ranks)} got wrong all_reduce results at {len(bad)} of {len(rows)} sizes "
        f"({total} wrong elements at {sizes})",
        ranks,
        wrong=total,
    )


def avg_busbw(rows: list[Row], min_bytes: int = BANDWIDTH_MIN_BYTES) -> float | None:
    """Average busbw over the sizes that measure bandwidth rather than latency (≥ 1 MiB)."""
    big = [r.busbw_gbps for r in rows if r.bytes >= min_bytes]
    return sum(big) / len(big) if big else None


def parse_size(text: str) -> int:
    """'8', '4K', '64M', '1G' (powers of 1024) → bytes. Raises ValueError with a clear message."""
    s = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if s and s[-1] in "KMGT":
        mult = 1 << (10 * ("KMGT".index(s[-1]) + 1))
        s = s[:-1]
    if not s.isdigit():
        raise ValueError(f"not a size: {text!r} (use a number with an optional K, M or G suffix)")
    return int(s) * mult
