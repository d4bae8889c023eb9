"""Pure data for results: no torch, no rich, so every layer (worker, collector, renderer, tests)
can share it. Levels are numbers so that `--fail-on` is one comparison (Django's messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Level(IntEnum):
    """How bad a finding is. Numeric so thresholds are a single comparison."""

    INFO = 10
    WARN = 20
    FAIL = 30

    @property
    def word(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Level:
        return cls[text.upper()]


# Check outcomes, as they appear in the JSON contract.
PASS, WARN, FAIL, SKIP, ERROR, TIMEOUT = "pass", "warn", "fail", "skip", "error", "timeout"
CHECK_STATUSES = (PASS, WARN, FAIL, SKIP, ERROR, TIMEOUT)

# Rank states, as they appear in the JSON contract.
OK, CRASHED, HUNG, MISSING = "ok", "crashed", "hung", "missing"
RANK_STATES = (OK, CRASHED, HUNG, MISSING)


@dataclass
class Finding:
    """One problem (or note) found, tied to the ranks it concerns."""

    code: str
    level: Level
    message: str
    hint: str = ""
    ranks: list[int] = field(default_factory=list)
    host: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    symbol: str | None = None  # the catalog's readable name (pylint's habit)
    where: dict[str, Any] | None = None  # {path, line} in the user's code, when known

    @property
    def rank(self) -> int | None:
        return self.ranks[0] if len(self.ranks) == 1 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "level": self.level.word,
            "message": self.message,
            "hint": self.hint,
            "rank": self.rank,
            "ranks": list(self.ranks),
            "host": self.host,
            "data": self.data,
            "symbol": self.symbol,
            "where": self.where,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        return cls(
            code=d["code"],
            level=Level.parse(d["level"]),
            message=d["message"],
            hint=d.get("hint", ""),
            ranks=list(d.get("ranks") or ([] if d.get("rank") is None else [d["rank"]])),
            host=d.get("host"),
            data=d.get("data") or {},
            symbol=d.get("symbol"),
            where=d.get("where"),
        )


@dataclass
class Judgement:
    """What a check's `judge` returns: a one-line summary with the key number, and findings."""

    summary: str
    findings: list[Finding] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckResult:
    """One row of the report."""

    id: str
    title: str
    status: str
    summary: str
    findings: list[Finding] = field(default_factory=list)
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    duration_s: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "duration_s": self.duration_s,
            "metrics": self.metrics,
            "findings": [f.to_json() for f in self.findings],
            "ranks": {str(r): d for r, d in sorted(self.ranks.items())},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckResult:
        return cls(
            id=d["id"],
            title=d.get("title", d["id"]),
            status=d["status"],
            summary=d.get("summary", ""),
            findings=[Finding.from_json(f) for f in d.get("findings", [])],
            ranks={int(r): v for r, v in (d.get("ranks") or {}).items()},
            duration_s=d.get("duration_s"),
            metrics=d.get("metrics") or {},
        )


@dataclass
class RankState:
    """What became of one worker process."""

    rank: int
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    device: str | None = None
    state: str = MISSING
    last_check: str | None = None
    phase: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    detail: str = ""
    failed_at: float | None = None
    stack: list[str] = field(default_factory=list)  # main thread at the verdict, innermost first

    def to_json(self) -> dict[str, Any]:
        # scalars and one list of strings: a shallow copy, not asdict's deep one (16,384 at scale)
        own = self.__dict__
        if len(own) == len(self.__dataclass_fields__):
            return dict(own)
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RankState:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Report:
    """The whole answer of `ddpdoctor check`."""

    status: str
    world_size: int
    nnodes: int
    backend: str
    backend_reason: str
    duration_s: float
    checks: list[CheckResult]
    ranks: list[RankState]
    root_cause: dict[str, Any] | None = None
    launch: dict[str, Any] = field(default_factory=dict)
    hosts: list[dict[str, Any]] = field(default_factory=list)

    def findings(self) -> list[Finding]:
        return [f for c in self.checks for f in c.findings]


def status_from(findings: list[Finding]) -> str:
    """A check's status from its findings: the worst level decides."""
    worst = max((f.level for f in findings), default=None)
    if worst is None or worst < Level.WARN:
        return PASS
    return FAIL if worst >= Level.FAIL else WARN


def overall_status(statuses: list[str]) -> str:
    """The report's status: fail if any check failed, errored or timed out; else warn; else pass."""
    if any(s in (FAIL, ERROR, TIMEOUT) for s in statuses):
        return FAIL
    if WARN in statuses:
        return WARN
    return PASS


@dataclass
class World:
    """What a check's `judge` knows about the job as a whole."""

    world_size: int
    backend: str = "gloo"
    nnodes: int = 1
    hosts: dict[int, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
