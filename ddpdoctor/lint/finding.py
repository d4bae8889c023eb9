"""One lint finding as a plain value: checks return these, tests compare them, renderers print
them."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ddpdoctor.lint.rules import RULES_BY_CODE


@dataclass(frozen=True, order=True)
class LintFinding:
    path: str
    line: int
    col: int  # 1-based, like ruff and SARIF
    code: str
    message: str

    @property
    def symbol(self) -> str:
        return RULES_BY_CODE[self.code].symbol

    @property
    def level(self) -> str:
        return RULES_BY_CODE[self.code].level

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
        }


@dataclass(frozen=True)
class Hit:
    """What a check reports: the node to point at and the message; the engine adds the path."""

    node: ast.AST
    code: str
    message: str
