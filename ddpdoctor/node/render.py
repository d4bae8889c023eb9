"""Text for `ddpdoctor node`: the look of `check` (a mark per row, findings with their fix, a
count at the end), for one node and for the collected many."""

from __future__ import annotations

from rich.markup import escape

from ddpdoctor.report import render as shared
from ddpdoctor.report.model import CheckResult
from ddpdoctor.report.render import Out, make_console


def node(
    name: str,
    machine: str | None,
    rows: list[CheckResult],
    status: str,
    seconds: float,
    ascii_only: bool = False,
    details: list[str] | None = None,
) -> None:
    out = Out(make_console(ascii_only), ascii_only)
    kind = f" · machine type {escape(machine)}" if machine else ""
    out(f"[bold]ddpdoctor node[/] · {escape(name)}{kind} · {seconds:.1f} s")
    out()
    shared.rows(rows, out)
    for line in details or []:
        out(f"[dim]{escape(line)}[/]")
    out()
    shared.count_line(rows, status, seconds, out)


def cluster(
    folder: str,
    rows: list[CheckResult],
    status: str,
    exclude: str,
    exclude_file: str | None,
    ascii_only: bool = False,
) -> None:
    out = Out(make_console(ascii_only), ascii_only)
    out(f"[bold]ddpdoctor node --collect[/] · {escape(folder)}")
    out()
    shared.rows(rows, out)
    out()
    shared.count_line(rows, status, None, out)
    exclude_line(
        out, exclude, exclude_file, "every node reported, agrees with its peers and passed"
    )


def exclude_line(out: Out, exclude: str, exclude_file: str | None, none_why: str) -> None:
    """The nodes to leave out, as `srun --exclude` takes them (and where they were written)."""
    if exclude:
        where = f" (written to {escape(exclude_file)})" if exclude_file else ""
        out(f"Exclude: [bold]{escape(exclude)}[/]{where} — srun --exclude={escape(exclude)} ...")
    else:
        where = f" ({escape(exclude_file)} written empty)" if exclude_file else ""
        out(f"Exclude: none{where}: {none_why}.")


def exclude_after_run(exclude: list[str], exclude_file: str | None, ascii_only: bool) -> None:
    """The line `check` and `bench-allreduce` print under a multi-node report."""
    from ddpdoctor.node.hostlist import compress_hostlist

    out = Out(make_console(ascii_only), ascii_only)
    exclude_line(
        out,
        compress_hostlist(exclude),
        exclude_file,
        "no node was found keeping the job from forming",
    )
