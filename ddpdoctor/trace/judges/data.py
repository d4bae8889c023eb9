"""Data across ranks, per DataLoader and pass: the same samples on several ranks (no
DistributedSampler), the same order in consecutive epochs (no set_epoch), different numbers of
batches per rank (the hang at the end of an epoch), and how much of the dataset the ranks cover."""

from __future__ import annotations

from collections import defaultdict

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace.digest import distinct_estimate, overlap_share, union
from ddpdoctor.trace.judges.findings import DATA, TraceFinding, ranks_text
from ddpdoctor.trace.record import DataPass, TraceRecord

OVERLAP_SHARE = 0.5  # more than this share of a rank's samples also drawn elsewhere: not sharded
COVERAGE_FLOOR = 0.9


def _passes(records: dict[int, TraceRecord]) -> dict[tuple[int, int], dict[int, DataPass]]:
    out: dict[tuple[int, int], dict[int, DataPass]] = defaultdict(dict)
    for rank, rec in records.items():
        for p in rec.passes:
            out[(p.loader, p.epoch)][rank] = p
    return out


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    out: list[TraceFinding] = []
    passes = _passes(records)
    seen_loaders: set[tuple[str, int]] = set()
    for (loader, epoch), by_rank in sorted(passes.items()):
        if len(by_rank) < 2:
            continue
        out += _uneven(loader, epoch, by_rank)
        if ("same", loader) not in seen_loaders and (f := _same_samples(epoch, by_rank)):
            seen_loaders.add(("same", loader))
            out.append(f)
        elif ("cover", loader) not in seen_loaders and (f := _coverage(epoch, by_rank)):
            seen_loaders.add(("cover", loader))
            out.append(f)
    out += _same_order(records)
    return out


def _name(p: DataPass) -> str:
    return f"the DataLoader built at {p.created}" if p.created else f"DataLoader #{p.loader}"


def _uneven(loader: int, epoch: int, by_rank: dict[int, DataPass]) -> list[TraceFinding]:
    done = {r: p.batches for r, p in by_rank.items() if p.complete}
    if not done:
        return []
    beyond = {
        r: p.batches
        for r, p in by_rank.items()
        if not p.complete and p.batches > min(done.values())
    }
    counts = {**done, **beyond}
    if len(set(counts.values())) < 2:
        return []
    any_pass = next(iter(by_rank.values()))
    parts = []
    for count in sorted(set(counts.values())):
        ranks = [r for r, c in counts.items() if c == count]
        still = " (still in the loop)" if any(r in beyond for r in ranks) else ""
        parts.append(f"{ranks_text(ranks)}: {count}{still}")
    msg = f"epoch {epoch} of {_name(any_pass)} has different batch counts: " + "; ".join(parts)
    return [TraceFinding.of(
        C.UNEVEN_BATCHES, DATA, msg, list(counts), any_pass.where or any_pass.created,
        loader=loader, epoch=epoch, batches={str(r): c for r, c in sorted(counts.items())},
    )]  # fmt: skip


def _same_samples(epoch: int, by_rank: dict[int, DataPass]) -> TraceFinding | None:
    ranks = sorted(by_rank)
    shared: list[int] = []
    shares: dict[str, float] = {}
    for r in ranks:
        p = by_rank[r]
        if not p.sketch or p.items <= len(ranks):
            continue
        others = union([by_rank[o].sketch for o in ranks if o != r])
        share = overlap_share(others, p.sketch)
        shares[str(r)] = round(share, 3)
        if share > OVERLAP_SHARE:
            shared.append(r)
    if len(shared) < 2:
        return None
    p = by_rank[shared[0]]
    what = "samples" if p.kind == "indices" else "batches"
    pct = round(100 * min(shares[str(r)] for r in shared))
    msg = (
        f"{ranks_text(shared)} drew the same {what} in epoch {epoch} of {_name(p)} "
        f"(at least {pct}% of each rank's {what} also on another rank; sampler: {p.sampler})"
    )
    return TraceFinding.of(
        C.SAMPLER_MISSING, DATA, msg, shared, p.created, epoch=epoch, shares=shares
    )


def _coverage(epoch: int, by_rank: dict[int, DataPass]) -> TraceFinding | None:
    ps = list(by_rank.values())
    if not all(p.complete and p.kind == "indices" and p.dataset_len and p.sketch for p in ps):
        return None  # (an older pass keeps digests only: its sketch was dropped)
    n = ps[0].dataset_len or 0
    covered = distinct_estimate(union([p.sketch for p in ps]))
    share = covered / n if n else 1.0
    if share >= COVERAGE_FLOOR:
        return None
    p = ps[0]
    msg = (
        f"in epoch {epoch} of {_name(p)} the {len(ps)} ranks together drew about {covered:.0f} "
        f"of {n} samples ({100 * share:.0f}%)"
    )
    return TraceFinding.of(C.LOW_COVERAGE, DATA, msg, sorted(by_rank), p.sampler_site or p.created,
                           epoch=epoch, covered=round(share, 3))  # fmt: skip


def _same_order(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    """A shuffling DistributedSampler that repeats its order from one epoch to the next."""
    hits: dict[int, list[int]] = defaultdict(list)  # loader -> ranks
    example: dict[int, tuple[DataPass, DataPass]] = {}
    for rank, rec in sorted(records.items()):
        by_loader: dict[int, list[DataPass]] = defaultdict(list)
        for p in rec.passes:
            by_loader[p.loader].append(p)
        for loader, ps in by_loader.items():
            ps.sort(key=lambda p: p.epoch)
            for a, b in zip(ps, ps[1:], strict=False):
                if (a.complete and b.complete and a.distributed and a.shuffle
                        and a.items > 1 and a.order_digest == b.order_digest):  # fmt: skip
                    hits[loader].append(rank)
                    example.setdefault(loader, (a, b))
                    break
    out = []
    for loader, ranks in hits.items():
        a, b = example[loader]
        called = "never called" if a.set_epoch is None else f"left at {a.set_epoch}"
        msg = (
            f"epochs {a.epoch} and {b.epoch} of {_name(a)} drew the same order on "
            f"{ranks_text(ranks)}: the DistributedSampler shuffles but set_epoch was {called}"
        )
        out.append(TraceFinding.of(C.SET_EPOCH_MISSING, DATA, msg, ranks, a.sampler_site or a.created,
                                   loader=loader, set_epoch=a.set_epoch))  # fmt: skip
    return out
