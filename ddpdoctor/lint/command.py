"""`ddpdoctor lint PATH...`: parse the options, lint, render, exit 0 (clean), 1 (findings) or
2 (usage error, raised as UsageError and worded by the CLI)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from ddpdoctor.options import DebugOpt


def lint(
    paths: Annotated[
        list[str],
        typer.Argument(metavar="PATH", help="Python files or folders to lint.", show_default=False),
    ],
    output_format: Annotated[
        str, typer.Option("--format", "-f", metavar="FORMAT", help="text | json | sarif.")
    ] = "text",
    select: Annotated[
        str | None,
        typer.Option(
            "--select",
            metavar="CODES",
            help="Only these rule codes (comma-separated; prefixes work).",
        ),
    ] = None,
    ignore: Annotated[
        str | None,
        typer.Option("--ignore", metavar="CODES", help="Skip these rule codes (comma-separated)."),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="PATH", help="Write the report here, not stdout."),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Find DDP mistakes in training scripts without running them (pure static analysis)."""
    from ddpdoctor.lint import report
    from ddpdoctor.lint.engine import lint_files
    from ddpdoctor.lint.files import collect_files
    from ddpdoctor.lint.rules import parse_codes
    from ddpdoctor.report.schema import check_writable, dumps

    if output_format not in report.FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(report.FORMATS)}, not {output_format!r}"
        )
    selected = parse_codes(select, "--select")
    ignored = parse_codes(ignore, "--ignore") or set()
    check_writable(output)
    files = collect_files(paths)
    findings = [
        f
        for f in lint_files(files)
        if (selected is None or f.code in selected) and f.code not in ignored
    ]
    if output_format == "json":
        body = dumps(report.json_doc(findings, len(files))) + "\n"
    elif output_format == "sarif":
        body = dumps(report.sarif_doc(findings)) + "\n"
    else:
        body = report.text(findings, len(files))
    if output and output != "-":
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(body)
    else:
        sys.stdout.write(body)
        sys.stdout.flush()
    raise typer.Exit(EXIT_PROBLEMS if findings else EXIT_OK)
