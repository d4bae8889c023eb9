"""Writes: one path written by several ranks on one host (torch.save, open for writing)."""

from __future__ import annotations

from collections import defaultdict

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace.judges.findings import WRITES, TraceFinding, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    writers: dict[tuple[str, str], dict[int, tuple[str, Site | None]]] = defaultdict(dict)
    for rank, rec in sorted(records.items()):
        for w in rec.writes:
            writers[(rec.host, w.path)].setdefault(rank, (w.api, w.where))
    out = []
    for (_host, path), by_rank in sorted(writers.items()):
        if len(by_rank) < 2:
            continue
        ranks = sorted(by_rank)
        api, where = by_rank[ranks[0]]
        out.append(TraceFinding.of(C.EVERY_RANK_WRITE, WRITES,
            f"{ranks_text(ranks)} all wrote {path} ({api}): they race on one file", ranks, where,
            path=path, api=api))  # fmt: skip
    return out
