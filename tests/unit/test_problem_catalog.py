"""The probe catalog is a set of constants: every row is emitted somewhere in the code (a typo is
an import-time error, not a branch that fails when it finally runs), or is marked reserved."""

from __future__ import annotations

import ast
from pathlib import Path

import ddpdoctor
from ddpdoctor.report import problems
from ddpdoctor.report.problems import PROBLEMS, RESERVED, Problem

ROOT = Path(ddpdoctor.__file__).parent
SOURCES = [p for p in [*ROOT.rglob("*.py"), *(ROOT.parent / "checks").glob("*.py")]]


def referenced_constants() -> set[str]:
    """Names used as `problems.NAME`, or imported from ddpdoctor.report.problems."""
    used: set[str] = set()
    for path in SOURCES:
        if path.name == "problems.py" and path.parent.name == "report":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "problems"
            ):
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module == "ddpdoctor.report.problems":
                used |= {a.name for a in node.names}
    return used


def constants() -> dict[str, Problem]:
    return {k: v for k, v in vars(problems).items() if isinstance(v, Problem)}


def test_every_row_is_emitted_somewhere_or_reserved() -> None:
    used = referenced_constants()
    unused = sorted(name for name in constants() if name not in used and name not in RESERVED)
    assert unused == []
    assert not (RESERVED & used), "a reserved row is emitted: drop it from RESERVED"


def test_codes_and_symbols_are_unique_and_match_the_constant_names() -> None:
    rows = constants()
    assert len(PROBLEMS) == len(rows) == len({p.symbol for p in rows.values()})
    for name, p in rows.items():
        assert name == p.symbol.upper().replace("-", "_")
        assert p.code.startswith("DDP") and p.fix and p.why
