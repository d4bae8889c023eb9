"""Rank files + rank 0's gathered results + what the launcher saw → one Report.

Judging happens here, from data, so the same code serves every ending: all ranks finished, a rank
crashed, a rank hung and was killed, or rank 0 itself died (then its gathered file is missing and
the local rank files carry the story). Collectors never raise on bad or missing files."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpdoctor import registry
from ddpdoctor.job import flight, known_errors, rank_states, stacks
from ddpdoctor.job.launch import LaunchOutcome, tail_text
from ddpdoctor.report import problems, schema
from ddpdoctor.report.model import (
    ERROR,
    MISSING,
    OK,
    SKIP,
    TIMEOUT,
    CheckResult,
    Finding,
    Level,
    RankState,
    Report,
    World,
    overall_status,
    status_from,
)
from ddpdoctor.report.ranks import fmt_ranks, ranks_txt
from ddpdoctor.runfiles import (
    ENTRY_TIMEOUT,
    CheckEntry,
    Gathered,
    Heartbeat,
    JobSpec,
    RankDoc,
    RunFolder,
    paused_gc,
)


@dataclass
class RunFiles:
    """What a run left on this node, read once: the rank files and heartbeats, and rank 0's
    gathered file (present only on the node that ran rank 0). Files of another run are ignored."""

    docs: dict[int, RankDoc]
    beats: dict[int, Heartbeat]
    gathered: Gathered | None
    by_check: dict[str, dict[int, CheckEntry]]  # {check: {rank: entry}}, gathered + local


def read(run_dir: Path, nonce: str = "") -> RunFiles:
    folder = RunFolder(run_dir, nonce or None)
    docs, beats, gathered = folder.read_ranks(), folder.read_beats(), folder.read_gathered()
    by_check: dict[str, dict[int, CheckEntry]] = {}
    for cid, per in (gathered.checks if gathered else {}).items():
        by_check.setdefault(cid, {}).update(per)
    for r, doc in docs.items():
        for cid, entry in doc.checks.items():
            by_check.setdefault(cid, {}).setdefault(r, entry)
    return RunFiles(docs, beats, gathered, by_check)


def _error_findings(errors: dict[int, CheckEntry], creates_group: bool) -> list[Finding]:
    """One finding per distinct error, naming every rank that hit it; errors whose text a log
    signature knows get that diagnosis instead of a generic 'check crashed'."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r, e in sorted(errors.items()):
        groups.setdefault((_first_sentence(e.error), str(e.phase)), []).append(r)
    out = []
    for (text, phase), ranks in groups.items():
        who = ranks_txt(ranks)
        known = known_errors.translate(errors[ranks[0]].error)
        if known is not None and known.problem is not None:
            msg = f"{who}: {known.meaning} in {phase} ({text}; {known.signature})"
            out.append(known.problem.finding(msg, ranks))
            continue
        generic = problems.PG_INIT_FAILED if creates_group else problems.CHECK_CRASHED
        meaning = f" — {known.meaning} ({known.signature})" if known else ""
        out.append(
            generic.finding(
                f"{who}: {text} (in {phase}){meaning}",
                ranks,
                traceback=errors[ranks[0]].traceback,
            )
        )
    return out


def _first_sentence(text: str, limit: int = 160) -> str:
    """gloo/NCCL errors are paragraphs with a source location first: keep the telling part."""
    text = re.sub(r"\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", text)
    text = text.split(". ")[0].strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _public(data: dict[str, Any]) -> dict[str, Any]:
    """Per-rank data for the report: keys starting with '_' are raw material for judge only."""
    return {k: v for k, v in (data or {}).items() if not k.startswith("_")}


DETAIL_RANKS = (
    256  # beyond this, a check's per-rank data in the report is cut to what findings name
)


