"""GradScaler and the step order: clipping still-scaled gradients, zero_grad between backward
and step, step without update, a scaler made per step; across ranks: the scale and the skipped
steps must agree."""

from __future__ import annotations

from collections import defaultdict

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace import record as R
from ddpdoctor.trace.judges.findings import SCALER, TraceFinding, events_by_place, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    out: list[TraceFinding] = []
    for (where, data), (ranks, _n) in events_by_place(records, R.CLIP_SCALED).items():
        d = dict(data)
        out.append(TraceFinding.of(C.GRAD_SCALER_MISUSE, SCALER,
            f"gradients clipped while still scaled: no scaler.unscale_(optimizer) before "
            f"{d.get('api', 'clipping')} ({ranks_text(ranks)})", ranks, where))  # fmt: skip
    for (where, data), (ranks, count) in events_by_place(records, R.ZERO_GRAD_BEFORE_STEP).items():
        scaled = dict(data).get("scaler") == "True"
        problem = C.GRAD_SCALER_MISUSE if scaled else C.ZERO_GRAD_BEFORE_STEP
        out.append(TraceFinding.of(problem, SCALER,
            f"zero_grad between backward and the optimizer step: the step sees no gradients "
            f"({ranks_text(ranks)}, {count}x)", ranks, where))  # fmt: skip
    for (where, _), (ranks, _n) in events_by_place(records, R.STEP_WITHOUT_UPDATE).items():
        out.append(TraceFinding.of(C.GRAD_SCALER_MISUSE, SCALER,
            f"scaler.step() is not followed by scaler.update(): the scale never adapts "
            f"({ranks_text(ranks)})", ranks, where))  # fmt: skip
    for (where, _), (ranks, count) in events_by_place(records, R.SCALER_CREATED).items():
        if count > 1:
            out.append(TraceFinding.of(C.GRAD_SCALER_MISUSE, SCALER,
                f"a GradScaler is created {count} times here (once per step): each new one "
                f"starts from the initial scale ({ranks_text(ranks)})", ranks, where,
                created=count))  # fmt: skip
    out += _across(records)
    return out


def _scaler_site(records: dict[int, TraceRecord]) -> Site | None:
    for rec in records.values():
        for ev in rec.events:
            if ev.kind == R.SCALER_CREATED:
                return ev.where
    return None


def _across(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    out: list[TraceFinding] = []
    common = set.intersection(*(set(r.scales) for r in records.values())) if records else set()
    for step in sorted(common):
        values = {rank: rec.scales[step] for rank, rec in records.items()}
        if len(set(values.values())) > 1:
            by_value: dict[float, list[int]] = defaultdict(list)
            for rank, v in sorted(values.items()):
                by_value[v].append(rank)
            parts = "; ".join(f"{ranks_text(rs)}: {v:g}" for v, rs in sorted(by_value.items()))
            out.append(TraceFinding.of(C.SCALE_DIFFERS, SCALER,
                f"the GradScaler scale differs across ranks after step {step}: {parts}",
                list(values), _scaler_site(records), step=step))  # fmt: skip
            break
    skips = {
        rank: rec.skipped_count for rank, rec in records.items() if rec.steps or rec.skipped_count
    }
    if len(set(skips.values())) > 1:
        parts = "; ".join(f"rank {r}: {n}" for r, n in sorted(skips.items()))
        out.append(TraceFinding.of(C.SKIPS_DIFFER, SCALER,
            f"ranks skipped different numbers of optimizer steps: {parts}", list(skips),
            _scaler_site(records), skipped={str(r): n for r, n in skips.items()}))  # fmt: skip
    many = [
        r
        for r, rec in records.items()
        if rec.skipped_count > max(3, (rec.steps + rec.skipped_count) // 2)
    ]
    if many:
        rec = records[many[0]]
        out.append(TraceFinding.of(C.MANY_SKIPS, SCALER,
            f"GradScaler skipped {rec.skipped_count} of {rec.steps + rec.skipped_count} steps "
            f"({ranks_text(many)})", many, _scaler_site(records)))  # fmt: skip
    return out
