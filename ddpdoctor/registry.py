"""The ordered check registry, shared by both sides: the parent selects checks and judges their
results, the ranks run them. It never imports torch (check modules import it inside `run`).

Order is part of correctness: every rank runs the same checks in the same order, or their
collectives pair up wrongly and deadlock. A check says what it needs through its `STAGE`, and
the engine knows no check by name: checks that run before the process group exists come first,
then the one check that creates it (always run, since everything later needs it), then the
rest in registry order. Third-party checks come from the `ddpdoctor.checks` entry-point group,
after the built-ins, sorted by name (README: "Adding a check").
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ddpdoctor.errors import UsageError

if TYPE_CHECKING:
    from ddpdoctor.rank.context import RankContext
    from ddpdoctor.report.model import Judgement, World

BEFORE_GROUP = "before_group"  # needs no process group; its result is exchanged once one exists
CREATES_GROUP = "creates_group"  # creates the process group and the control group
NEEDS_GROUP = "needs_group"  # runs once the group exists
STAGES = (BEFORE_GROUP, CREATES_GROUP, NEEDS_GROUP)

BUILTIN = ("env", "process_group", "rank_device", "allreduce", "sampler", "gradscaler")
# Jobs shaped like checks that other commands run (not selectable with --only/--skip).
JOBS = {"bench": "ddpdoctor.bench.sweep", "pairs": "ddpdoctor.bench.pairs"}


@runtime_checkable
class Check(Protocol):
    """What a check module provides. Optional: `PRELOAD` (modules to import on a side thread while
    earlier checks wait on peers) and `host_facts(data) -> dict` (facts for the per-host table)."""

    ID: str
    TITLE: str
    STAGE: str
    COLLECTIVE: bool  # calls collectives: skipped on every rank once one has failed

    def run(self, ctx: RankContext) -> dict[str, Any]: ...

    def judge(self, per_rank: dict[int, dict[str, Any]], world: World) -> Judgement: ...


def _plugins() -> dict[str, str]:
    try:
        eps = entry_points(group="ddpdoctor.checks")
    except Exception:  # a broken plugin install must not break the doctor
        return {}
    return {ep.name: ep.value for ep in sorted(eps, key=lambda e: e.name) if ep.name not in BUILTIN}


def all_ids() -> list[str]:
    return [*BUILTIN, *_plugins()]


def load(check_id: str) -> Check:
    """The module behind a check id, validated against the protocol."""
    if check_id in BUILTIN:
        name = f"ddpdoctor.checks.{check_id}"
    elif check_id in JOBS:
        name = JOBS[check_id]
    else:
        name = _plugins()[check_id]
    mod = importlib.import_module(name)
    stage = getattr(mod, "STAGE", NEEDS_GROUP)
    if not isinstance(mod, Check) or stage not in STAGES:
        raise TypeError(
            f"check module {name} lacks ID/TITLE/STAGE/COLLECTIVE/run/judge or has an unknown STAGE"
        )
    return cast(Check, mod)


def title(check_id: str) -> str:
    try:
        return load(check_id).TITLE
    except Exception:  # noqa: BLE001 - a report row must still have a title
        return check_id


def group_check() -> str:
    """The id of the check that creates the process group (launch faults are reported there)."""
    return next(c for c in BUILTIN if load(c).STAGE == CREATES_GROUP)


def for_run(selected: Iterable[str]) -> dict[str, Check]:
    """The checks a worker runs: the selection plus the group-creating check, loaded."""
    ids = list(selected)
    if not any(load(c).STAGE == CREATES_GROUP for c in ids):
        ids.append(group_check())
    return {c: load(c) for c in ids}


def run_order(checks: Mapping[str, Check]) -> list[str]:
    """Ids ordered by stage, stable within a stage: before the group, the one that creates it,
    then the rest in registry order."""
    rank = {stage: i for i, stage in enumerate(STAGES)}
    return sorted(checks, key=lambda c: rank[checks[c].STAGE])


def select(only: str | None, skip: str | None) -> list[str]:
    """Turn --only/--skip (comma-separated ids) into the ordered list of checks to run."""
    known = all_ids()

    def parse(text: str | None, opt: str) -> list[str]:
        if text is None:
            return []
        ids = [t.strip() for t in text.split(",") if t.strip()]
        if not ids:
            raise UsageError(f"{opt} needs at least one check id ({', '.join(known)})")
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise UsageError(
                f"unknown check id {', '.join(unknown)} in {opt}; known: {', '.join(known)}"
            )
        return ids

    only_ids, skip_ids = parse(only, "--only"), parse(skip, "--skip")
    chosen = [i for i in known if (not only_ids or i in only_ids) and i not in skip_ids]
    if not chosen:
        raise UsageError("--only/--skip leave no check to run")
    return chosen
