"""The judges of `ddpdoctor run`: pure functions over the ranks' records (no torch import).
`judge(records, world_size)` runs them all in the report's row order."""

from __future__ import annotations

from ddpdoctor.trace.judges import (
    collectives,
    data,
    devices,
    group,
    replicas,
    scaler,
    timing,
    writes,
)
from ddpdoctor.trace.judges.findings import AREAS, TraceFinding
from ddpdoctor.trace.judges.summary import summarize
from ddpdoctor.trace.record import TraceRecord

__all__ = ["AREAS", "TraceFinding", "judge", "summarize"]


def judge(
    records: dict[int, TraceRecord], world_size: int, *, exit_codes: dict[int, int] | None = None,
    stacks: dict[int, str] | None = None,
) -> list[TraceFinding]:  # fmt: skip
    """Every finding, most severe first within each area, areas in report order. `exit_codes`
    (rank -> torchrun's exit code) and `stacks` (rank -> a faulthandler dump taken at the verdict)
    are optional: they let the group judge explain aborts and name where unfinished ranks were."""
    del world_size  # the records say who ran; missing ranks are the launcher's verdict
    out = group.judge(records, exit_codes, stacks)
    for module in (devices, data, scaler, replicas, collectives, writes, timing):
        out += module.judge(records)
    order = {a: i for i, a in enumerate(AREAS)}
    out.sort(key=lambda f: (order.get(f.area, 99), -int(f.level)))
    return out
