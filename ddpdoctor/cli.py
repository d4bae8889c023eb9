"""The typer app: one thin function per command (parse → call → render → exit code). Heavy
modules (torch, rich, the launcher) are imported inside the commands so `ddpdoctor --help`
stays fast."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ddpdoctor import __version__
from ddpdoctor.errors import EXIT_INTERNAL, EXIT_USAGE, DoctorError, UsageError, printable
from ddpdoctor.options import (
    AsciiOpt,
    BackendOpt,
    DebugOpt,
    ExcludeFileOpt,
    FailOnOpt,
    HostsOpt,
    JsonOpt,
    LocalizeOpt,
    MasterAddrOpt,
    MasterPortOpt,
    NnodesOpt,
    NodeRankOpt,
    NprocOpt,
    RdzvBackendOpt,
    RdzvEndpointOpt,
    RdzvIdOpt,
    RdzvTimeoutOpt,
    RunDirOpt,
    TimeoutOpt,
    VerboseOpt,
)

app = typer.Typer(
    name="ddpdoctor",
    help="Find what is wrong with distributed PyTorch training, and say what to fix.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _launch_args(params: dict[str, Any]) -> Any:
    """The launch options every launching command shares, from that command's parameters (typer
    needs each option as a parameter; the dataclass names them once)."""
    from dataclasses import fields

    from ddpdoctor.job.plan import LaunchArgs

    names = {f.name for f in fields(LaunchArgs)}
    return LaunchArgs(**{k: v for k, v in params.items() if k in names})


def _version(value: bool) -> None:
    if value:
        print(f"ddpdoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Find what is wrong with distributed PyTorch training, and say what to fix."""


@app.command()
def check(
    nproc: NprocOpt = None,
    backend: BackendOpt = "auto",
    only: Annotated[
        str | None, typer.Option("--only", help="Run only these checks (comma-separated ids).")
    ] = None,
    skip: Annotated[
        str | None, typer.Option("--skip", help="Skip these checks (comma-separated ids).")
    ] = None,
    timeout: TimeoutOpt = 30.0,
    json_path: JsonOpt = None,
    fail_on: FailOnOpt = "fail",
    verbose: VerboseOpt = False,
    ascii_only: AsciiOpt = False,
    master_addr: MasterAddrOpt = None,
    master_port: MasterPortOpt = None,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
    rdzv_id: RdzvIdOpt = None,
    rdzv_backend: RdzvBackendOpt = None,
    hosts: HostsOpt = None,
    rdzv_timeout: RdzvTimeoutOpt = 60.0,
    exclude_file: ExcludeFileOpt = None,
    localize: LocalizeOpt = False,
    run_dir: RunDirOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Probe every rank through torchrun and report in one place."""
    from ddpdoctor.job import command

    launch = _launch_args(locals())
    args = command.CheckArgs(launch=launch, only=only, skip=skip, fail_on=fail_on)
    raise typer.Exit(command.run(args))


@app.command("bench-allreduce")
def bench_allreduce(
    nproc: NprocOpt = None,
    backend: BackendOpt = "auto",
    min_bytes: Annotated[
        str,
        typer.Option("--min-bytes", "-b", help="Smallest message (8, 4K, 1M, 1G: powers of 1024)."),
    ] = "8",
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes", "-e", help="Largest message. Default: 256M on GPUs, 64M on CPU."
        ),
    ] = None,
    factor: Annotated[
        int, typer.Option("--factor", "-f", help="Multiply the size by this between steps.")
    ] = 2,
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed all_reduces per size.")] = 20,
    warmup: Annotated[
        int, typer.Option("--warmup", "-w", help="Untimed all_reduces per size first.")
    ] = 5,
    dtype: Annotated[
        str, typer.Option("--dtype", "-d", help="float32 | float16 | bfloat16 | float64 | int32")
    ] = "float32",
    op: Annotated[
        str, typer.Option("--op", "-o", help="sum | max | min | avg (avg: NCCL only).")
    ] = "sum",
    timeout: TimeoutOpt = 30.0,
    json_path: JsonOpt = None,
    csv_path: Annotated[
        str | None, typer.Option("--csv", metavar="PATH", help="Also write the rows as CSV.")
    ] = None,
    expect_busbw: Annotated[
        float | None,
        typer.Option(
            "--expect-busbw",
            metavar="GBPS",
            help="Exit 1 when the average busbw over sizes >= 1 MiB is lower.",
        ),
    ] = None,
    pairs: Annotated[
        bool,
        typer.Option(
            "--pairs",
            help="Measure every pair of nodes (or ranks) in disjoint rounds; name slow ones.",
        ),
    ] = False,
    slow_ratio: Annotated[
        float,
        typer.Option(
            "--slow-ratio", help="With --pairs: a pair below this fraction of the median is slow."
        ),
    ] = 0.7,
    verbose: VerboseOpt = False,
    ascii_only: AsciiOpt = False,
    master_addr: MasterAddrOpt = None,
    master_port: MasterPortOpt = None,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
    rdzv_id: RdzvIdOpt = None,
    rdzv_backend: RdzvBackendOpt = None,
    hosts: HostsOpt = None,
    rdzv_timeout: RdzvTimeoutOpt = 60.0,
    exclude_file: ExcludeFileOpt = None,
    localize: LocalizeOpt = False,
    run_dir: RunDirOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Measure all_reduce bandwidth over message sizes, as nccl-tests' all_reduce_perf does."""
    from ddpdoctor.bench import command as bench_command

    launch = _launch_args(locals())
    code = bench_command.run(
        bench_command.BenchArgs(
            launch=launch,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            factor=factor,
            iters=iters,
            warmup=warmup,
            dtype=dtype,
            op=op,
            csv_path=csv_path,
            expect_busbw=expect_busbw,
            pairs=pairs,
            slow_ratio=slow_ratio,
        )
    )
    raise typer.Exit(code)


@app.command()
def lint(
    paths: Annotated[
        list[str],
        typer.Argument(metavar="PATH", help="Python files or folders to lint.", show_default=False),
    ],
    output_format: Annotated[
        str, typer.Option("--format", "-f", metavar="FORMAT", help="text | json | sarif.")
    ] = "text",
    select: Annotated[
        str | None,
        typer.Option(
            "--select",
            metavar="CODES",
            help="Only these rule codes (comma-separated; prefixes work).",
        ),
    ] = None,
    ignore: Annotated[
        str | None,
        typer.Option("--ignore", metavar="CODES", help="Skip these rule codes (comma-separated)."),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="PATH", help="Write the report here, not stdout."),
    ] = None,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            metavar="DIR",
            help="The project whose imports are followed (default: the nearest folder above "
            "the paths with pyproject.toml or .git, else their common folder).",
        ),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Find DDP mistakes in training scripts without running them (pure static analysis)."""
    from ddpdoctor.lint import command

    args = command.LintArgs(paths, output_format, select, ignore, output, root)
    raise typer.Exit(command.run(args))


@app.command()
def explain(
    path: Annotated[
        str,
        typer.Argument(
            metavar="[FILE|DIR|-]",
            help="Log or ticket text, flight-recorder dumps (files or a folder) or NCCL RAS "
            "text; '-' or nothing = stdin.",
        ),
    ] = "-",
    json_path: JsonOpt = None,
    ascii_only: AsciiOpt = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="auto | grep | python: how lines are scanned (auto = grep if usable).",
            hidden=True,
        ),
    ] = "auto",
    max_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-bytes",
            help="Read at most this many bytes (default 8 GiB); the report says when it cut.",
            hidden=True,
        ),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Explain a crash log, a pasted ticket or a hung job's flight-recorder dumps: the root
    cause, the evidence, why, and the fix."""
    from ddpdoctor.triage import command

    args = command.ExplainArgs(path, json_path, ascii_only, engine, max_bytes)
    raise typer.Exit(command.explain(args))


