"""Plan → launch → report: the one path every launching command takes. Launch faults that the
ranks cannot tell (a busy port, torchrun dying before any rank started) are found here and
translated through the same error-text knowledge as the ranks' own errors."""

from __future__ import annotations

import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from ddpdoctor.job import bringup, collect, known_errors, localize, reach, stacks
from ddpdoctor.job.launch import LaunchOutcome, Tick
from ddpdoctor.job.plan import Plan, preflight
from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding, Report
from ddpdoctor.runfiles import JobSpec, RunFolder

_TELLING = re.compile(r"error|failed|refused|timed out|not known|exception", re.I)


def launcher_problems(outcome: LaunchOutcome, any_rank_started: bool) -> list[Finding]:
    """Faults only the launcher's own output shows: no rank ever started (torchrun died, or its
    rendezvous never completed), so the ranks cannot tell."""
    if outcome.launcher_killed:
        return [
            problems.LAUNCH_FAILED.finding(
                f"torchrun was killed by {outcome.launcher_killed} while the ranks ran (not by "
                "ddpdoctor): its ranks ended with it, so the checks after that never ran",
                [],
                evidence=outcome.launcher_tail.splitlines()[-5:],
            )
        ]
    if any_rank_started or outcome.verdict == "interrupted":
        return []
    lines = [ln.strip() for ln in outcome.launcher_tail.splitlines() if ln.strip()]
    known = known_errors.translate("\n".join(lines))
    if known is not None and known.problem is not None and known.problem != problems.PEER_LOST:
        hits = [ln for ln in lines if known_errors.translate(ln) == known][-3:]
        return [
            known.problem.finding(
                f"torchrun: {known.meaning} ({known.signature})", [], evidence=hits or lines[-3:]
            )
        ]
    telling = [ln for ln in lines if _TELLING.search(ln)]
    last = telling[-1] if telling else (lines[-1] if lines else outcome.reason or "no output")
    how = (
        f"exited with code {outcome.returncode}"
        if outcome.verdict in ("finished", "launch-failed")
        else f"started no worker within {outcome.duration_s:.0f} s"
    )
    meaning = f" — {known.meaning} ({known.signature})" if known else ""
    return [
        problems.LAUNCH_FAILED.finding(
            f"torchrun {how}: {last[:300]}{meaning}", [], evidence=lines[-15:]
        )
    ]


# (run folder, job, what the launcher saw, launch faults, stack dumps) -> the report: by
# default collect.assemble (the probes); the tracer's assemble for `ddpdoctor run`.
Judge = Callable[[Path, JobSpec, LaunchOutcome | None, list[Finding], dict[int, str]], Report]


def execute(
    p: Plan,
    on_tick: Tick | None = None,
    judge: Judge | None = None,
) -> Report:
    """Launch (unless a pre-flight problem makes it pointless) and assemble the report. At a
    verdict every unfinished rank's stacks are taken before the kill; `judge` gets them."""
    from ddpdoctor.job import launch

    folder = RunFolder(p.spec.run_dir, p.job.nonce)
    dumps: dict[int, str] = {}

    arrivals: list[Finding] | None = None

    def read_arrivals() -> None:
        """Multi-node, no rank of this node started: ask torchrun's store who joined (on the
        node that hosts it, before the kill ends the store)."""
        nonlocal arrivals
        if arrivals is None and p.bringup and p.spec.nnodes > 1 and not folder.read_beats():
            verdict_s = round(time.monotonic() - launched_at, 1)
            arrivals = bringup.arrival_findings(p.spec, p.bringup)
            for f in arrivals:
                f.data["after_s"] = verdict_s  # what --rdzv-timeout bounds: launch to verdict

    def before_kill(alive: dict[int, Any]) -> None:
        read_arrivals()
        if arrivals and p.bringup and bringup.hosts_store(p.spec, p.bringup.me):
            time.sleep(bringup.STORE_GRACE_S)  # the nodes that joined read the store too
        stacks.take(folder, alive, dumps)

    folder.write_spec(p.job)
    if p.bringup and p.spec.nnodes > 1:
        bringup.preload_store_client()
    found = preflight(p)
    outcome: LaunchOutcome | None = None
    launched_at = time.monotonic()
    if not found:
        outcome = launch.run(p.spec, on_tick=on_tick, before_kill=before_kill)
        if outcome.verdict != "interrupted":
            read_arrivals()  # torchrun may have given up by itself (a store it cannot reach)
        # the nodes named as never joined say more than "torchrun started no worker"
        found = arrivals or launcher_problems(outcome, bool(folder.read_beats()))
    if judge is None:
        report = collect.assemble(p.spec.run_dir, p.job, outcome, found, dumps)
    else:
        report = judge(p.spec.run_dir, p.job, outcome, found, dumps)
    if p.bringup is not None:
        _bring_up(p, report, arrivals or [], interrupted=bool(outcome and outcome.signal))
    return report


