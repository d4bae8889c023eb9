"""`ddpdoctor lint PATH...`: LintArgs → run → exit 0 (clean), 1 (findings) or 2 (usage error,
raised as UsageError and worded by the CLI)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError


@dataclass
class LintArgs:
    paths: list[str] = field(default_factory=list)
    output_format: str = "text"
    select: str | None = None
    ignore: str | None = None
    output: str | None = None
    root: str | None = None


def run(args: LintArgs) -> int:
    """Find DDP mistakes in training scripts without running them (pure static analysis)."""
    from ddpdoctor.lint import report
    from ddpdoctor.lint.engine import lint_files
    from ddpdoctor.lint.files import collect
    from ddpdoctor.lint.project import find_root
    from ddpdoctor.lint.rules import parse_codes
    from ddpdoctor.report import schema

    paths, output_format, output, root = args.paths, args.output_format, args.output, args.root
    if output_format not in report.FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(report.FORMATS)}, not {output_format!r}"
        )
    selected = parse_codes(args.select, "--select")
    ignored = parse_codes(args.ignore, "--ignore") or set()
    if root is not None and not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a folder")
    schema.check_writable(output)
    collected = collect(paths)
    for path, why in collected.skipped:
        print(f"ddpdoctor: skipped {path}: {why}", file=sys.stderr)
    files = collected.files
    findings = [
        f
        for f in lint_files(files, root or find_root(paths), collected.named)
        if (selected is None or f.code in selected) and f.code not in ignored
    ]
    if output_format == "json":
        body = schema.dumps(report.json_doc(findings, len(files))) + "\n"
    elif output_format == "sarif":
        body = schema.dumps(report.sarif_doc(findings)) + "\n"
    else:
        body = report.text(findings, len(files))
    if output is None or output == "-":
        sys.stdout.write(body)
        sys.stdout.flush()
    else:
        failed = schema.try_write(lambda: schema.write_text(output, body), output)
        if failed:
            raise UsageError(failed)
    return EXIT_PROBLEMS if findings else EXIT_OK
