"""`ddpdoctor run [OPTIONS] -- SCRIPT [ARGS...]` (or `-m MODULE`): the user's own training job
under the same launcher as `check`, every rank traced (`python -m ddpdoctor.trace`), bounded
by `--steps` and `--max-time`, rank 0's output shown live, then one report. The parent side:
no torch here."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ddpdoctor.errors import UsageError, printable
from ddpdoctor.job.collect import to_json
from ddpdoctor.job.launch import LaunchOutcome, torchrun_command
from ddpdoctor.job.plan import LaunchArgs, Plan, check_fail_on, plan
from ddpdoctor.job.session import exit_code, kept_run_dir, launched, output_failed
from ddpdoctor.report import schema
from ddpdoctor.report.model import Finding, Report
from ddpdoctor.runfiles import Heartbeat, JobSpec, RunFolder

UNBOUNDED_S = 7 * 24 * 3600.0  # --steps 0 without --max-time: the hang rule still bounds a rank


@dataclass
class RunArgs:
    launch: LaunchArgs = field(default_factory=LaunchArgs)
    target: list[str] = field(default_factory=list)  # [SCRIPT, ARGS...] or ["-m", MODULE, ...]
    steps: int = 50
    max_time: float | None = None
    fingerprint_every: int = 10
    fail_on: str = "fail"


def _validate(args: RunArgs) -> None:
    check_fail_on(args.fail_on)
    if not args.target or (args.target[0] == "-m" and len(args.target) < 2):
        raise UsageError(
            "nothing to run: ddpdoctor run [OPTIONS] -- SCRIPT [ARGS...] (or -m MODULE)"
        )
    if args.target[0] != "-m":
        script = Path(args.target[0])
        if not script.is_file():
            raise UsageError(f"no such script: {printable(args.target[0])}")
    if args.steps < 0:
        raise UsageError(f"--steps must be 0 (run to the end) or more, not {args.steps}")
    if args.max_time is not None and not (args.max_time > 0 and math.isfinite(args.max_time)):
        raise UsageError(f"--max-time must be a positive number of seconds, not {args.max_time:g}")
    if args.fingerprint_every < 0:
        raise UsageError(
            f"--fingerprint-every must be 0 (never) or more, not {args.fingerprint_every}"
        )


def tracer_argv(args: RunArgs, run_dir: Path) -> list[str]:
    """What follows `-m ddpdoctor.trace` on torchrun's command line."""
    argv = ["--run-dir", str(run_dir), "--steps", str(args.steps)]
    argv += ["--fingerprint-every", str(args.fingerprint_every)]
    if args.max_time is not None:
        argv += ["--max-time", f"{args.max_time:g}"]
    if args.target[0] == "-m":
        return [*argv, *args.target]
    return [*argv, "--", *args.target]


def plan_run(args: RunArgs) -> Plan:
    _validate(args)
    target = list(args.target)
    if target[0] != "-m":  # as torchrun resolves it: relative to the working directory
        target[0] = os.path.abspath(target[0])
    p = plan(args.launch, ["train"], options={"target": args.target})
    p.spec.module = "ddpdoctor.trace"
    p.spec.worker_argv = tracer_argv(RunArgs(**{**args.__dict__, "target": target}), p.spec.run_dir)
    p.spec.deadline_override_s = (args.max_time or UNBOUNDED_S) + 2 * p.spec.grace_s
    p.job.command = torchrun_command(p.spec)
    return p


class LiveOutput:
    """Rank 0's own output, shown as it comes (its log under the launcher), as plain torchrun
    would show it; the other ranks' output stays in their logs."""

    def __init__(self, folder: RunFolder, enabled: bool) -> None:
        self.path, self.enabled, self.offset = folder.log_file(0), enabled, 0

    def __call__(self, beats: dict[int, Heartbeat] | None = None, elapsed: float = 0.0) -> None:
        if not self.enabled:
            return
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(1 << 20)
        except OSError:
            return
        if chunk:
            self.offset += len(chunk)
            sys.stdout.write(chunk.decode("utf-8", errors="replace"))
            sys.stdout.flush()


def _judge(
    run_dir: Path,
    job: JobSpec,
    outcome: LaunchOutcome | None,
    found: list[Finding],
    dumps: dict[int, str],
) -> Report:
    from ddpdoctor.trace.assemble import assemble

    return assemble(run_dir, job, outcome, stacks=dumps, launch_problems=found)


def run(args: RunArgs) -> int:
    from ddpdoctor.report import render

    p = plan_run(args)
    json_path = args.launch.json_path
    live = LiveOutput(RunFolder(p.spec.run_dir), enabled=json_path != "-")
    shown = args.target[1] if args.target[0] == "-m" else Path(args.target[0]).name
    title = f"ddpdoctor run {shown}"
    with launched(
        p,
        title,
        False,
        args.launch.ascii_only,
        judge=_judge,
        on_tick=live,
    ) as report:
        live()  # what rank 0 printed last
        failed = None
        if json_path:
            failed = schema.try_write(lambda: schema.write(to_json(report), json_path), json_path)
        if failed:
            p.keep_run_dir = True
        if json_path != "-":
            if live.offset:
                print()
            render.report(
                report,
                verbose=args.launch.verbose,
                ascii_only=args.launch.ascii_only,
                run_dir=kept_run_dir(p, report),
                title=title,
            )
        return output_failed(failed) if failed else exit_code(report, args.fail_on)