def _rank_details(
    entries: dict[int, CheckEntry], findings: list[Finding]
) -> dict[int, dict[str, Any]]:
    """Every rank's public data, up to DETAIL_RANKS ranks; beyond, the data of the ranks the
    findings name or that did not succeed (the first DETAIL_RANKS of them): the JSON stays small
    at 16,384 ranks, every rank's status is in `rank_status`, and gathered.json keeps the rest."""
    if len(entries) <= DETAIL_RANKS:
        return {r: _public(e.data) | {"status": e.status} for r, e in entries.items()}
    named = {r for f in findings for r in f.ranks if r in entries}
    named |= {r for r, e in entries.items() if e.status != OK}
    return {
        r: _public(entries[r].data) | {"status": entries[r].status}
        for r in sorted(named)[:DETAIL_RANKS]
    }


def _rank_status(entries: dict[int, CheckEntry]) -> dict[str, str]:
    """{status: '0-4095,4097-16383'}: every rank's status in a few bytes, beyond DETAIL_RANKS."""
    if len(entries) <= DETAIL_RANKS:
        return {}
    statuses = {e.status for e in entries.values()}
    if len(statuses) == 1:  # the usual case: one range, no grouping
        return {statuses.pop(): fmt_ranks(entries, limit=None)}
    by_status: dict[str, list[int]] = {}
    for r, e in sorted(entries.items()):
        by_status.setdefault(e.status, []).append(r)
    return {s: fmt_ranks(rs, limit=None) for s, rs in by_status.items()}


def _judge_check(cid: str, entries: dict[int, CheckEntry], world: World) -> CheckResult:
    mod = registry.load(cid)
    if entries and all(e.status == SKIP for e in entries.values()):
        reason = next(iter(entries.values())).reason
        return CheckResult(cid, mod.TITLE, SKIP, f"skipped: {reason}")
    ok = {r: e.data for r, e in entries.items() if e.status == OK}  # not .ok: 16k calls
    findings: list[Finding] = []
    summary = "not judged"
    metrics: dict[str, Any] = {}
    if ok:
        try:
            j = mod.judge(ok, world)
            findings, summary, metrics = list(j.findings), j.summary, j.metrics
        except Exception as exc:  # noqa: BLE001 - a crashing judge is a result too
            findings.append(
                problems.CHECK_CRASHED.finding(
                    f"judging {cid} failed: {type(exc).__name__}: {exc}", []
                )
            )
    timeouts = sorted(r for r, e in entries.items() if e.status == TIMEOUT)
    errors = sorted(r for r, e in entries.items() if e.status == ERROR)
    findings += _error_findings(
        {r: entries[r] for r in errors}, mod.STAGE == registry.CREATES_GROUP
    )
    if timeouts:
        phases = sorted({str(entries[r].phase) for r in timeouts})
        findings.append(
            problems.COLLECTIVE_TIMEOUT.finding(
                f"{ranks_txt(timeouts)} timed out in {', '.join(phases)}", timeouts
            )
        )
    if not ok:
        summary = (
            f"{ranks_txt(timeouts)} timed out" if timeouts else f"failed on {ranks_txt(errors)}"
        )
    status = TIMEOUT if timeouts else ERROR if errors and not ok else status_from(findings)
    if errors and ok and status not in (TIMEOUT,):
        status = ERROR
    durations = [e.duration_s or 0.0 for e in entries.values()]
    return CheckResult(
        cid,
        mod.TITLE,
        status,
        summary,
        findings,
        ranks=_rank_details(entries, findings),
        duration_s=max(durations) if durations else None,
        metrics=metrics | ({"rank_status": rs} if (rs := _rank_status(entries)) else {}),
    )


def _timed_out(entries: dict[int, CheckEntry], local: set[int]) -> bool:
    """Whether a rank of this node ran into its deadline in a check (waiting for a peer)."""
    return any(e.status == ENTRY_TIMEOUT for r, e in entries.items() if r in local)


