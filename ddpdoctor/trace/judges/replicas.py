"""Replicas: the fingerprints every K steps must be identical on every rank; a divergence names
the first step and the first parameter (or buffer) that differs."""

from __future__ import annotations

import math

from ddpdoctor.trace import catalog as C
from ddpdoctor.trace import record as R
from ddpdoctor.trace.judges.findings import REPLICAS, TraceFinding, ranks_text
from ddpdoctor.trace.record import TraceRecord
from ddpdoctor.trace.sites import Site

REL_TOL = 1e-9  # identical replicas give identical sums; this only forgives reduction order


def _same(a: list[float], b: list[float]) -> bool:
    return all(
        math.isclose(x, y, rel_tol=REL_TOL, abs_tol=1e-12) for x, y in zip(a, b, strict=True)
    )


def judge(records: dict[int, TraceRecord]) -> list[TraceFinding]:
    by_step: dict[int, dict[int, tuple[str, list[list[float]]]]] = {}
    for rank, rec in records.items():
        for fp in rec.fingerprints:
            by_step.setdefault(fp.step, {})[rank] = (fp.names_digest, fp.values)
    for step in sorted(by_step):
        fps = by_step[step]
        if len(fps) < 2 or len({d for d, _ in fps.values()}) > 1:
            continue  # not every rank has it, or the models differ in their names
        ranks = sorted(fps)
        names = next(records[r].fingerprint_names for r in ranks if records[r].fingerprint_names)
        for i in range(len(names)):
            values = {r: fps[r][1][i] for r in ranks}
            groups: list[tuple[list[float], list[int]]] = []
            for r, v in values.items():
                for g in groups:
                    if _same(g[0], v):
                        g[1].append(r)
                        break
                else:
                    groups.append((v, [r]))
            if len(groups) == 1:
                continue
            groups.sort(key=lambda g: -len(g[1]))
            odd = sorted(r for _, rs in groups[1:] for r in rs)
            msg = (
                f"replicas differ after step {step}: {names[i]} on {ranks_text(odd)} differs from "
                f"{ranks_text(groups[0][1])} (sum {groups[0][0][0]:.6g} vs {groups[1][0][0]:.6g})"
            )
            fps_odd = records[odd[0]].fingerprints
            site = next((fp.where for fp in fps_odd if fp.step == step), None)
            return [TraceFinding.of(C.REPLICAS_DIVERGED, REPLICAS, msg, odd, site or _ddp_site(records),
                                    step=step, parameter=names[i])]  # fmt: skip
    return []


def _ddp_site(records: dict[int, TraceRecord]) -> Site | None:
    """Where the model was wrapped (or, without DDP, where the group was set up)."""
    for kind in (R.DDP_BUILT, R.INIT):
        for rec in records.values():
            for ev in rec.events:
                if ev.kind == kind:
                    return ev.where
    return None