@app.command()
def env(
    json_path: JsonOpt = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a fenced block to paste into a ticket.")
    ] = False,
    ascii_only: AsciiOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A paste-safe snapshot of this node: versions, GPUs, CPU, /dev/shm, network, variables."""
    from ddpdoctor.triage import command

    raise typer.Exit(command.env(command.EnvArgs(json_path, markdown, ascii_only)))


@app.command()
def node(
    timeout: Annotated[
        float, typer.Option("--timeout", help="Deadline in seconds for the whole check.")
    ] = 30.0,
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect",
            metavar="FILE",
            help="Expected values (JSON or TOML): GPU count, models, versions, floors per machine type.",
        ),
    ] = None,
    save_baseline: Annotated[
        str | None,
        typer.Option(
            "--save-baseline",
            metavar="FILE",
            help="Record this (good) node as an --expect file (.toml or .json).",
        ),
    ] = None,
    json_path: JsonOpt = None,
    out_dir: Annotated[
        str | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Write this node's report to DIR/<node>.json (under srun: a shared folder).",
        ),
    ] = None,
    collect: Annotated[
        str | None,
        typer.Option(
            "--collect",
            metavar="DIR",
            help="Read the reports in DIR: group nodes, name the odd ones.",
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        typer.Option(
            "--hosts",
            metavar="HOSTLIST",
            help="With --collect: the nodes that should have reported (default: SLURM_JOB_NODELIST).",
        ),
    ] = None,
    exclude_file: Annotated[
        str | None,
        typer.Option(
            "--exclude-file",
            metavar="PATH",
            help="Write the failing nodes as a host list for srun --exclude.",
        ),
    ] = None,
    node_name: Annotated[
        str | None,
        typer.Option(
            "--node-name",
            help="This node's name in reports (default: SLURMD_NODENAME, else the short hostname).",
        ),
    ] = None,
    perf: Annotated[
        bool, typer.Option("--perf/--no-perf", help="Run the short compute and bandwidth test.")
    ] = True,
    rdma_interval: Annotated[
        float,
        typer.Option("--rdma-interval", help="Seconds between the two reads of the RDMA counters."),
    ] = 2.0,
    fail_on: FailOnOpt = "fail",
    verbose: VerboseOpt = False,
    ascii_only: AsciiOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Check this node before any rendezvous (GPUs, links, RDMA, host, speed), or --collect many."""
    from ddpdoctor.node import command

    args = command.NodeArgs(
        timeout=timeout,
        expect=expect,
        save_baseline=save_baseline,
        json_path=json_path,
        out_dir=out_dir,
        collect=collect,
        hosts=hosts,
        exclude_file=exclude_file,
        node_name=node_name,
        perf=perf,
        rdma_interval=rdma_interval,
        fail_on=fail_on,
        ascii_only=ascii_only,
        verbose=verbose,
    )
    raise typer.Exit(command.run(args))