def assemble(
    run_dir: Path,
    spec: JobSpec,
    outcome: LaunchOutcome | None = None,
    launch_problems: list[Finding] | None = None,
    dumps: dict[int, str] | None = None,
) -> Report:
    """Build the report from whatever the run left behind. `launch_problems` are faults found
    before or by the launcher itself (a busy port, torchrun dying): they go in the row of the
    check that creates the process group."""
    with paused_gc():  # millions of live objects at 16k ranks: see runfiles.paused_gc
        return _assemble(run_dir, spec, outcome, launch_problems, dumps)


def _assemble(
    run_dir: Path,
    spec: JobSpec,
    outcome: LaunchOutcome | None,
    launch_problems: list[Finding] | None,
    dumps: dict[int, str] | None,
) -> Report:
    files = read(run_dir, spec.nonce)
    docs, beats, by_check = files.docs, files.beats, files.by_check
    world_size = spec.world_size
    order = list(spec.checks)
    local = set(docs) | set(beats)
    # On a node without rank 0 (multi-node), we only know our own ranks: say so, judge those.
    node_view = spec.nnodes > 1 and 0 not in local and files.gathered is None and bool(local)
    states = rank_states.assess(
        world_size,
        docs,
        beats,
        outcome,
        rank_states.remote_view(files.gathered, order),
        order[-1] if order else None,
        files.gathered.liveness if files.gathered else None,
        next((c for c in order if _timed_out(by_check.get(c, {}), local)), None),
    )
    if node_view:
        states = [s for s in states if s.rank in local]
    rank_states.explain_crashes(states, lambda r: tail_text(RunFolder(run_dir).log_file(r), 8000))
    stacks.attach(states, dumps or {})
    world_size = world_size or len(states) or 1
    world = World(
        world_size=world_size,
        backend=spec.backend,
        nnodes=spec.nnodes,
        hosts={s.rank: s.host for s in states if s.host},
        options=spec.options,
    )
    root = rank_states.root_cause(states)
    doubled = _duplicate_ranks(RunFolder(run_dir), world.hosts)
    if doubled:  # the cause of the missing rank(s), not one more symptom
        launch_problems, root = doubled + (launch_problems or []), None
    failed = {s.rank: s for s in states if s.state != OK}
    if outcome is not None and outcome.launcher_killed:
        root = None  # the ranks ended because their launcher did: the launch finding says so
    if launch_problems and not docs and not beats:
        # nothing ran: the launch problem is the whole story, not N "missing" ranks
        for s in states:
            s.detail = f"not started: {launch_problems[0].message}"
        failed, root = {}, None

    checks: list[CheckResult] = []
    for cid in order:
        entries = by_check.get(cid, {})
        if not entries:
            why = (
                f"not reached: rank {root.rank} {root.state} (see the root cause)"
                if root
                else "not run"
            )
            result = CheckResult(cid, registry.title(cid), SKIP, why)
        else:
            result = _judge_check(cid, entries, world)
            expected = sorted(local) if node_view else range(world_size)
            missing = sorted(r for r in expected if r not in entries)
            if missing and result.status != SKIP:
                result.summary += f" ({ranks_txt(missing)} did not report)"
        checks.append(result)

    group_row = registry.group_check()
    _place_rank_findings(checks, failed, by_check, group_row)
    _place_exchange_errors(checks, docs)
    flight_found, flight_json = flight.judge(RunFolder(run_dir), world_size, states)
    _place_flight(checks, flight_found, root)
    if launch_problems and checks:
        first = next((c for c in checks if c.id == group_row), checks[0])
        first.findings[:0] = launch_problems
        first.status = "fail"
        first.summary = launch_problems[0].message
    if outcome is not None:
        duration = outcome.duration_s
    else:
        starts = [d.started_at for d in docs.values() if d.started_at]
        duration = time.time() - min(starts) if starts else 0.0
    return Report(
        status=overall_status([c.status for c in checks]),
        world_size=world_size,
        nnodes=world.nnodes,
        backend=world.backend,
        backend_reason=spec.backend_reason,
        duration_s=round(duration, 3),
        checks=checks,
        ranks=states,
        root_cause=_root_json(root, launch_problems, group_row),
        launch=launch_json(run_dir, spec, outcome, node_view)
        | _exchange_bytes(docs)
        | ({"flight": flight_json} if flight_json else {}),
        hosts=hosts_table(states, by_check),
    )


