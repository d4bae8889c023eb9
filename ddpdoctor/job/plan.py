"""`ddpdoctor check`: validate the arguments into a LaunchSpec, launch, collect, render, decide
the exit code. Parse → config → act (torchrun's own shape)."""

from __future__ import annotations

import importlib.util
import math
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpdoctor import registry
from ddpdoctor import runfiles as rundir
from ddpdoctor.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, CannotRun, UsageError
from ddpdoctor.job import collect
from ddpdoctor.job.launch import LaunchOutcome, LaunchSpec, free_port, port_busy
from ddpdoctor.node import gpus
from ddpdoctor.report import schema
from ddpdoctor.report.model import Report
from ddpdoctor.report.problems import get

BACKENDS = ("auto", "nccl", "gloo")
FAIL_ON = ("warn", "fail")
LOCAL_ADDRS = {None, "", "127.0.0.1", "localhost", "0.0.0.0", "::1"}


@dataclass
class CheckArgs:
    nproc: int | None = None
    backend: str = "auto"
    only: str | None = None
    skip: str | None = None
    timeout: float = 30.0
    json_path: str | None = None
    fail_on: str = "fail"
    verbose: bool = False
    ascii_only: bool = False
    master_addr: str | None = None
    master_port: int | None = None
    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_backend: str | None = None
    run_dir: str | None = None


@dataclass
class Plan:
    """Validated arguments: what will be launched and how it will be judged."""

    spec: LaunchSpec
    job: dict[str, Any]  # written to spec.json for the workers
    keep_run_dir: bool


def plan(
    args: CheckArgs,
    job_checks: list[str] | None = None,
    options: dict[str, Any] | None = None,
    steps: int | None = None,
) -> Plan:
    """Every usage error is raised here, before anything is started. `job_checks` replaces the check
    selection for commands that run another job through the same launcher (bench-allreduce);
    `steps` bounds the run's length in collective steps (default: one per check)."""
    args = _with_slurm(args)
    if args.backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {args.backend!r}")
    if args.fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on must be warn or fail, not {args.fail_on!r}")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    if args.nnodes < 1:
        raise UsageError(f"--nnodes must be at least 1, not {args.nnodes}")
    if args.node_rank is not None and not 0 <= args.node_rank < args.nnodes:
        raise UsageError(f"--node-rank must be in 0..{args.nnodes - 1}, not {args.node_rank}")
    if args.master_port is not None and not 0 < args.master_port < 65536:
        raise UsageError(f"--master-port must be in 1..65535, not {args.master_port}")
    if args.rdzv_backend not in (None, "c10d", "static", "etcd", "etcd-v2"):
        raise UsageError(f"--rdzv-backend must be c10d or static, not {args.rdzv_backend!r}")
    checks = job_checks if job_checks is not None else registry.select(args.only, args.skip)
    schema.check_writable(args.json_path)

    count, source = gpus.visible_gpus()
    backend, reason = gpus.resolve_backend(args.backend, count, source)
    if backend == "nccl" and count == 0:
        raise UsageError("--backend nccl needs GPUs, and none is visible here (use --backend gloo)")
    nproc = args.nproc if args.nproc is not None else (count or 2)
    if not 1 <= nproc <= 1024:
        raise UsageError(f"--nproc must be between 1 and 1024, not {nproc}")
    if importlib.util.find_spec("torch") is None:
        raise CannotRun(
            "torch is not installed in this Python, so torchrun cannot start (pip install torch)"
        )

    if args.run_dir:
        run_dir = Path(args.run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use --run-dir {args.run_dir}: {exc.strerror}") from None
        for stale in [*run_dir.glob("rank-*"), run_dir / rundir.GATHERED]:
            stale.unlink(missing_ok=True)
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="ddpdoctor-"))

    port = args.master_port
    if port is None and not args.rdzv_endpoint:
        port = free_port()
    spec = LaunchSpec(
        nproc=nproc,
        run_dir=run_dir,
        timeout=args.timeout,
        checks_count=steps or len(checks) + 1,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=port,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
        rdzv_backend=args.rdzv_backend,
    )
    job = {
        "checks": checks,
        "timeout": args.timeout,
        "backend": backend,
        "backend_reason": reason,
        "nonce": _nonce(args, checks),
        "managed": True,
        "nnodes": args.nnodes,
        "world_size": nproc * args.nnodes,
        "master_port": port,
        "master_addr": args.master_addr or (args.rdzv_endpoint or "").rsplit(":", 1)[0] or None,
        "node_rank": args.node_rank,
        "port_given": args.master_port is not None,
        "options": options or {},
    }
    return Plan(spec=spec, job=job, keep_run_dir=bool(args.run_dir))


def _nonce(args: CheckArgs, checks: list[str]) -> str:
    """What every rank of one run must agree on. One node: random. Several nodes: each node's
    ddpdoctor derives it from the job's shared parameters, so only a rank of another job (or of
    the same job started with other options) disagrees."""
    if args.nnodes <= 1:
        return secrets.token_hex(8)
    import hashlib

    shared = [
        args.master_addr,
        args.master_port,
        args.rdzv_endpoint,
        args.rdzv_id,
        args.nnodes,
        args.timeout,
        ",".join(checks),
    ]
    return hashlib.sha1(repr(shared).encode()).hexdigest()[:16]


