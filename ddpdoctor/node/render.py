"""Text for `ddpdoctor node`: the look of `check` (a mark per row, findings with their fix, a
count at the end), for one node and for the collected many."""

from __future__ import annotations

from rich.markup import escape

from ddpdoctor.report.model import CheckResult
from ddpdoctor.report.ranks import plural
from ddpdoctor.report.render import LEVEL_MARKS, MARKS, _mark, _Out, make_console


def _rows(rows: list[CheckResult], out: _Out, ascii_only: bool) -> None:
    arrow = "->" if ascii_only else "→"
    for r in rows:
        out(
            f"{_mark(MARKS, r.status, ascii_only)} [bold]{escape(r.title)}[/] — {escape(r.summary)}"
        )
        for f in r.findings:
            out(
                f"    {_mark(LEVEL_MARKS, f.level.word, ascii_only)} [bold]{f.code}[/] {escape(f.message)}",
                soft_wrap=False,
            )
            if f.hint:
                out(f"        [dim]{arrow} {escape(f.hint)}[/]")


def _count_line(rows: list[CheckResult], status: str, seconds: float | None, out: _Out) -> None:
    counts = {"fail": 0, "warn": 0, "info": 0}
    for r in rows:
        for f in r.findings:
            counts[f.level.word] += 1
    colour = {"pass": "green", "warn": "yellow"}.get(status, "red")
    word = {"pass": "No problems", "warn": "Warnings only"}.get(status, "Problems found")
    took = f" ({seconds:.1f} s)" if seconds is not None else ""
    out(
        f"[{colour} bold]{word}[/]: {plural(counts['fail'], 'failure')}, "
        f"{plural(counts['warn'], 'warning')}, {plural(counts['info'], 'note')} in "
        f"{plural(len(rows), 'check')}{took}."
    )


def node(
    name: str,
    machine: str | None,
    rows: list[CheckResult],
    status: str,
    seconds: float,
    ascii_only: bool = False,
    details: list[str] | None = None,
) -> None:
    out = _Out(make_console(ascii_only), ascii_only)
    kind = f" · machine type {escape(machine)}" if machine else ""
    out(f"[bold]ddpdoctor node[/] · {escape(name)}{kind} · {seconds:.1f} s")
    out()
    _rows(rows, out, ascii_only)
    for line in details or []:
        out(f"[dim]{escape(line)}[/]")
    out()
    _count_line(rows, status, seconds, out)


def cluster(
    folder: str,
    rows: list[CheckResult],
    status: str,
    exclude: str,
    exclude_file: str | None,
    ascii_only: bool = False,
) -> None:
    out = _Out(make_console(ascii_only), ascii_only)
    out(f"[bold]ddpdoctor node --collect[/] · {escape(folder)}")
    out()
    _rows(rows, out, ascii_only)
    out()
    _count_line(rows, status, None, out)
    if exclude:
        where = f" (written to {escape(exclude_file)})" if exclude_file else ""
        out(f"Exclude: [bold]{escape(exclude)}[/]{where} — srun --exclude={escape(exclude)} ...")
    else:
        out("Exclude: none: every node reported, agrees with its peers and passed.")
