"""What the judges return: a finding with the catalog's code and symbol, the ranks, the area of
the report row, and `where: {path, line}` in the user's code. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.report.model import Finding, Level
from ddpdoctor.report.problems import Problem
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site

# The report's rows, in order.
GROUP, DEVICES, DATA, SCALER, REPLICAS, COLLECTIVES, WRITES, TIMING = (
    "group", "devices", "data", "gradscaler", "replicas", "collectives", "writes", "timing",
)  # fmt: skip
AREAS = (GROUP, DEVICES, DATA, SCALER, REPLICAS, COLLECTIVES, WRITES, TIMING)


@dataclass
class TraceFinding:
    code: str
    symbol: str
    level: Level
    message: str
    area: str
    ranks: list[int] = field(default_factory=list)
    where: Site | None = None
    hint: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls, problem: Problem, area: str, message: str, ranks: Any = (), where: Site | None = None,
        level: Level | None = None, **data: Any,
    ) -> TraceFinding:  # fmt: skip
        return cls(
            problem.code, problem.symbol, problem.level if level is None else level, message,
            area, sorted(set(ranks)), where, problem.fix, data,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "symbol": self.symbol,
            "level": self.level.word,
            "message": self.message,
            "area": self.area,
            "ranks": list(self.ranks),
            "where": self.where.to_json() if self.where else None,
            "hint": self.hint,
            "data": self.data,
        }

    def to_finding(self) -> Finding:
        """The report's Finding: `symbol` and `where` are its own (additive) fields."""
        return Finding(
            self.code,
            self.level,
            self.message,
            self.hint,
            list(self.ranks),
            None,
            {**self.data, "area": self.area},
            symbol=self.symbol,
            where=self.where.to_json() if self.where else None,
        )


def events_by_place(
    records: dict[int, TraceRecord], kind: str
) -> dict[tuple[Site | None, tuple[tuple[str, str], ...]], tuple[list[int], int]]:
    """(where, the event's data as text) -> (ranks that recorded it, the largest count)."""
    out: dict[tuple[Site | None, tuple[tuple[str, str], ...]], tuple[list[int], int]] = {}
    for rank, rec in sorted(records.items()):
        for ev in rec.events:
            if ev.kind == kind:
                key = (ev.where, tuple(sorted((k, str(v)) for k, v in ev.data.items())))
                ranks, count = out.get(key, ([], 0))
                out[key] = ([*ranks, rank], max(count, ev.count))
    return out


def ranks_text(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))
