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
from ddpdoctor import runfiles as rundir
from ddpdoctor.job import rank_states
from ddpdoctor.report import schema
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
from ddpdoctor.report.problems import get
from ddpdoctor.report.ranks import ranks_txt

_PEER_LOST = re.compile(r"connection (reset|closed|refused)|broken pipe|peer|socket closed", re.I)


# Errors whose words say more than "a check raised": (pattern, problem symbol, what it means).
KNOWN_ERRORS = [
    (
        re.compile(
            r"ifa != nullptr|unable to find address for|no such device|failed to find interface",
            re.I,
        ),
        "socket-ifname-missing",
        "the network interface named by GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME does not exist",
    ),
    (
        re.compile(r"address already in use|EADDRINUSE", re.I),
        "port-in-use",
        "the master port is already taken",
    ),
    (_PEER_LOST, "peer-lost", "a peer went away mid-collective"),
]


@dataclass
class RunFiles:
    """What a run left on this node, read once: the rank files, and rank 0's gathered file
    (present only on the node that ran rank 0) with its liveness sample."""

    docs: dict[int, dict[str, Any]]
    by_check: dict[str, dict[int, dict[str, Any]]]  # {check: {rank: entry}}, gathered + local
    liveness: dict[int, dict[str, Any]]
    has_gathered: bool


def _read(run_dir: Path) -> RunFiles:
    docs = rundir.read_rank_files(run_dir)
    gathered = rundir.read_json(run_dir / rundir.GATHERED)
    has_gathered = isinstance(gathered, dict)
    gathered = gathered if has_gathered else {}
    liveness = {int(r): v for r, v in (gathered.pop("_liveness", None) or {}).items()}
    by_check: dict[str, dict[int, dict[str, Any]]] = {}
    for cid, per in gathered.items():
        for r, entry in (per or {}).items():
            by_check.setdefault(cid, {})[int(r)] = entry
    for r, doc in docs.items():
        for cid, entry in (doc.get("checks") or {}).items():
            by_check.setdefault(cid, {}).setdefault(r, entry)
    return RunFiles(docs, by_check, liveness, has_gathered)


