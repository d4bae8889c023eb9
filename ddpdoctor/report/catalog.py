"""One catalog, four ways to find a problem: the runtime probes' codes (DDP…), node health
(DDN…), the lint rules (DDL…) and the log signatures (DDX…), gathered for `ddpdoctor problems`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddpdoctor.report.problems import Problem


def _problem(p: Problem) -> dict[str, Any]:
    return {
        "code": p.code,
        "symbol": p.symbol,
        "level": p.level.word,
        "title": p.title,
        "why": p.why,
        "fix": p.fix,
    }


def document() -> dict[str, Any]:
    from ddpdoctor.lint.rules import RULES
    from ddpdoctor.node.codes import ALL as NODE_PROBLEMS
    from ddpdoctor.report.problems import PROBLEMS
    from ddpdoctor.triage.prose import ALL_SIGNATURES

    return {
        "probes": [_problem(p) for p in PROBLEMS.values()],
        "node": [_problem(p) for p in NODE_PROBLEMS],
        "lint": [
            {
                "code": r.code,
                "symbol": r.symbol,
                "level": r.level,
                "title": r.title,
                "why": r.why,
                "fix": r.fix,
            }
            for r in RULES
        ],
        "signatures": [
            {
                "code": s.code,
                "root_cause": s.root_cause,
                "title": s.title,
                "why": s.why,
                "fix": s.fix,
                "confirm_with": s.confirm_with,
            }
            for s in ALL_SIGNATURES
        ],
    }


@dataclass
class ProblemsArgs:
    json_path: str | None = None
    ascii_only: bool = False


def run(args: ProblemsArgs) -> int:
    """`ddpdoctor problems`: the catalog as a table, or as JSON."""
    from ddpdoctor.report import render, schema

    schema.check_writable(args.json_path)
    doc = document()
    if args.json_path:
        schema.write(doc, args.json_path)
        if args.json_path == "-":
            return 0
    render.catalog(doc, ascii_only=args.ascii_only)
    return 0
