"""The ranks' flight-recorder dumps in a run folder → findings and a JSON summary for the report,
each named rank with its host, pid and the line its stack was at (ddpdoctor/flight/ does the
analysis; this only joins it to the rank states)."""

from __future__ import annotations

from typing import Any

from ddpdoctor.flight import analysis
from ddpdoctor.flight.dumps import DumpError, read_file
from ddpdoctor.report.model import Finding, RankState
from ddpdoctor.runfiles import RunFolder


def judge(
    folder: RunFolder, world_size: int, states: list[RankState]
) -> tuple[list[Finding], dict[str, Any] | None]:
    """Findings and `launch.flight` for the report; nothing when no rank left a dump."""
    dumps = []
    for path in sorted(folder.path.glob("fr-*.json")):
        try:
            dumps.append(read_file(path))
        except DumpError:
            continue
    if not dumps:
        return [], None
    flight = analysis.analyze(dumps, world_size)
    who = {
        s.rank: f"rank {s.rank} ({s.host}, pid {s.pid})" if s.host and s.pid else f"rank {s.rank}"
        for s in states
    }
    where = {s.rank: user_frames(s.stack) for s in states if s.stack}
    return flight.findings(where, who), flight.to_json()


def user_frames(stack: list[str]) -> list[str]:
    """A rank's frames ("func (path:line)", innermost first) as "path:line (func)", the user's
    own files only when there are any (not ddpdoctor's tracer, not a library)."""
    from ddpdoctor.trace.sites import is_user_file

    out = []
    for frame in stack:
        func, _, rest = frame.partition(" (")
        path = rest.rstrip(")").rpartition(":")[0]
        out.append((is_user_file(path), f"{rest.rstrip(')')} ({func})"))
    mine = [text for user, text in out if user]
    return mine or [text for _, text in out]
