"""The JSON documents of `explain` (ddpdoctor.explain/1) and `env` (ddpdoctor.env/1).

Text, Markdown and JSON are renderings of these same dicts, so they cannot disagree; every
evidence line passes through `redact_text` here, before any renderer sees it.
"""

from __future__ import annotations

from typing import Any

from ddpdoctor.node.redact import redact_text
from ddpdoctor.report.schema import tag
from ddpdoctor.triage.lines import shown
from ddpdoctor.triage.matcher import CauseCandidate, Diagnosis, Match
from ddpdoctor.triage.next_steps import NEXT_STEPS
from ddpdoctor.triage.signatures import CAUSE, NO_MATCH_ADVICE, PROSE

TOP_CANDIDATES = 3


def _match(m: Match) -> dict[str, Any]:
    s = m.signature
    return {
        "root_cause": s.root_cause,
        "code": s.code,
        "title": s.title,
        "line": m.first_line,
        "evidence": [
            {"line": e.line, "rank": e.rank, "text": shown(redact_text(e.text))} for e in m.evidence
        ],
        "why": s.why,
        "fix": s.fix,
        "confirm_with": s.confirm_with,
        "ranks": sorted(m.ranks),
        "count": m.count,
        "kind": "cause" if s.tier == CAUSE else "prose" if s.tier == PROSE else "symptom",
        "named_by_torchrun": m.in_root_block,
        "weight": m.weight,
    }


def _candidate(c: CauseCandidate) -> dict[str, Any]:
    steps = NEXT_STEPS[c.root_cause]
    return {
        "root_cause": c.root_cause,
        "confidence": c.confidence,
        "score": c.score,
        "diagnosis": c.diagnosis,
        "why": [redact_text(w) for w in c.why],
        "codes": [m.signature.code for m in c.matches],
        "next": {"run": list(steps.run), "set": list(steps.set)},
    }


def explain_doc(d: Diagnosis, source: str) -> dict[str, Any]:
    cands = [_candidate(c) for c in d.candidates[:TOP_CANDIDATES]]
    return {
        "schema": tag("explain"),
        "source": source,
        "lines_read": d.lines_read,
        "bytes_read": d.bytes_read,
        "engine": d.engine,
        "root_cause_rank": d.root_cause_rank,
        "matches": [_match(m) for m in d.matches],
        "candidates": cands,
        "confidence": cands[0]["confidence"] if cands and d.matches else 0.0,
        "input": {
            "prose_lines": d.prose_lines,
            "long_lines_cut": d.long_lines_cut,
            "cut_at_bytes": d.cut_at_bytes,
        },
        "advice": None if d.matches else NO_MATCH_ADVICE,
    }


def env_doc(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {"schema": tag("env"), **snapshot}
