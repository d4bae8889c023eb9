"""The JSON documents of `explain` (ddpdoctor.explain/1) and `env` (ddpdoctor.env/1).

Text, Markdown and JSON are renderings of these same dicts, so they cannot disagree; every
evidence line passes through `redact_text` here, before any renderer sees it.
"""

from __future__ import annotations

from typing import Any

from ddpdoctor.node.redact import redact_text
from ddpdoctor.report.schema import tag
from ddpdoctor.triage.matcher import Diagnosis, Match
from ddpdoctor.triage.signatures import CAUSE, NO_MATCH_ADVICE


def _match(m: Match) -> dict[str, Any]:
    s = m.signature
    return {
        "root_cause": s.root_cause,
        "code": s.code,
        "title": s.title,
        "line": m.first_line,
        "evidence": [
            {"line": e.line, "rank": e.rank, "text": redact_text(e.text)} for e in m.evidence
        ],
        "why": s.why,
        "fix": s.fix,
        "confirm_with": s.confirm_with,
        "ranks": sorted(m.ranks),
        "count": m.count,
        "kind": "cause" if s.tier == CAUSE else "symptom",
        "named_by_torchrun": m.in_root_block,
    }


def explain_doc(d: Diagnosis, source: str) -> dict[str, Any]:
    return {
        "schema": tag("explain"),
        "source": source,
        "lines_read": d.lines_read,
        "bytes_read": d.bytes_read,
        "engine": d.engine,
        "root_cause_rank": d.root_cause_rank,
        "matches": [_match(m) for m in d.matches],
        "advice": None if d.matches else NO_MATCH_ADVICE,
    }


def env_doc(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {"schema": tag("env"), **snapshot}
