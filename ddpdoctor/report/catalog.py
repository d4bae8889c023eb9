"""One catalog, three ways to find a problem: the runtime probes' codes (DDP…), the lint rules
(DDL…) and the log signatures (DDX…), gathered for `ddpdoctor problems`."""

from __future__ import annotations

from typing import Any


def document() -> dict[str, Any]:
    from ddpdoctor.lint.rules import RULES
    from ddpdoctor.report.problems import PROBLEMS
    from ddpdoctor.triage.signatures import SIGNATURES

    return {
        "probes": [
            {
                "code": p.code,
                "symbol": p.symbol,
                "level": p.level.word,
                "title": p.title,
                "why": p.why,
                "fix": p.fix,
            }
            for p in PROBLEMS.values()
        ],
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
            for s in SIGNATURES
        ],
    }
