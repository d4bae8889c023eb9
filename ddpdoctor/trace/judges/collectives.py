"""Collectives the script calls: the sequence (op, dtype, shape, group) must be the same on
every rank; the first difference is named with the line on each side, before it becomes a hang."""

from __future__ import annotations

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace.judges.findings import COLLECTIVES, TraceFinding, ranks_text
from ddpdoctor.trace.record import Collective, TraceRecord


def _text(c: Collective | None) -> str:
    if c is None:
        return "nothing (no further collective)"
    shape = "x".join(map(str, c.shape)) or "-"
    desc = f"{c.op}({c.dtype} {shape})" if c.dtype else f"{c.op}()"
    return f"{desc} at {c.where}" if c.where else desc


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    ranks = sorted(records)
    if len(ranks) < 2:
        return []
    seqs = {r: [c for c in records[r].collectives if c.group == "world"] for r in ranks}
    longest = max(len(s) for s in seqs.values())
    for i in range(longest):
        keys: dict[str, list[int]] = {}
        for r in ranks:
            c = seqs[r][i] if i < len(seqs[r]) else None
            keys.setdefault(c.key() if c else "", []).append(r)
        if len(keys) == 1:
            continue
        groups = sorted(keys.values(), key=lambda rs: (-len(rs), rs))
        sides = "; ".join(
            f"{ranks_text(rs)}: {_text(seqs[rs[0]][i] if i < len(seqs[rs[0]]) else None)}"
            for rs in groups
        )
        odd = sorted(r for rs in groups[1:] for r in rs)
        first = next((seqs[r][i] for r in odd if i < len(seqs[r])), None) or seqs[groups[0][0]][i]
        msg = f"collective #{i + 1} differs across ranks: {sides}"
        return [
            TraceFinding.of(C.COLLECTIVE_MISMATCH, COLLECTIVES, msg, odd, first.where, index=i + 1)
        ]
    counts = {r: records[r].collective_count for r in ranks}
    digests = {records[r].collective_digest for r in ranks}
    if len(digests) > 1 and all(len(s) == len(seqs[ranks[0]]) for s in seqs.values()):
        parts = "; ".join(f"rank {r}: {n}" for r, n in counts.items())
        return [TraceFinding.of(C.COLLECTIVE_MISMATCH, COLLECTIVES,
            f"the collective sequences differ after the first {longest} calls ({parts} calls)",
            ranks, None, counts=counts)]  # fmt: skip
    return []