def _with_slurm(args: CheckArgs) -> CheckArgs:
    """Inside a multi-node srun, take placement from Slurm unless the user gave it explicitly."""
    import os
    from dataclasses import replace

    from ddpdoctor.job import slurm

    explicit = (
        args.nnodes != 1 or args.master_addr or args.rdzv_endpoint or args.node_rank is not None
    )
    where = None if explicit else slurm.placement(os.environ)
    if where is None:
        return args
    return replace(
        args,
        nnodes=where.nnodes,
        node_rank=where.node_rank,
        master_addr=where.master_addr,
        master_port=args.master_port or where.master_port,
    )


def preflight(p: Plan) -> list[Any]:
    """Launch faults we can name before starting anything."""
    spec = p.spec
    problems = []
    hosts_store = (
        spec.node_rank in (None, 0) and spec.master_addr in LOCAL_ADDRS and not spec.rdzv_endpoint
    )
    if hosts_store and spec.master_port and port_busy(spec.master_port):
        problems.append(
            get("port-in-use").finding(
                f"--master-port {spec.master_port} is already in use on this host (another job or a stale "
                f"process holds it); torchrun's store cannot listen there",
                [],
                port=spec.master_port,
            )
        )
    return problems


def launcher_problems(outcome: LaunchOutcome, any_rank_started: bool) -> list[Any]:
    """Faults only the launcher's own output shows: no rank ever started (torchrun died, or its
    rendezvous never completed), so the ranks cannot tell."""
    import re

    if any_rank_started or outcome.verdict == "interrupted":
        return []
    tail = outcome.launcher_tail
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for (
        pattern,
        symbol,
        meaning,
    ) in collect.KNOWN_ERRORS:  # the same words a rank's error would have
        hits = [ln for ln in lines if pattern.search(ln)]
        if hits and symbol != "peer-lost":
            return [get(symbol).finding(f"torchrun: {meaning}", [], evidence=hits[-3:])]
    telling = [
        ln
        for ln in lines
        if re.search(r"error|failed|refused|timed out|not known|exception", ln, re.I)
    ]
    last = telling[-1] if telling else (lines[-1] if lines else outcome.reason or "no output")
    how = (
        f"exited with code {outcome.returncode}"
        if outcome.verdict in ("finished", "launch-failed")
        else f"started no worker within {outcome.duration_s:.0f} s"
    )
    return [get("launch-failed").finding(f"torchrun {how}: {last[:300]}", [], evidence=lines[-15:])]


def execute(p: Plan, on_tick: Any = None) -> Report:
    """Launch (unless a pre-flight problem makes it pointless) and assemble the report."""
    from ddpdoctor.job import launch

    p.job["command"] = launch.torchrun_command(p.spec)
    rundir.write_json(p.spec.run_dir / rundir.SPEC, p.job)
    problems = preflight(p)
    outcome: LaunchOutcome | None = None
    if not problems:
        outcome = launch.run(p.spec, on_tick=on_tick)
        started = bool(rundir.read_beats(p.spec.run_dir))
        problems = launcher_problems(outcome, started)
    report = collect.assemble(p.spec.run_dir, p.job, outcome, launch_problems=problems)
    if outcome is not None and outcome.verdict == "interrupted":
        report.launch["verdict"] = "interrupted"
    return report


def exit_code(report: Report, fail_on: str) -> int:
    if report.launch.get("verdict") == "interrupted":
        return EXIT_INTERRUPTED
    bad = ("fail",) if fail_on == "fail" else ("fail", "warn")
    return EXIT_PROBLEMS if report.status in bad else EXIT_OK


@contextmanager
def launched(p: Plan, title: str, show_progress: bool, ascii_only: bool) -> Iterator[Report]:
    """Run the plan with the live progress display, yield the report; afterwards remove the
    temporary run folder if everything passed (a failed run keeps it for the ticket)."""
    from ddpdoctor.report import render

    report: Report | None = None
    try:
        with render.progress(
            enabled=show_progress,
            ascii_only=ascii_only,
            world_size=p.job["world_size"],
            title=title,
        ) as tick:
            report = execute(p, on_tick=tick)
        yield report
    finally:
        if not p.keep_run_dir and report is not None and report.status == "pass":
            shutil.rmtree(p.spec.run_dir, ignore_errors=True)


def kept_run_dir(p: Plan, report: Report) -> str | None:
    """The run folder to point the user at: given by them, or kept because something failed."""
    return str(p.spec.run_dir) if p.keep_run_dir or report.status != "pass" else None


def run(args: CheckArgs) -> int:
    from ddpdoctor.report import render

    p = plan(args)
    with launched(p, "ddpdoctor check", args.json_path != "-", args.ascii_only) as report:
        if args.json_path:
            schema.write(collect.to_json(report), args.json_path)
        if args.json_path != "-":
            render.report(
                report,
                verbose=args.verbose,
                ascii_only=args.ascii_only,
                run_dir=kept_run_dir(p, report),
            )
        return exit_code(report, args.fail_on)
