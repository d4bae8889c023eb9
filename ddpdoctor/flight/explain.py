"""`ddpdoctor explain DUMP_DIR|DUMP_FILE|RAS_TEXT`: flight-recorder dumps (or NCCL RAS text) from any
job → the same findings `check` and `run` print at a hang, as `ddpdoctor.flight/1`. Exit 0 when
something is wrong (a diagnosis), 1 when every rank is in step, 2 for unreadable or refused input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError
from ddpdoctor.flight import analysis, ras
from ddpdoctor.flight.dumps import looks_like_dump, read_path
from ddpdoctor.report import schema
from ddpdoctor.report.model import Finding, Level

RAS_MAX_BYTES = 8 << 20


def wants(path: str) -> bool:
    """A folder, a flight-recorder dump or RAS text: explain hands it to us, not the log reader."""
    p = Path(path)
    if p.is_dir():
        return True
    if not p.is_file():
        return False
    return looks_like_dump(p) or _ras_text(p) is not None


def _ras_text(p: Path) -> str | None:
    try:
        with open(p, "rb") as fh:
            text = fh.read(RAS_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    return text if ras.looks_like_ras(text) else None


def document(path: str) -> dict[str, Any]:
    """The analysis of `path`; UsageError (exit 2, one line) when nothing in it can be read."""
    p = Path(path)
    text = _ras_text(p) if p.is_file() and not looks_like_dump(p) else None
    if text is not None:
        blocks = ras.parse(text)
        found = ras.findings(blocks)
        return _doc(path, "ncclras", found, {"communicators": len(blocks)}, [])
    try:
        folder = read_path(p)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not folder.dumps:
        if folder.refused:
            raise UsageError(folder.refused[0])
        raise UsageError(f"no flight-recorder dump in {path} (JSON or pickle, one file per rank)")
    if p.is_file() and folder.refused:
        raise UsageError(folder.refused[0])
    flight = analysis.analyze(folder.dumps)
    who = {d.rank: _label(d.rank, d.host, d.pid) for d in folder.dumps}
    return _doc(
        path, "flight-recorder", flight.findings(None, who), flight.to_json(), folder.refused
    )


def _label(rank: int, host: str | None, pid: int | None) -> str:
    return f"rank {rank} ({host}, pid {pid})" if host and pid else f"rank {rank}"


def _doc(
    path: str, kind: str, found: list[Finding], analysis_json: dict[str, Any], refused: list[str]
) -> dict[str, Any]:
    return {
        "schema": schema.tag("flight"),
        "input": {"path": path, "kind": kind, "refused": refused},
        "status": "fail" if any(f.level >= Level.FAIL for f in found) else "pass",
        "findings": [f.to_json() for f in found],
        "analysis": analysis_json,
    }


def render(doc: dict[str, Any], ascii_only: bool) -> str:
    marks = {"fail": "x" if ascii_only else "✗", "warn": "!", "info": "i" if ascii_only else "·"}
    inp = doc["input"]
    a = doc["analysis"]
    if inp["kind"] == "ncclras":
        head = f"ddpdoctor explain {inp['path']} · NCCL RAS · {a['communicators']} flagged communicator(s)"
    else:
        groups = len(a["groups"])
        head = (
            f"ddpdoctor explain {inp['path']} · flight recorder · dumps of "
            f"{len(a['ranks_with_dump'])} rank(s), {groups} process group(s)"
        )
    lines = [head, ""]
    for f in doc["findings"]:
        lines.append(f"[{marks[f['level']]}] {f['code']} {f['message']}")
        lines.append(f"    {'->' if ascii_only else '→'} {f['hint']}")
    for r in inp["refused"]:
        lines.append(f"[{marks['warn']}] not read: {r}")
    if not doc["findings"]:
        lines.append("Nothing flagged.")
    return "\n".join(lines) + "\n"


def explain(path: str, json_path: str | None, ascii_only: bool) -> int:
    import sys

    doc = document(path)
    if json_path:
        schema.write(doc, json_path)
        if json_path == "-":
            return EXIT_OK if doc["status"] == "fail" else EXIT_PROBLEMS
    sys.stdout.write(render(doc, ascii_only))
    return EXIT_OK if doc["status"] == "fail" else EXIT_PROBLEMS
