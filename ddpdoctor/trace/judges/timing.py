"""Time per step and rank, split into waiting for the DataLoader, the forward (batch in hand to
backward()) and the rest: a straggler rank, or a loop that mostly waits for data. In DDP every
rank's step takes as long as the slowest one's, so the straggler shows in its own forward/data
time, not in the step time."""

from __future__ import annotations

from statistics import median

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace.judges.findings import TIMING, TraceFinding, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site

WARMUP = 2  # the first steps pay for lazy initialisation
MIN_STEPS = 4
SLOW_RATIO = 1.5
SLOW_ABS_S = 0.005
DATA_SHARE = 0.3


def _loop_site(rec: TraceRecord) -> Site | None:
    return rec.passes[0].where if rec.passes else None


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    per: dict[int, tuple[float, float, float]] = {}  # rank -> (step, data, forward) medians
    for rank, rec in records.items():
        n = min(len(rec.step_s), len(rec.data_s), len(rec.forward_s))
        if n - WARMUP < MIN_STEPS:
            continue
        sl = slice(WARMUP, n)
        per[rank] = (median(rec.step_s[sl]), median(rec.data_s[sl]), median(rec.forward_s[sl]))
    if not per:
        return []
    out: list[TraceFinding] = []
    any_rec = records[min(per)]
    waiting = [r for r, (s, d, _) in per.items() if s > 0 and d / s > DATA_SHARE]
    if waiting and len(waiting) == len(per):
        share = median(per[r][1] / per[r][0] for r in waiting)
        out.append(TraceFinding.of(C.DATA_BOTTLENECK, TIMING,
            f"every rank waits for data {100 * share:.0f}% of each step "
            f"({1000 * median(per[r][1] for r in waiting):.1f} ms of "
            f"{1000 * median(per[r][0] for r in waiting):.1f} ms)", waiting,
            any_rec.passes[0].created if any_rec.passes else None, share=round(share, 3)))  # fmt: skip
    if len(per) < 2:
        return out
    for idx, what in ((2, "forward (batch to backward)"), (1, "waiting for data")):
        values = {r: v[idx] for r, v in per.items()}
        for rank, v in values.items():
            others = [x for r, x in values.items() if r != rank]
            base = median(others)
            if v > SLOW_RATIO * base and v - base > SLOW_ABS_S:
                out.append(TraceFinding.of(C.STRAGGLER, TIMING,
                    f"rank {rank} is a straggler: {what} takes {1000 * v:.1f} ms per step, "
                    f"{ranks_text([r for r in values if r != rank])} {1000 * base:.1f} ms",
                    [rank], _loop_site(records[rank]), phase=what,
                    ms=round(1000 * v, 2), others_ms=round(1000 * base, 2)))  # fmt: skip
                return out
    return out