def _place_flight(checks: list[CheckResult], found: list[Finding], root: RankState | None) -> None:
    """The flight recorder's findings go to the check the run stopped in (the root cause's)."""
    if not found or not checks:
        return
    row = next((c for c in checks if root is not None and c.id == root.last_check), None)
    if row is None:
        row = next((c for c in reversed(checks) if c.status != SKIP), checks[-1])
    row.findings.extend(found)
    if row.status not in (ERROR, TIMEOUT):
        row.status = status_from(row.findings)


def _duplicate_ranks(folder: RunFolder, hosts: dict[int, str]) -> list[Finding]:
    """Processes started with a RANK another process on this node already ran (a hand launch
    that exports one RANK for all): each stopped at once, so some other rank never arrived."""
    return [
        problems.RANK_DUPLICATE.finding(
            f"RANK={rank} was given to {len(pids)} processes on {hosts.get(rank, 'this host')} "
            f"(pids {', '.join(map(str, pids))}); only the first ran it, so another rank never "
            "arrived",
            [rank],
            rank_value=rank,
            pids=pids,
        )
        for rank, pids in sorted(folder.duplicates().items())
    ]


def _exchange_bytes(docs: dict[int, RankDoc]) -> dict[str, Any]:
    """The result exchanges' payload bytes of this node's ranks (`-v`; the scale test asserts on
    them): rank 0 receives N documents, the others 24 bytes per check."""
    seen = {str(r): d.exchange_bytes for r, d in sorted(docs.items()) if d.exchange_bytes}
    return {"exchange_bytes": seen} if seen else {}


