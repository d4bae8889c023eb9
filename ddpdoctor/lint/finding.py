"""One lint finding as a plain value: checks return these, tests compare them, renderers print
them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.lint.rules import RULES_BY_CODE


@dataclass(frozen=True, order=True)
class Related:
    """The other end of one mistake: a DistributedSampler's finding names the DataLoader it
    feeds (and a loader got from a helper, the helper's sampler), as SARIF relatedLocations
    do. Either end is where a reader may look first."""

    path: str
    line: int
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "note": self.note}


@dataclass(frozen=True, order=True)
class LintFinding:
    path: str
    line: int
    col: int  # 1-based, like ruff and SARIF
    code: str
    message: str
    # Not part of a finding's identity: two checks that say the same thing are one finding.
    related: tuple[Related, ...] = field(default=(), compare=False)
    # A level below the rule's, where the check cannot see what decides (a checkpoint's
    # contents): None is the rule's own level.
    severity: str | None = field(default=None, compare=False)

    @property
    def symbol(self) -> str:
        return RULES_BY_CODE[self.code].symbol

    @property
    def level(self) -> str:
        return self.severity or RULES_BY_CODE[self.code].level

    @property
    def hint(self) -> str:
        return RULES_BY_CODE[self.code].fix

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "symbol": self.symbol,
            "level": self.level,
            "message": self.message,
            "hint": self.hint,
            **({"related": [r.to_json() for r in self.related]} if self.related else {}),
        }


@dataclass(frozen=True)
class Hit:
    """What a check reports: the node to point at and the message; the engine adds the path."""

    node: ast.AST
    code: str
    message: str
    # (path, line, note): path None for this file (see Related)
    related: tuple[tuple[str | None, int, str], ...] = ()
    level: str | None = None  # see LintFinding.severity
