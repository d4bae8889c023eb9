"""The `pairs` job behind `bench-allreduce --pairs`: all_reduce bandwidth between every pair of
nodes (or of ranks, on one node), pairs measured concurrently in disjoint rounds of a round-robin
tournament, so N units take N-1 rounds, not N(N-1)/2. The slow node or link is the one whose
pairs fall below a fraction of the median."""

from __future__ import annotations

import dataclasses
import statistics
from itertools import combinations
from typing import Any

from ddpdoctor import registry
from ddpdoctor.bench import engine
from ddpdoctor.rank import exchange as wire
from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding, Judgement, World

ID = "pairs"
TITLE = "pair bandwidth"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = True


def rounds(n: int) -> list[list[tuple[int, int]]]:
    """Round-robin schedule (circle method): every pair once, each unit in at most one pair per
    round; n-1 rounds for even n, n for odd."""
    units = list(range(n)) + ([None] if n % 2 else [])
    m = len(units)
    out = []
    for _ in range(m - 1):
        pairs = [(units[i], units[m - 1 - i]) for i in range(m // 2)]
        out.append([tuple(sorted(p)) for p in pairs if None not in p])
        units = [units[0], units[-1], *units[1:-1]]
    return out


def run(ctx: Any) -> dict[str, Any]:
    import torch.distributed as dist

    o = ctx.options["bench"]
    everyone = wire.all_gather_json(
        {"rank": ctx.rank, "host": ctx.host}, ctx.world_size, ctx.control
    )
    hosts = sorted({e["host"] for e in everyone})
    if len(hosts) > 1:  # pairs of nodes, each node represented by its lowest rank
        names = hosts
        reps = [min(e["rank"] for e in everyone if e["host"] == h) for h in hosts]
    else:
        names = [f"rank {e['rank']}" for e in everyone]
        reps = [e["rank"] for e in everyone]
    schedule = rounds(len(reps))
    groups = {}
    for a, b in combinations(range(len(reps)), 2):  # every rank creates every group, same order
        groups[(a, b)] = dist.new_group([reps[a], reps[b]], backend=ctx.backend)
    mine = []
    count = engine.count_for(o["max_bytes"], o["dtype"])
    for k, pairs in enumerate(schedule):
        ctx.phase(f"pairs round {k + 1}/{len(schedule)}")
        for a, b in pairs:
            if ctx.rank in (reps[a], reps[b]):
                pair_ctx = dataclasses.replace(
                    ctx, group=groups[(a, b)], world_size=2, rank=0 if ctx.rank == reps[a] else 1
                )
                # best of 3 blocks: a link's capacity, not a passing hiccup on a shared host
                t = min(
                    engine.time_block(
                        pair_ctx, count, o["dtype"], "sum", o["iters"], o["warmup"] if i == 0 else 0
                    )
                    for i in range(3)
                )
                if ctx.rank == reps[a]:
                    mine.append(
                        {
                            "a": names[a],
                            "b": names[b],
                            "ranks": [reps[a], reps[b]],
                            "round": k,
                            "bytes": count * engine.DTYPE_BYTES[o["dtype"]],
                            "time_s": t,
                        }
                    )
        dist.barrier(group=ctx.control)  # rounds never overlap
    return {"units": names, "pairs": mine}


def reference(units: list[str], pairs: list[dict[str, Any]]) -> float:
    """The median over units of each unit's best pair: one slow node drags down every pair it is
    in (2 of 3 pairs with 3 nodes), so the plain median of pairs would hide it."""
    best = [
        max((p["busbw_gbps"] for p in pairs if u in (p["a"], p["b"])), default=0.0) for u in units
    ]
    return statistics.median(best) if best else 0.0


def best_of(units: list[str], pairs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        u: max((p["busbw_gbps"] for p in pairs if u in (p["a"], p["b"])), default=0.0)
        for u in units
    }


def blame(
    units: list[str], pairs: list[dict[str, Any]], ratio: float
) -> tuple[list[str], list[tuple[str, str]]]:
    """Slow units, then slow links, explaining slowness away one culprit at a time.

    A unit is slow when most of its remaining pairs are slow (against the median of every unit's
    best pair); its pairs are then set aside, so its peers are not blamed for its link. A link
    is slow when it is slow next to what both of its ends reach with other peers."""
    slow_units: list[str] = []
    left = list(pairs)
    while True:
        ref = reference([u for u in units if u not in slow_units], left)
        scores = []
        for u in units:
            if u in slow_units:
                continue
            mine = [p for p in left if u in (p["a"], p["b"])]
            slow = [p for p in mine if p["busbw_gbps"] < ratio * ref]
            if mine and len(slow) * 2 > len(mine):
                scores.append(
                    (len(slow) / len(mine), -sum(p["busbw_gbps"] for p in mine) / len(mine), u)
                )
        if not scores:
            break
        culprit = max(scores)[2]
        slow_units.append(culprit)
        left = [p for p in left if culprit not in (p["a"], p["b"])]
    best = best_of(units, left)
    links = [
        (p["a"], p["b"])
        for p in left
        if p["busbw_gbps"] < ratio * min(best[p["a"]], best[p["b"]])
        and any(q is not p for q in left if p["a"] in (q["a"], q["b"]))
        and any(q is not p for q in left if p["b"] in (q["a"], q["b"]))
    ]
    for p in pairs:
        p["slow"] = p["a"] in slow_units or p["b"] in slow_units or (p["a"], p["b"]) in links
    return slow_units, links


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    o = world.options.get("bench", {})
    ratio = float(o.get("slow_ratio", 0.7))
    units = next((d["units"] for d in per_rank.values() if d.get("units")), [])
    pairs = []
    for d in per_rank.values():
        for p in d.get("pairs", []):
            busbw = p["bytes"] / p["time_s"] / 1e9 if p["time_s"] > 0 else 0.0  # n=2: busbw = algbw
            pairs.append(
                {
                    **{k: v for k, v in p.items() if k != "time_s"},
                    "time_us": p["time_s"] * 1e6,
                    "busbw_gbps": busbw,
                }
            )
    pairs.sort(
        key=lambda p: (
            units.index(p["a"]) if p["a"] in units else 0,
            units.index(p["b"]) if p["b"] in units else 0,
        )
    )
    if not pairs:
        return Judgement(
            summary="fewer than 2 units: no pair to measure", metrics={"pairs": [], "units": units}
        )
    median = reference(units, pairs)
    slow_units, links = blame(units, pairs, ratio)
    slow = [p for p in pairs if p["slow"]]
    findings: list[Finding] = []
    for u in slow_units:
        mine = [p for p in pairs if u in (p["a"], p["b"])]
        worst = min(mine, key=lambda p: p["busbw_gbps"])
        ranks = sorted({r for p in mine for r in p["ranks"]})
        findings.append(
            problems.SLOW_NODE.finding(
                f"{u} is slow to its peers: {sum(p['busbw_gbps'] < ratio * median for p in mine)} of "
                f"{len(mine)} pairs below {ratio:g} x the median {median:.3f} GB/s (worst "
                f"{worst['busbw_gbps']:.3f} GB/s with "
                f"{worst['b'] if worst['a'] == u else worst['a']})",
                ranks,
                unit=u,
            )
        )
    for a, b in links:
        p = next(p for p in pairs if (p["a"], p["b"]) == (a, b))
        findings.append(
            problems.SLOW_LINK.finding(
                f"the link {a} <-> {b} runs at {p['busbw_gbps']:.3f} GB/s, below {ratio:g} x what both "
                f"nodes reach with other peers",
                p["ranks"],
                link=[a, b],
            )
        )
    summary = (
        f"{len(pairs)} pairs of {len(units)} {'nodes' if units and not units[0].startswith('rank ') else 'ranks'} "
        f"in {len(rounds(len(units)))} rounds, median busbw {median:.3f} GB/s, "
        + (
            f"slow: {', '.join(slow_units + [f'{a}<->{b}' for a, b in links])}"
            if slow
            else "none slow"
        )
    )
    return Judgement(
        summary=summary,
        findings=findings,
        metrics={"pairs": pairs, "units": units, "median_busbw_gbps": median},
    )