def launch_json(
    run_dir: Path, spec: JobSpec, outcome: LaunchOutcome | None, node_view: bool
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "command": spec.command or None,
        "run_dir": str(run_dir),
        "started_at": outcome.started_at if outcome else None,
        "verdict": outcome.verdict if outcome else None,
        "returncode": outcome.returncode if outcome else None,
        "master_port": spec.master_port,
        "master_addr": spec.master_addr,
        "node_rank": spec.node_rank,
        "view": "node" if node_view else "job",
        "launcher_tail": outcome.launcher_tail if outcome else None,
        "signal": outcome.signal if outcome else None,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _root_json(
    root: RankState | None, launch_problems: list[Finding] | None, group_row: str
) -> dict[str, Any] | None:
    if root is not None:
        return {
            "rank": root.rank,
            "state": root.state,
            "check": root.last_check,
            "host": root.host,
            "message": _short(root),
        }
    if launch_problems:
        first = launch_problems[0]
        return {
            "rank": None,
            "state": None,
            "check": group_row,
            "host": None,
            "code": first.code,
            "message": first.message,
        }
    return None


def _short(st: RankState | None) -> str:
    if st is None:
        return ""
    return f"rank {st.rank} {st.state}" + (f" — {st.detail}" if st.detail else "")


def _place_rank_findings(
    checks: list[CheckResult],
    failed: dict[int, RankState],
    by_check: dict[str, dict[int, CheckEntry]],
    group_row: str,
) -> None:
    """Each failed rank becomes a finding in the row of the check it was in when it failed; a
    rank that never started, in the row of the check that creates the group."""
    if not failed or not checks:
        return
    index = {c.id: c for c in checks}
    cause_elsewhere = any(s.signal != "SIGTERM" for s in failed.values())
    for rank, st in sorted(failed.items()):
        target = index.get(st.last_check or "") or index.get(group_row) or checks[0]
        if st.state == MISSING:
            target = index.get(group_row) or checks[0]
        entries = by_check.get(target.id, {})
        waited = sorted(r for r, e in entries.items() if r != rank and e.failed)
        finding = rank_states.rank_finding(st, waited, cause_elsewhere)
        target.findings.insert(0, finding)
        if target.status in ("pass", "warn", SKIP):
            target.status = "fail" if finding.level >= Level.FAIL else "warn"
            if target.summary.startswith("not reached") or target.summary == "not run":
                target.summary = f"rank {rank} {st.state} here"


def _place_exchange_errors(checks: list[CheckResult], docs: dict[int, RankDoc]) -> None:
    """A failed exchange skips every later collective check: never let that pass silently."""
    index = {c.id: c for c in checks}
    by_error: dict[tuple[str, str], list[int]] = {}
    for r, doc in sorted(docs.items()):
        if doc.exchange_error:
            key = (doc.exchange_error.check, doc.exchange_error.error)
            by_error.setdefault(key, []).append(r)
    for (cid, error), ranks in by_error.items():
        target = index.get(cid) or next(iter(index.values()), None)
        if target is None:
            continue
        target.findings.append(
            problems.CHECK_CRASHED.finding(
                f"{ranks_txt(ranks)} could not exchange results after {cid} ({error}); later "
                "collective checks were skipped",
                ranks,
            )
        )
        if target.status in ("pass", "warn"):
            target.status = ERROR


def hosts_table(
    states: list[RankState], by_check: dict[str, dict[int, CheckEntry]]
) -> list[dict[str, Any]]:
    """The per-host section: ranks and devices, plus what checks contribute through
    `host_facts` (versions and the traffic interface, from env), from the host's first rank."""
    contributors = []
    for cid, per in by_check.items():
        try:
            facts = getattr(registry.load(cid), "host_facts", None)
        except Exception:  # noqa: BLE001 - an unknown check id in a folder contributes nothing
            facts = None
        if facts is not None:
            contributors.append((facts, per))
    out: dict[str, dict[str, Any]] = {}
    contributed: set[tuple[str, int]] = set()
    for s in states:
        host = s.host or "?"
        h = out.setdefault(host, {"host": host, "ranks": [], "devices": []})
        h["ranks"].append(s.rank)
        if s.device and s.device not in h["devices"]:
            h["devices"].append(s.device)
        for i, (facts, per) in enumerate(contributors):
            entry = per.get(s.rank)
            if entry is not None and entry.ok and (host, i) not in contributed:
                h.update(facts(entry.data))
                contributed.add((host, i))
    return list(out.values())


def to_json(report: Report) -> dict[str, Any]:
    return {
        "schema": schema.tag("report"),
        "mode": report.launch.get("mode", "check"),
        "status": report.status,
        "world_size": report.world_size,
        "nnodes": report.nnodes,
        "backend": report.backend,
        "backend_reason": report.backend_reason,
        "duration_s": report.duration_s,
        "root_cause": report.root_cause,
        "checks": [c.to_json() for c in report.checks],
        "ranks": [s.to_json() for s in report.ranks],
        "hosts": report.hosts,
        "launch": report.launch,
        "counts": counts(report),
    }


def counts(report: Report) -> dict[str, int]:
    out = {"fail": 0, "warn": 0, "info": 0}
    for f in report.findings():
        out[f.level.word] += 1
    return out


def from_json(doc: dict[str, Any]) -> Report:
    return Report(
        status=doc["status"],
        world_size=doc["world_size"],
        nnodes=doc["nnodes"],
        backend=doc["backend"],
        backend_reason=doc.get("backend_reason", ""),
        duration_s=doc["duration_s"],
        checks=[CheckResult.from_json(c) for c in doc["checks"]],
        ranks=[RankState.from_json(r) for r in doc["ranks"]],
        root_cause=doc.get("root_cause"),
        launch=doc.get("launch") or {},
        hosts=doc.get("hosts") or [],
    )