def _error_findings(errors: dict[int, dict[str, Any]], cid: str = "") -> list[Finding]:
    """One finding per distinct error, naming every rank that hit it; known errors get their
    diagnosis instead of a generic 'check crashed'."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r, e in sorted(errors.items()):
        groups.setdefault((_first_sentence(e.get("error") or ""), str(e.get("phase"))), []).append(
            r
        )
    out = []
    for (text, phase), ranks in groups.items():
        who = f"{ranks_txt(ranks)}"
        known = next(((sym, meaning) for rx, sym, meaning in KNOWN_ERRORS if rx.search(text)), None)
        if known:
            out.append(get(known[0]).finding(f"{who}: {known[1]} in {phase} ({text})", ranks))
        else:
            generic = "pg-init-failed" if cid == "process_group" else "check-crashed"
            out.append(
                get(generic).finding(
                    f"{who}: {text} (in {phase})",
                    ranks,
                    traceback=errors[ranks[0]].get("traceback", ""),
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


def _judge_check(cid: str, entries: dict[int, dict[str, Any]], world: World) -> CheckResult:
    mod = registry.load(cid)
    title = getattr(mod, "TITLE", cid)
    if entries and all(e.get("status") == SKIP for e in entries.values()):
        reason = next(iter(entries.values())).get("reason", "")
        return CheckResult(cid, title, SKIP, f"skipped: {reason}")
    ok = {r: e.get("data") or {} for r, e in entries.items() if e.get("status") == "ok"}
    findings: list[Finding] = []
    summary = "not judged"
    metrics: dict[str, Any] = {}
    if ok:
        try:
            j = mod.judge(ok, world)
            findings, summary, metrics = list(j.findings), j.summary, j.metrics
        except Exception as exc:  # noqa: BLE001 - a crashing judge is a result too
            findings.append(
                get("check-crashed").finding(
                    f"judging {cid} failed: {type(exc).__name__}: {exc}", []
                )
            )
    timeouts = sorted(r for r, e in entries.items() if e.get("status") == TIMEOUT)
    errors = sorted(r for r, e in entries.items() if e.get("status") == ERROR)
    findings += _error_findings({r: entries[r] for r in errors}, cid)
    if timeouts:
        phases = sorted({str(entries[r].get("phase")) for r in timeouts})
        findings.append(
            get("collective-timeout").finding(
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
    durations = [e.get("duration_s") or 0.0 for e in entries.values()]
    return CheckResult(
        cid,
        title,
        status,
        summary,
        findings,
        ranks={
            r: _public(e.get("data") or {}) | {"status": e.get("status")}
            for r, e in entries.items()
        },
        duration_s=max(durations) if durations else None,
        metrics=metrics,
    )


def assemble(
    run_dir: Path,
    spec: dict[str, Any],
    outcome: Any = None,
    launch_problems: list[Finding] | None = None,
) -> Report:
    """Build the report from whatever the run left behind. `launch_problems` are faults found
    before or by the launcher itself (a busy port, torchrun dying): they go in the first row."""
    files = _read(run_dir)
    docs, by_check = files.docs, files.by_check
    beats = rundir.read_beats(run_dir)
    world_size = int(spec.get("world_size") or 0)
    order = list(spec["checks"])
    local = set(docs) | set(beats)
    # On a node without rank 0 (multi-node), we only know our own ranks: say so, judge those.
    node_view = (
        int(spec.get("nnodes") or 1) > 1
        and 0 not in local
        and not files.has_gathered
        and bool(local)
    )
    states = rank_states.assess(
        world_size,
        docs,
        beats,
        outcome,
        rank_states.remote_view(by_check, order),
        order[-1] if order else None,
        files.liveness,
    )
    if node_view:
        states = [s for s in states if s.rank in local]
    world_size = world_size or len(states) or 1
    hosts = {s.rank: s.host for s in states if s.host}
    world = World(
        world_size=world_size,
        backend=spec.get("backend", "gloo"),
        nnodes=int(spec.get("nnodes") or 1),
        hosts=hosts,
        options=spec.get("options") or {},
    )
    root = rank_states.root_cause(states)
    failed = {s.rank: s for s in states if s.state != OK}
    if launch_problems and not docs and not beats:
        # nothing ran: the launch problem is the whole story, not N "missing" ranks
        for s in states:
            s.detail = f"not started: {launch_problems[0].message}"
        failed, root = {}, None

    checks: list[CheckResult] = []
    for cid in spec["checks"]:
        entries = by_check.get(cid, {})
        if not entries:
            why = (
                f"not reached: rank {root.rank} {root.state} (see the root cause)"
                if root
                else "not run"
            )
            result = CheckResult(cid, getattr(registry.load(cid), "TITLE", cid), SKIP, why)
        else:
            result = _judge_check(cid, entries, world)
            expected = sorted(local) if node_view else range(world_size)
            missing = sorted(r for r in expected if r not in entries)
            if missing and result.status != SKIP:
                result.summary += f" ({ranks_txt(missing)} did not report)"
        checks.append(result)

    _place_rank_findings(checks, failed, by_check)
    _place_exchange_errors(checks, docs)
    if launch_problems and checks:
        first = next((c for c in checks if c.id == "process_group"), checks[0])
        first.findings[:0] = launch_problems
        first.status = "fail"
        first.summary = launch_problems[0].message
    status = overall_status([c.status for c in checks])
    started = getattr(outcome, "started_at", None)
    duration = getattr(outcome, "duration_s", None)
    if duration is None:
        starts = [d.get("started_at") for d in docs.values() if d.get("started_at")]
        duration = time.time() - min(starts) if starts else 0.0
    return Report(
        status=status,
        world_size=world_size,
        nnodes=world.nnodes,
        backend=world.backend,
        backend_reason=spec.get("backend_reason", ""),
        duration_s=round(duration, 3),
        checks=checks,
        ranks=states,
        root_cause=_root_json(root, launch_problems),
        launch={
            k: v
            for k, v in {
                "command": spec.get("command"),
                "run_dir": str(run_dir),
                "started_at": started,
                "verdict": getattr(outcome, "verdict", None),
                "returncode": getattr(outcome, "returncode", None),
                "master_port": spec.get("master_port"),
                "master_addr": spec.get("master_addr"),
                "node_rank": spec.get("node_rank"),
                "view": "node" if node_view else "job",
                "launcher_tail": getattr(outcome, "launcher_tail", None),
            }.items()
            if v is not None
        },
        hosts=_hosts(states, by_check.get("env", {})),
    )


def _root_json(
    root: RankState | None, launch_problems: list[Finding] | None
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
            "check": "process_group",
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
    by_check: dict[str, dict[int, dict[str, Any]]],
) -> None:
    """Each failed rank becomes a finding in the row of the check it was in when it failed."""
    if not failed or not checks:
        return
    index = {c.id: c for c in checks}
    for rank, st in sorted(failed.items()):
        target = index.get(st.last_check or "") or index.get("process_group") or checks[0]
        if st.state == MISSING:
            target = index.get("process_group") or checks[0]
        entries = by_check.get(target.id, {})
        waited = sorted(
            r for r, e in entries.items() if r != rank and e.get("status") in (TIMEOUT, ERROR)
        )
        finding = rank_states.rank_finding(st, waited)
        target.findings.insert(0, finding)
        if target.status in ("pass", "warn", SKIP):
            target.status = "fail" if finding.level >= Level.FAIL else "warn"
            if target.summary.startswith("not reached") or target.summary == "not run":
                target.summary = f"rank {rank} {st.state} here"


def _place_exchange_errors(checks: list[CheckResult], docs: dict[int, dict[str, Any]]) -> None:
    """A failed exchange skips every later collective check: never let that pass silently."""
    index = {c.id: c for c in checks}
    by_error: dict[tuple[str, str], list[int]] = {}
    for r, doc in sorted(docs.items()):
        err = doc.get("exchange_error")
        if err:
            by_error.setdefault((err.get("check", ""), err.get("error", "")), []).append(r)
    for (cid, error), ranks in by_error.items():
        target = index.get(cid) or next(iter(index.values()), None)
        if target is None:
            continue
        target.findings.append(
            get("check-crashed").finding(
                f"{ranks_txt(ranks)} could not exchange results after {cid} ({error}); later collective checks "
                "were skipped",
                ranks,
            )
        )
        if target.status in ("pass", "warn"):
            target.status = ERROR


def _hosts(states: list[RankState], env: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-host section: ranks, devices, versions and the interface traffic will use."""
    out: dict[str, dict[str, Any]] = {}
    for s in states:
        h = out.setdefault(s.host or "?", {"host": s.host or "?", "ranks": [], "devices": []})
        h["ranks"].append(s.rank)
        if s.device and s.device not in h["devices"]:
            h["devices"].append(s.device)
        data = (env.get(s.rank) or {}).get("data") or {}
        if data and "versions" not in h:
            h["versions"] = data.get("versions", {})
            h["net"] = data.get("net", {})
    return list(out.values())


def to_json(report: Report) -> dict[str, Any]:
    return {
        "schema": schema.tag("report"),
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