@app.command(
    "run",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def run_cmd(
    target: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[--] SCRIPT [ARGS...]",
            help="Your training script and its arguments, exactly as you give them to torchrun.",
        ),
    ] = None,
    module: Annotated[
        str | None,
        typer.Option("-m", "--module", help="Run a module as torchrun -m does (python -m MODULE)."),
    ] = None,
    steps: Annotated[
        int,
        typer.Option(
            "--steps", help="Stop every rank cleanly after N optimizer steps; 0 = to the end."
        ),
    ] = 50,
    max_time: Annotated[
        float | None,
        typer.Option(
            "--max-time", metavar="SECONDS", help="Stop every rank cleanly after this long."
        ),
    ] = None,
    fingerprint_every: Annotated[
        int,
        typer.Option(
            "--fingerprint-every",
            help="Compare the replicas' parameters every K steps (0 = never).",
        ),
    ] = 10,
    nproc: NprocOpt = None,
    backend: BackendOpt = "auto",
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="The longest one training step (or a collective) may take before a rank is hung.",
        ),
    ] = 60.0,
    json_path: JsonOpt = None,
    fail_on: FailOnOpt = "fail",
    verbose: VerboseOpt = False,
    ascii_only: AsciiOpt = False,
    master_addr: MasterAddrOpt = None,
    master_port: MasterPortOpt = None,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
    rdzv_id: RdzvIdOpt = None,
    rdzv_backend: RdzvBackendOpt = None,
    run_dir: RunDirOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Run your own training job on every rank, traced, and report what it does wrong."""
    from ddpdoctor.trace import command

    launch = _launch_args(locals())
    words = list(target or [])
    if words[:1] == ["--"]:
        words = words[1:]
    if module is not None:
        words = ["-m", module, *words]
    args = command.RunArgs(launch, words, steps, max_time, fingerprint_every, fail_on)
    raise typer.Exit(command.run(args))


@app.command("report")
def report_cmd(
    run_dir: Annotated[
        str, typer.Argument(help="A run folder (--run-dir, or one kept after a failure).")
    ],
    json_path: JsonOpt = None,
    fail_on: FailOnOpt = "fail",
    verbose: VerboseOpt = False,
    ascii_only: AsciiOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Judge and print the report of a run folder again (a kept run, or one from a ticket)."""
    from ddpdoctor.job import command

    args = command.ReportArgs(run_dir, json_path, fail_on, verbose, ascii_only)
    raise typer.Exit(command.report(args))


@app.command()
def problems(
    json_path: JsonOpt = None,
    ascii_only: AsciiOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List every code ddpdoctor can report (probes, node, lint rules, log signatures), with why
    and the fix."""
    from ddpdoctor.report import catalog

    raise typer.Exit(catalog.run(catalog.ProblemsArgs(json_path, ascii_only)))


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error becomes one line and an exit code, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        code = app(args=args, prog_name="ddpdoctor", standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        print("ddpdoctor: interrupted", file=sys.stderr)
        code = 130
    except UsageError as e:
        print(f"ddpdoctor: error: {printable(str(e))}", file=sys.stderr)
        code = EXIT_USAGE
    except DoctorError as e:
        print(f"ddpdoctor: {printable(str(e))}", file=sys.stderr)
        code = e.exit_code
    except KeyboardInterrupt:
        print("ddpdoctor: interrupted", file=sys.stderr)
        code = 130
    except Exception as e:
        # typer's parse errors (click's, or typer's vendored copy of them) know how to word
        # themselves; match by behaviour so either generation of typer works.
        if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
            if debug:
                raise
            print(
                f"ddpdoctor: internal error: {type(e).__name__}: {printable(str(e))} "
                "(rerun with --debug for the traceback)",
                file=sys.stderr,
            )
            sys.exit(EXIT_INTERNAL)
        hint = ""
        ctx = getattr(e, "ctx", None)
        if ctx is not None:
            hint = f" (see '{ctx.command_path} --help')"
        print(f"ddpdoctor: error: {printable(e.format_message())}{hint}", file=sys.stderr)
        code = EXIT_USAGE if e.exit_code == EXIT_USAGE else e.exit_code
    sys.exit(code or 0)
