"""`ddpdoctor check`: probe every rank through torchrun and report in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpdoctor import registry
from ddpdoctor.job.collect import to_json
from ddpdoctor.job.plan import LaunchArgs, check_fail_on, plan
from ddpdoctor.job.session import exit_code, kept_run_dir, launched, output_failed
from ddpdoctor.report import schema


@dataclass
class CheckArgs:
    launch: LaunchArgs = field(default_factory=LaunchArgs)
    only: str | None = None
    skip: str | None = None
    fail_on: str = "fail"


def run(args: CheckArgs) -> int:
    from ddpdoctor.report import render

    check_fail_on(args.fail_on)
    p = plan(args.launch, registry.select(args.only, args.skip))
    json_path = args.launch.json_path
    with launched(p, "ddpdoctor check", json_path != "-", args.launch.ascii_only) as report:
        failed = None
        if json_path:
            failed = schema.try_write(lambda: schema.write(to_json(report), json_path), json_path)
        if failed:
            p.keep_run_dir = True
        if json_path != "-":
            render.report(
                report,
                verbose=args.launch.verbose,
                ascii_only=args.launch.ascii_only,
                run_dir=kept_run_dir(p, report),
            )
        return output_failed(failed) if failed else exit_code(report, args.fail_on)


@dataclass
class ReportArgs:
    run_dir: str
    json_path: str | None = None
    fail_on: str = "fail"
    verbose: bool = False
    ascii_only: bool = False


def report(args: ReportArgs) -> int:
    """`ddpdoctor report RUN_DIR`: the same judging as at the end of a run, from the files alone
    (rank 0 under the user's own launcher prints its report this way too)."""
    from ddpdoctor.errors import UsageError
    from ddpdoctor.job.collect import assemble
    from ddpdoctor.report import render
    from ddpdoctor.runfiles import RunFolder

    check_fail_on(args.fail_on)
    schema.check_writable(args.json_path)
    folder = RunFolder(args.run_dir)
    if not folder.path.is_dir():
        raise UsageError(f"{args.run_dir} is not a folder")
    spec = folder.read_spec()
    if spec is None:
        raise UsageError(
            f"{args.run_dir} holds no readable {folder.spec_file.name}: not a run folder"
        )
    rep = assemble(folder.path, spec, outcome=None)
    if args.json_path:
        schema.write(to_json(rep), args.json_path)
    if args.json_path != "-":
        render.report(rep, verbose=args.verbose, ascii_only=args.ascii_only)
    return exit_code(rep, args.fail_on)
