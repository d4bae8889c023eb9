"""`sampler`: DistributedSampler shards on every rank for two epochs. Judged together they must
be disjoint (apart from the documented padding), cover the data set, agree on the permutation,
and change order when set_epoch is called — the pitfalls behind "every GPU trains on the same
batches"."""

from __future__ import annotations

import hashlib
from collections import Counter
from itertools import combinations
from typing import Any

from ddpdoctor import registry
from ddpdoctor.report import problems
from ddpdoctor.report.model import Judgement, World
from ddpdoctor.report.ranks import group_by_value, ranks_txt

ID = "sampler"
TITLE = "DistributedSampler shards"
STAGE = registry.NEEDS_GROUP
COLLECTIVE = False
DATASET_LEN = 1001  # not divisible by common world sizes, so padding is exercised


def _digest(values: list[int]) -> str:
    return hashlib.sha1(",".join(map(str, values)).encode()).hexdigest()[:12]


def run(ctx: Any) -> dict[str, Any]:
    import torch
    from torch.utils.data.distributed import DistributedSampler

    dataset = range(DATASET_LEN)
    rank = (
        0 if ctx.fault("sampler-rank") else ctx.rank
    )  # self-test: a rank built with the wrong rank
    seed = 1 if ctx.fault("sampler-seed") else 0  # self-test: a rank with its own seed
    sampler = DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=rank, shuffle=True, seed=seed
    )
    epochs = {}
    perms = {}
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        epochs[epoch] = list(iter(sampler))
        g = torch.Generator()
        g.manual_seed(sampler.seed + sampler.epoch)
        perms[epoch] = _digest(torch.randperm(DATASET_LEN, generator=g).tolist())
    repeat = list(iter(sampler))  # a second pass without set_epoch repeats the order
    return {
        "dataset_len": DATASET_LEN,
        "num_replicas": sampler.num_replicas,
        "shard_len": len(epochs[0]),
        "perm_digest": perms[0],
        "perm_digest_epoch1": perms[1],
        "reshuffled": epochs[0] != epochs[1],
        "repeats_without_set_epoch": repeat == epochs[1],
        "_epoch0": epochs[0],
    }


def _overlap_detail(
    shards: dict[int, list[int]], counts: Counter[int], padding: int
) -> tuple[str, list[int]]:
    """Who overlaps whom, in O(samples) rather than over every pair of ranks: identical shards
    grouped by digest first (the usual cause: every process built its sampler with one rank),
    else the pairs that share the most samples, counted over the duplicated samples only."""
    same: dict[str, list[int]] = {}
    for r in sorted(shards):
        same.setdefault(_digest(shards[r]), []).append(r)
    groups = sorted((rs for rs in same.values() if len(rs) > 1), key=lambda rs: (-len(rs), rs[0]))
    if groups:
        parts = [f"{ranks_txt(rs)} draw the same shard" for rs in groups[:3]]
        if len(groups) > 3:
            parts.append(f"… and {len(groups) - 3:,} more groups")
        why = "RANK is not set per process?" if len(groups[0]) > 2 else "same rank given to both?"
        detail = "; ".join(parts) + f" (identical shards: {why})"
        return detail, sorted(r for rs in groups for r in rs)
    holders: dict[int, list[int]] = {}
    for r in sorted(shards):
        for i in shards[r]:
            if counts[i] > 1:
                holders.setdefault(i, []).append(r)
    shared: Counter[tuple[int, int]] = Counter()
    for rs in holders.values():
        if len(rs) <= 16:  # a sample on every rank says nothing about which pair is worst
            shared.update(combinations(rs, 2))
    worst = [(p, k) for p, k in shared.most_common() if k > padding][:3]
    detail = "; ".join(f"ranks {a},{b} share {k} samples" for (a, b), k in worst)
    involved = sorted({r for rs in holders.values() for r in rs})
    if not worst:
        detail = f"{ranks_txt(involved)} hold samples other ranks hold too"
    return detail, sorted({r for (a, b), _k in worst for r in (a, b)}) or involved


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    shards = {r: d["_epoch0"] for r, d in per_rank.items() if "_epoch0" in d}
    if not shards:
        return Judgement(summary="no shard reported")
    n = next(iter(per_rank.values()))["dataset_len"]
    findings = []
    sizes = {d.get("num_replicas") for d in per_rank.values()}
    if len(sizes) > 1:  # shards cut for different worlds cannot agree: that is DDP102's story
        told = "; ".join(
            f"{size} on {ranks_txt(rs)}"
            for size, rs in group_by_value(
                {r: d.get("num_replicas") for r, d in per_rank.items()}
            ).items()
        )
        return Judgement(
            summary=f"shards not judged: the ranks disagree on the world size ({told})"
        )
    replicas = next(iter(per_rank.values())).get("num_replicas") or len(shards)
    padding = -n % replicas

    digests = {r: d["perm_digest"] for r, d in per_rank.items()}
    common = Counter(digests.values()).most_common(1)[0][0]
    odd = sorted(r for r, v in digests.items() if v != common)
    if odd:
        findings.append(
            problems.PERMUTATION_DISAGREES.finding(
                f"{ranks_txt(odd)} shuffle with a different permutation than the others", odd
            )
        )

    counts = Counter(i for s in shards.values() for i in s)
    extra = sum(c - 1 for c in counts.values() if c > 1)
    if extra > padding:
        detail, ranks = _overlap_detail(shards, counts, padding)
        findings.append(
            problems.SHARD_OVERLAP.finding(
                f"{extra - padding} samples are trained on by more than one rank: {detail}",
                ranks,
                overlap=extra - padding,
            )
        )
    missing = n - len(counts)
    if missing > 0 and len(shards) >= replicas:  # coverage needs every rank's shard
        findings.append(
            problems.SHARD_INCOMPLETE.finding(
                f"{missing} of {n} samples are on no rank's shard", sorted(shards), missing=missing
            )
        )

    stale = sorted(r for r, d in per_rank.items() if not d.get("reshuffled"))
    if stale:
        findings.append(
            problems.SET_EPOCH_NO_EFFECT.finding(
                f"epoch 1 repeats epoch 0's order on {ranks_txt(stale)} despite set_epoch(1)", stale
            )
        )
    pad_txt = f" ({padding} padding duplicate{'s' if padding != 1 else ''})" if padding else ""
    if len(shards) < replicas:
        summary = f"{len(shards)} of {replicas} ranks' shards seen; coverage not judged"
        if findings:
            summary += ": shards are WRONG"
    else:
        summary = f"{n} samples over {replicas} ranks: " + (
            f"disjoint, complete{pad_txt}, set_epoch reshuffles"
            if not findings
            else "shards are WRONG"
        )
    return Judgement(
        summary=summary,
        findings=findings,
        metrics={"padding": padding, "overlap": max(0, extra - padding)},
    )
