"""Launch and group: use before init, destroy without a barrier, the group alive at exit, the
script's own exceptions, a rank that did not reach the stop step, where unfinished ranks were."""

from __future__ import annotations

from collections import defaultdict

from ddpdoctor.report.model import Level
from ddpdoctor.trace import catalog as C
from ddpdoctor.trace import record as R
from ddpdoctor.trace.judges.findings import GROUP, TraceFinding, events_by_place, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site
from ddpdoctor.trace.stacks import stopped_at

_WHAT = {
    "ddp": "DistributedDataParallel built before init_process_group",
    "collective": "{op} called before init_process_group",
    "sampler": "DistributedSampler without num_replicas/rank built before init_process_group",
}
ABORTED = {-6, 134}  # SIGABRT as torchrun reports it, and as a shell does


def judge(
    records: dict[int, TraceRecord], exit_codes: dict[int, int] | None = None,
    stacks: dict[int, str] | None = None,
) -> list[TraceFinding]:  # fmt: skip
    out: list[TraceFinding] = []
    for (where, data), (ranks, _n) in events_by_place(records, R.BEFORE_INIT).items():
        d = dict(data)
        text = _WHAT.get(d.get("what", ""), "used before init_process_group").format(op=d.get("op"))
        out.append(
            TraceFinding.of(
                C.USED_BEFORE_INIT, GROUP, f"{text} ({ranks_text(ranks)})", ranks, where, **d
            )
        )
    aborted = {r for r, c in (exit_codes or {}).items() if c in ABORTED}
    for (where, data), (ranks, _n) in events_by_place(records, R.DESTROY).items():
        d = dict(data)
        if d.get("after_barrier") == "True" or d.get("stopping") not in ("None", None):
            continue
        hit = sorted(aborted & set(ranks))
        msg = f"destroy_process_group() with no barrier before it ({ranks_text(ranks)})"
        if hit:
            msg += f"; {ranks_text(hit)} then aborted at exit (SIGABRT): this explains it"
        out.append(TraceFinding.of(
            C.DESTROY_WITHOUT_BARRIER, GROUP, msg, ranks, where, level=Level.WARN if hit else None,
            aborted=hit,
        ))  # fmt: skip
    alive = [r for r, rec in records.items() if any(e.kind == R.GROUP_ALIVE for e in rec.events)]
    if alive:
        out.append(TraceFinding.of(
            C.DESTROY_MISSING, GROUP,
            f"the script ended with the process group still alive ({ranks_text(alive)})",
            alive, _init_site(records),
        ))  # fmt: skip
    out += _exceptions(records)
    out += _unfinished(records, stacks or {})
    return out


def _init_site(records: dict[int, TraceRecord]) -> Site | None:
    for rec in records.values():
        for ev in rec.events:
            if ev.kind == R.INIT:
                return ev.where
    return None


def _exceptions(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    groups: dict[tuple, list[int]] = defaultdict(list)
    for rank, rec in sorted(records.items()):
        e = rec.exit
        if e.kind == "exception":
            first = e.message.splitlines()[0] if e.message else ""
            groups[(e.exception, first, e.where, rec.steps)].append(rank)
    out = []
    for (exc, first, where, steps), ranks in groups.items():
        msg = (
            f"{ranks_text(ranks)} raised {exc}: {first}"
            if first
            else f"{ranks_text(ranks)} raised {exc}"
        )
        if where:
            msg += f" at {where}"
        out.append(TraceFinding.of(C.SCRIPT_RAISED, GROUP, msg + f" (after {steps} steps)", ranks,
                                   where, exception=exc, steps=steps))  # fmt: skip
    return out


def _unfinished(records: dict[int, TraceRecord], stacks: dict[int, str]) -> list[TraceFinding]:
    out = []
    stopped = {r: rec for r, rec in records.items() if rec.exit.kind in ("steps", "max-time")}
    for rank, rec in sorted(records.items()):
        if rec.exit.kind != "running":
            continue
        if stopped:
            target = max(s.steps for s in stopped.values())
            out.append(TraceFinding.of(
                C.STEP_NOT_REACHED, GROUP,
                f"rank {rank} is at step {rec.steps} while {ranks_text(list(stopped))} stopped at "
                f"step {target}", [rank], None, steps=rec.steps, target=target,
            ))  # fmt: skip
        text = stacks.get(rank)
        where = stopped_at(text) if text else None
        if where is not None:
            out.append(TraceFinding.of(
                C.STOPPED_AT, GROUP,
                f"rank {rank} did not finish: it was at {where} (step {rec.steps})", [rank], where,
                steps=rec.steps,
            ))  # fmt: skip
    return out