def _bring_up(p: Plan, report: Report, arrivals: list[Finding], interrupted: bool) -> None:
    """After a multi-node run: --localize's pair probe as one more row, and the nodes to exclude
    (never joined, unreachable, one end of a dead link) in the report and the file."""
    from ddpdoctor.node.cluster import write_exclude
    from ddpdoctor.report.model import overall_status

    b = p.bringup
    assert b is not None
    exclude = bringup.excluded(arrivals)
    # every node probes, whatever its own run said, so that the nodes meet (a passing probe
    # ends as soon as every peer has answered)
    if b.localize and not interrupted and b.probe_port:
        probed = reach.probe(b.me, b.hosts, b.probe_port, p.job.nonce, p.spec.timeout)
        row, bad = localize.judge(probed)
        report.checks.append(row)
        report.duration_s = round(report.duration_s + probed.duration_s, 3)
        report.status = overall_status([c.status for c in report.checks])
        exclude += [h for h in bad if h not in exclude]
    b.exclude = [h for h in b.hosts if h in exclude] + [h for h in exclude if h not in b.hosts]
    report.launch["exclude"] = b.exclude
    if b.exclude_file:
        write_exclude(b.exclude_file, b.exclude)


def output_failed(message: str) -> int:
    """A finished run whose output file could not be written: the report was printed and the
    run folder kept; say so on stderr and exit as a usage error."""
    print(f"ddpdoctor: error: {message} (the report was kept: see above)", file=sys.stderr)
    return EXIT_USAGE


def exit_code(report: Report, fail_on: str) -> int:
    if report.launch.get("verdict") == "interrupted":
        name = report.launch.get("signal") or "SIGINT"
        return 128 + int(getattr(signal.Signals, name, signal.SIGINT))
    bad = ("fail",) if fail_on == "fail" else ("fail", "warn")
    return EXIT_PROBLEMS if report.status in bad else EXIT_OK


@contextmanager
def launched(
    p: Plan,
    title: str,
    show_progress: bool,
    ascii_only: bool,
    judge: Judge | None = None,
    on_tick: Tick | None = None,
) -> Iterator[Report]:
    """Run the plan with the live progress display (or the caller's own `on_tick`), yield the
    report; afterwards remove the temporary run folder if everything passed (a failed run
    keeps it for the ticket)."""
    from ddpdoctor.report import render

    report: Report | None = None
    display = render.progress(
        enabled=show_progress, ascii_only=ascii_only, world_size=p.job.world_size, title=title
    )
    try:
        with nullcontext(on_tick) if on_tick is not None else display as tick:
            report = execute(p, on_tick=tick, judge=judge)
        yield report
        b = p.bringup
        if b is not None and not b.quiet and (b.exclude or b.exclude_file or b.localize):
            from ddpdoctor.node.render import exclude_after_run

            exclude_after_run(b.exclude, b.exclude_file, ascii_only)
    finally:
        if not p.keep_run_dir and report is not None and report.status == "pass":
            shutil.rmtree(p.spec.run_dir, ignore_errors=True)


def kept_run_dir(p: Plan, report: Report) -> str | None:
    """The run folder to point the user at: given by them, or kept because something failed."""
    return str(p.spec.run_dir) if p.keep_run_dir or report.status != "pass" else None
