"""Every fixture file states what it expects: a trailing `# DDL00N` comment on each line that
must be reported (flake8-bugbear's eval_files style). Lines without one must stay silent, and
the clean_* files must produce nothing at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddpdoctor.lint import RULES, lint_paths, lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lint"
EXPECT = re.compile(r"#.*?\b(DDL\d{3})\b")


def expected(path: Path) -> list[tuple[int, str]]:
    pairs = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        pairs.extend((lineno, code) for code in EXPECT.findall(line))
    return sorted(pairs)


# `.pyfixture`: a file that must not parse on today's Python (ruff would reject it as .py).
FILES = sorted([*FIXTURES.glob("*.py"), *FIXTURES.glob("*.pyfixture")])


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture(path: Path) -> None:
    found = sorted((f.line, f.code) for f in lint_paths([str(path)]))
    assert found == expected(path)


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("clean_")], ids=str)
def test_clean_styles_are_silent(path: Path) -> None:
    assert lint_source(path.read_text(), str(path)) == []


def test_every_rule_has_a_hit_fixture() -> None:
    hit_codes = {code for p in FILES for _, code in expected(p)}
    assert hit_codes == {r.code for r in RULES}


def test_several_clean_styles() -> None:
    assert len([p for p in FILES if p.name.startswith("clean_")]) >= 5
