"""Render lint findings: ruff-like text, the `ddpdoctor.lint/1` JSON document, and SARIF 2.1.0
for code-scanning UIs. Pure functions from findings to text or dicts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ddpdoctor import __version__
from ddpdoctor.lint.finding import LintFinding
from ddpdoctor.lint.rules import RULES

FORMATS = ("text", "json", "sarif")
LEVELS = ("fail", "warn", "info")
SARIF_LEVEL = {"fail": "error", "warn": "warning", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def counts(findings: list[LintFinding]) -> dict[str, int]:
    by_level = Counter(f.level for f in findings)
    return {"total": len(findings), **{level: by_level.get(level, 0) for level in LEVELS}}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def text(findings: list[LintFinding], files: int) -> str:
    """`path:line:col: CODE message`, an indented `hint:` line per finding and a `see:` line
    for each other place of the same mistake, then a count."""
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}")
        lines.append(f"    hint: {f.hint}")
        lines.extend(f"    see:  {r.path}:{r.line}: {r.note}" for r in f.related)
    c = counts(findings)
    if not findings:
        lines.append(f"All clean: {_plural(files, 'file')}.")
    else:
        parts = ", ".join(f"{c[level]} {level}" for level in LEVELS if c[level])
        lines.append(
            f"Found {_plural(c['total'], 'problem')} ({parts}) in {_plural(files, 'file')}."
        )
    return "\n".join(lines) + "\n"


def json_doc(findings: list[LintFinding], files: int) -> dict[str, Any]:
    from ddpdoctor.report.schema import tag

    return {
        "schema": tag("lint"),
        "findings": [f.to_json() for f in findings],
        "files": files,
        "counts": counts(findings),
    }


def sarif_doc(findings: list[LintFinding]) -> dict[str, Any]:
    rules = [
        {
            "id": r.code,
            "name": r.symbol,
            "shortDescription": {"text": r.title},
            "fullDescription": {"text": r.why},
            "help": {"text": r.fix},
            "defaultConfiguration": {"level": SARIF_LEVEL[r.level]},
        }
        for r in RULES
    ]
    index = {r.code: i for i, r in enumerate(RULES)}
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": SARIF_LEVEL[f.level],
            "message": {"text": f"{f.message}. Fix: {f.hint}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path.replace("\\", "/")},
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ],
            **({"relatedLocations": _sarif_related(f)} if f.related else {}),
        }
        for f in findings
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ddpdoctor-lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }


def _sarif_related(finding: LintFinding) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "message": {"text": r.note},
            "physicalLocation": {
                "artifactLocation": {"uri": r.path.replace("\\", "/")},
                "region": {"startLine": r.line},
            },
        }
        for i, r in enumerate(finding.related)
    ]
