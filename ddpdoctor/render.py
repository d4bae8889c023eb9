"""Terminal rendering with rich: the only core module that imports it. Data classes carry no
colours or glyphs; marks and colours are decided here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ddpdoctor.problems import Problem


def problems_table(problems: list[Problem], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="ddpdoctor problem codes", show_lines=False)
    for col in ("code", "symbol", "level", "title", "fix"):
        table.add_column(col, overflow="fold")
    for p in problems:
        table.add_row(p.code, p.symbol, p.level.word, p.title, p.fix)
    console.print(table)
