"""The parent side of `ddpdoctor run`: the ranks' trace records, their heartbeats and what the
launcher saw → one Report in the look of `check`, a row per area (launch and group, devices,
data, GradScaler, replicas, collectives, writes, timing). Pure data in, pure data out; no torch.

Rank states come from the same run-folder contract as `check` (every traced rank keeps a
heartbeat and a rank document), so a crash, a hang, a kill or Ctrl-C reads as it does there;
the judges add what only a run can see, each finding at the user's own file:line."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ddpdoctor.job import collect, rank_states
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
from ddpdoctor.report.ranks import plural, ranks_txt
from ddpdoctor.runfiles import JobSpec, RunFolder
from ddpdoctor.trace.judges import AREAS, TraceFinding, judge
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
    exit_codes = dict(outcome.exitcodes) if outcome else {}
    findings = judge(records, world, exit_codes=exit_codes, stacks=stacks or {})
    _locate(states, findings)
    rows = [_row(area, records, findings) for area in AREAS]
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
        },
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


def _row(area: str, records: dict[int, TraceRecord], findings: list[TraceFinding]) -> CheckResult:
    mine = [f.to_finding() for f in findings if f.area == area]
    summary = SUMMARIES[area](records) if records else "no rank recorded anything"
    status = status_from(mine) if records else "skip"
    return CheckResult(area, TITLES[area], status, summary, mine)


def _group(records: dict[int, TraceRecord]) -> str:
    backends = sorted({r.backend for r in records.values() if r.backend})
    steps = sorted({r.steps for r in records.values()})
    ends = sorted({r.exit.kind for r in records.values()})
    took = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
    return (
        f"{'/'.join(backends) or 'no process group'}, {plural(len(records), 'rank')}, "
        f"{took} optimizer steps, ended: {', '.join(ends)}"
    )


def _devices(records: dict[int, TraceRecord]) -> str:
    built = [e for r in records.values() for e in r.events if e.kind == "ddp"]
    if not built:
        return "no DistributedDataParallel built"
    devices = sorted({str(d) for e in built for d in (e.data.get("param_devices") or [])})
    return f"DDP built {plural(len(built), 'time')}" + (
        f", parameters on {', '.join(devices)}" if devices else ""
    )


def _data(records: dict[int, TraceRecord]) -> str:
    passes = [p for r in records.values() for p in r.passes]
    if not passes:
        return "no DataLoader iterated"
    loaders = len({p.loader for p in passes})
    per_rank = {r: sum(p.batches for p in rec.passes) for r, rec in records.items()}
    dist = sum(1 for p in passes if p.distributed)
    kind = f"{dist} of {len(passes)} passes sharded by a DistributedSampler"
    lo, hi = min(per_rank.values()), max(per_rank.values())
    return (
        f"{plural(loaders, 'loader')}, {kind}, {lo if lo == hi else f'{lo}-{hi}'} batches per rank"
    )


def _scaler(records: dict[int, TraceRecord]) -> str:
    made = [e for r in records.values() for e in r.events if e.kind == "scaler-created"]
    if not made:
        return "no GradScaler"
    last = [r.scales[max(r.scales)] for r in records.values() if r.scales]
    scale = f", final scale {last[0]:g}" if last and len(set(last)) == 1 else ""
    skipped = sum(r.skipped_count for r in records.values())
    return f"a GradScaler on every rank{scale}, {plural(skipped, 'skipped step')} in all"


def _replicas(records: dict[int, TraceRecord]) -> str:
    counts = {len(r.fingerprints) for r in records.values()}
    n = min(counts) if counts else 0
    if not n:
        return "no fingerprint taken (too few steps, or --fingerprint-every 0)"
    names = max((len(r.fingerprint_names) for r in records.values()), default=0)
    return f"{plural(n, 'fingerprint')} of {plural(names, 'tensor')} compared across ranks"


def _collectives(records: dict[int, TraceRecord]) -> str:
    counts = sorted({r.collective_count for r in records.values()})
    if counts == [0]:
        return "no collective called directly by the script"
    same = len({r.collective_digest for r in records.values()}) == 1
    n = counts[0] if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{n} direct collectives per rank, {'the same sequence on every rank' if same else 'sequences differ'}"


def _writes(records: dict[int, TraceRecord]) -> str:
    paths = {w.path for r in records.values() for w in r.writes}
    writers = {r for r, rec in records.items() if rec.writes}
    if not paths:
        return "no file written by the script"
    return f"{plural(len(paths), 'path')} written, by {ranks_txt(writers)}"


def _timing(records: dict[int, TraceRecord]) -> str:
    steps = [s for r in records.values() for s in r.step_s]
    if not steps:
        return "no optimizer step timed"
    data = [s for r in records.values() for s in r.data_s]
    wait = sum(data) / sum(steps) if sum(steps) else 0.0
    return f"median step {statistics.median(steps) * 1e3:.1f} ms, {wait:.0%} of it waiting for data"


SUMMARIES = {
    "group": _group,
    "devices": _devices,
    "data": _data,
    "gradscaler": _scaler,
    "replicas": _replicas,
    "collectives": _collectives,
    "writes": _writes,
    "timing": _timing,
}
