"""`ddpdoctor lint PATH...`: parse the options, lint, render, exit 0 (clean), 1 (findings) or
2 (usage error, raised as UsageError and worded by the CLI)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from ddpdoctor.options import DebugOpt


def check_output(path: str | None) -> None:
    """Try the report path before any work, so one that cannot be written (`/proc/x`, a folder,
    no permission) is a usage error at once, not a crash after linting. Leaves no file behind."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a folder")
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
    if not existed:
        os.unlink(path)


def write_output(path: str | None, body: str) -> None:
    if path is None or path == "-":
        sys.stdout.write(body)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(body)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None


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
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            metavar="DIR",
            help="The project whose imports are followed (default: the nearest folder above "
            "the paths with pyproject.toml or .git, else their common folder).",
        ),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Find DDP mistakes in training scripts without running them (pure static analysis)."""
    from ddpdoctor.lint import report
    from ddpdoctor.lint.engine import lint_files
    from ddpdoctor.lint.files import collect
    from ddpdoctor.lint.project import find_root
    from ddpdoctor.lint.rules import parse_codes
    from ddpdoctor.schema import dumps

    if output_format not in report.FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(report.FORMATS)}, not {output_format!r}"
        )
    selected = parse_codes(select, "--select")
    ignored = parse_codes(ignore, "--ignore") or set()
    if root is not None and not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a folder")
    check_output(output)
    collected = collect(paths)
    for path, why in collected.skipped:
        print(f"ddpdoctor: skipped {path}: {why}", file=sys.stderr)
    files = collected.files
    findings = [
        f
        for f in lint_files(files, root or find_root(paths))
        if (selected is None or f.code in selected) and f.code not in ignored
    ]
    if output_format == "json":
        body = dumps(report.json_doc(findings, len(files))) + "\n"
    elif output_format == "sarif":
        body = dumps(report.sarif_doc(findings)) + "\n"
    else:
        body = report.text(findings, len(files))
    write_output(output, body)
    raise typer.Exit(EXIT_PROBLEMS if findings else EXIT_OK)
