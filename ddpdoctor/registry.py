"""The ordered check registry. Order is part of correctness: every rank runs the same checks in
the same order, or their collectives pair up wrongly and deadlock. Third-party checks come from
the `ddpdoctor.checks` entry-point group, after the built-ins, sorted by name.

A check is a module with:
    ID: str, TITLE: str, COLLECTIVE: bool
    run(ctx) -> dict          on every rank (keys starting with "_" are for judge only)
    judge(per_rank, world) -> Judgement   on the collecting side, pure (no torch)
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from types import ModuleType

from ddpdoctor.errors import UsageError

BUILTIN = ("env", "process_group", "rank_device", "allreduce", "sampler", "gradscaler")
# Jobs shaped like checks that other commands run (not selectable with --only/--skip).
JOBS = {"bench": "ddpdoctor.bench.sweep", "pairs": "ddpdoctor.bench.pairs"}


def _plugins() -> dict[str, str]:
    try:
        eps = entry_points(group="ddpdoctor.checks")
    except Exception:  # a broken plugin install must not break the doctor
        return {}
    return {ep.name: ep.value for ep in sorted(eps, key=lambda e: e.name) if ep.name not in BUILTIN}


def all_ids() -> list[str]:
    return [*BUILTIN, *_plugins()]


def load(check_id: str) -> ModuleType:
    if check_id in BUILTIN:
        return importlib.import_module(f"ddpdoctor.checks.{check_id}")
    if check_id in JOBS:
        return importlib.import_module(JOBS[check_id])
    return importlib.import_module(_plugins()[check_id])


def run_order(selected: list[str]) -> list[str]:
    """What a worker runs: the selection, with process_group (everything else needs it) right
    after env, or first."""
    order = [c for c in selected if c != "process_group"]
    at = 1 if order[:1] == ["env"] else 0
    return [*order[:at], "process_group", *order[at:]]


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
