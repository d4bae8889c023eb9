"""The parent side of `ddpdoctor run`: the ranks' trace records, their heartbeats and what the
launcher saw → one Report in the look of `check`, a row per area (launch and group, devices,
data, GradScaler, replicas, collectives, writes, timing). Pure data in, pure data out; no torch.

Rank states come from the same run-folder contract as `check` (every traced rank keeps a
heartbeat and a rank document), so a crash, a hang, a kill or Ctrl-C reads as it does there;
the judges add what only a run can see, each finding at the user's own file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpdoctor.job import collect, rank_states
from ddpdoctor.job import flight as job_flight
from ddpdoctor.job import stacks as job_stacks
from ddpdoctor.job.launch import LaunchOutcome, tail_text
from ddpdoctor.report.model import (
    OK,
    CheckResult,
    Finding,
    RankState,
    Report,
    overall_status,
    status_from,
)
from ddpdoctor.runfiles import JobSpec, RunFolder
from ddpdoctor.trace.judges import AREAS, TraceFinding, judge, summarize
from ddpdoctor.trace.record import TraceRecord, read_records

TITLES = {
    "group": "Launch and process group",
    "devices": "Devices",
    "data": "Data: samplers and batches",
    "gradscaler": "GradScaler",
    "replicas": "Replicas",
    "collectives": "Collectives",
    "writes": "Writes",
    "timing": "Timing",
}


def assemble(
    run_dir: Path,
    spec: JobSpec,
    outcome: LaunchOutcome | None,
    stacks: dict[int, str] | None = None,
    launch_problems: list[Finding] | None = None,
) -> Report:
    folder = RunFolder(run_dir, spec.nonce or None)
    records = {r: rec for r, rec in read_records(run_dir).items() if rec.role == "rank"}
    files = collect.read(run_dir, spec.nonce)
    world = spec.world_size or len(records) or 1
    states = rank_states.assess(world, files.docs, files.beats, outcome)
    rank_states.explain_crashes(states, lambda r: tail_text(folder.log_file(r), 8000))
    job_stacks.attach(states, stacks or {})
    exit_codes = dict(outcome.exitcodes) if outcome else {}
    findings = judge(records, world, exit_codes=exit_codes, stacks=stacks or {})
    _locate(states, findings)
    summaries = summarize(records)
    rows = [_row(area, summaries, records, findings) for area in AREAS]
    failed = [s for s in states if s.state != OK]
    root = (
        None if outcome is not None and outcome.launcher_killed else rank_states.root_cause(states)
    )
    if failed and not _explained(failed, findings):
        for st in failed:  # a rank the judges said nothing about: its state is the finding
            rows[0].findings.insert(0, rank_states.rank_finding(st, [], len(failed) > 1))
    if launch_problems:
        rows[0].findings[:0] = launch_problems
    rows[0].status = status_from(rows[0].findings)
    flight_found, flight_json = job_flight.judge(folder, world, states)
    if flight_found:
        collectives = next(r for r in rows if r.id == "collectives")
        collectives.findings.extend(flight_found)
        collectives.status = status_from(collectives.findings)
    return Report(
        status=overall_status([r.status for r in rows]),
        world_size=world,
        nnodes=spec.nnodes,
        backend=spec.backend,
        backend_reason=spec.backend_reason,
        duration_s=round(outcome.duration_s if outcome else 0.0, 3),
        checks=rows,
        ranks=states,
        root_cause=_root(root, findings, launch_problems),
        launch={
            **collect.launch_json(run_dir, spec, outcome, node_view=False),
            "mode": "run",
            "script": spec.options.get("target", []),
            "steps": max((r.steps for r in records.values()), default=0),
        }
        | ({"flight": flight_json} if flight_json else {}),
        hosts=collect.hosts_table(states, {}),
    )


def _explained(failed: list[RankState], findings: list[TraceFinding]) -> bool:
    """The group judge names crashed, stopped and unfinished ranks itself (DDR102-DDR104)."""
    named = {r for f in findings if f.area == "group" and f.level >= 30 for r in f.ranks}
    return all(s.rank in named for s in failed)


def _locate(states: list[RankState], findings: list[TraceFinding]) -> None:
    """A failed rank's state says where in the user's code it stopped (from its finding)."""
    where = {}
    for f in findings:
        if f.where is not None and f.code in ("DDR102", "DDR104"):
            for r in f.ranks:
                where.setdefault(r, f"{f.where.path}:{f.where.line}")
    for st in states:
        if st.rank in where:
            st.detail = f"{st.detail}; at {where[st.rank]}" if st.detail else f"at {where[st.rank]}"


def _root(
    root: RankState | None, findings: list[TraceFinding], launch_problems: list[Finding] | None
) -> dict[str, Any] | None:
    if launch_problems:
        return {"rank": None, "state": None, "check": "group", "host": None,
                "code": launch_problems[0].code, "message": launch_problems[0].message}  # fmt: skip
    if root is None:
        return None
    out: dict[str, Any] = {
        "rank": root.rank,
        "state": root.state,
        "check": root.last_check,
        "host": root.host,
        "message": f"rank {root.rank} {root.state}" + (f" — {root.detail}" if root.detail else ""),
    }
    first = next((f for f in findings if root.rank in f.ranks and f.where is not None), None)
    if first is not None:
        out["where"] = first.where.to_json()
    return out


def _row(
    area: str, summaries: dict[str, str], records: dict[int, TraceRecord], found: list[TraceFinding]
) -> CheckResult:
    mine = [f.to_finding() for f in found if f.area == area]
    status = status_from(mine) if records else "skip"
    return CheckResult(area, TITLES[area], status, summaries[area], mine)
