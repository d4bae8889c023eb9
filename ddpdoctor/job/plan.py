"""Parse → config: the launch options every command shares become a validated `Plan` (the
torchrun `LaunchSpec` and the `JobSpec` the ranks read) before anything is started. Every usage
error is raised here (torchrun's own shape: `launcher/api.py`)."""

from __future__ import annotations

import importlib.util
import math
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpdoctor import runfiles
from ddpdoctor.errors import CannotRun, UsageError, printable
from ddpdoctor.job.bringup import Bringup, resolve
from ddpdoctor.job.launch import LaunchSpec, free_port, port_busy, torchrun_command
from ddpdoctor.node import gpus
from ddpdoctor.report import problems, schema
from ddpdoctor.report.model import Finding
from ddpdoctor.runfiles import JobSpec

BACKENDS = ("auto", "nccl", "gloo")
FAIL_ON = ("warn", "fail")
LOCAL_ADDRS = {None, "", "127.0.0.1", "localhost", "0.0.0.0", "::1"}


@dataclass
class LaunchArgs:
    """The options of every command that launches ranks (check, bench-allreduce)."""

    nproc: int | None = None
    backend: str = "auto"
    timeout: float = 30.0
    json_path: str | None = None
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
    hosts: str | None = None  # the job's nodes in node-rank order (default: the Slurm step's)
    rdzv_timeout: float = 60.0  # how long every node may take to join; then the absent are named
    exclude_file: str | None = None
    localize: bool = False


@dataclass
class Plan:
    """Validated arguments: what will be launched and how it will be judged."""

    spec: LaunchSpec
    job: JobSpec  # written to spec.json for the workers
    keep_run_dir: bool
    lock: Any = None  # held for the whole run: a second run in the same --run-dir is refused
    bringup: Bringup | None = None  # multi-node: the hosts, the rendezvous deadline, --localize


def claim_run_dir(run_dir: Path) -> Any:
    """A --run-dir we can use: created if needed, writable, not in use by another run (locked
    for this one), and emptied of the files an earlier run left, ours only."""
    shown = printable(str(run_dir))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        folder = runfiles.RunFolder(run_dir)
        lock = folder.lock()
        if lock is None:
            raise UsageError(f"--run-dir {shown} is in use by another ddpdoctor run")
        folder.remove_stale()
    except OSError as exc:
        name = f" ({printable(exc.filename)})" if exc.filename else ""
        raise UsageError(f"cannot use --run-dir {shown}: {exc.strerror}{name}") from None
    return lock


def check_fail_on(fail_on: str) -> None:
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on must be warn or fail, not {fail_on!r}")


def plan(
    args: LaunchArgs,
    checks: list[str],
    options: dict[str, Any] | None = None,
    steps: int | None = None,
) -> Plan:
    """Validate the launch of `checks` (check ids, or a job shaped like a check such as the bench
    sweep). `steps` bounds the run's length in collective steps (default: one per check)."""
    args = _with_slurm(args)
    if args.backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {args.backend!r}")
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
    schema.check_writable(args.json_path)
    schema.check_writable(args.exclude_file)
    rdzv_port = args.master_port
    if args.rdzv_endpoint and args.rdzv_endpoint.rpartition(":")[2].isdigit():
        rdzv_port = int(args.rdzv_endpoint.rpartition(":")[2])
    bringup = resolve(args, rdzv_port)

    count, source = gpus.visible_gpus()
    backend, reason = gpus.resolve_backend(args.backend, count, source)
    if backend == "nccl" and count == 0:
        raise UsageError("--backend nccl needs GPUs, and none is visible here (use --backend gloo)")
    nproc = args.nproc if args.nproc is not None else (count or 2)
    if not 1 <= nproc <= 1024:
        raise UsageError(f"--nproc must be between 1 and 1024, not {nproc}")
    _check_memory(nproc, backend)
    if importlib.util.find_spec("torch") is None:
        raise CannotRun(
            "torch is not installed in this Python, so torchrun cannot start (pip install torch)"
        )

    if args.run_dir:
        run_dir = Path(args.run_dir)
        lock = claim_run_dir(run_dir)
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="ddpdoctor-"))
        lock = runfiles.RunFolder(run_dir).lock()

    port = args.master_port
    if port is None and not args.rdzv_endpoint:
        port = free_port()
    nonce = _nonce(args, checks)
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
        nonce=nonce,
        startup_s=bringup.rdzv_timeout,
    )
    job = JobSpec(
        checks=list(checks),
        timeout=args.timeout,
        backend=backend,
        backend_reason=reason,
        nonce=nonce,
        managed=True,
        nnodes=args.nnodes,
        world_size=nproc * args.nnodes,
        master_port=port,
        master_addr=args.master_addr or (args.rdzv_endpoint or "").rsplit(":", 1)[0] or None,
        node_rank=args.node_rank,
        options=options or {},
    )
    job.command = torchrun_command(spec)
    multi = args.nnodes > 1 or bool(args.exclude_file)
    return Plan(
        spec=spec,
        job=job,
        keep_run_dir=bool(args.run_dir),
        lock=lock,
        bringup=bringup if multi else None,
    )


CPU_RANK_BYTES = 350 << 20  # what one CPU rank of torch + gloo + the probes takes here


def _check_memory(nproc: int, backend: str) -> None:
    """Refuse a CPU run whose ranks cannot fit in memory (they would be OOM-killed one by one
    and look like crashes); on GPUs the host memory per rank is far smaller than the GPU's."""
    if backend != "gloo":
        return
    import psutil

    available = psutil.virtual_memory().available
    need = nproc * CPU_RANK_BYTES
    if need > available:
        raise UsageError(
            f"--nproc {nproc} needs about {need / 2**30:.1f} GiB on CPU ({CPU_RANK_BYTES >> 20} MiB "
            f"per rank) and this machine has {available / 2**30:.1f} GiB available"
        )


def _nonce(args: LaunchArgs, checks: list[str]) -> str:
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


def _with_slurm(args: LaunchArgs) -> LaunchArgs:
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


def preflight(p: Plan) -> list[Finding]:
    """Launch faults we can name before starting anything."""
    spec = p.spec
    found = []
    hosts_store = (
        spec.node_rank in (None, 0) and spec.master_addr in LOCAL_ADDRS and not spec.rdzv_endpoint
    )
    if hosts_store and spec.master_port and port_busy(spec.master_port):
        found.append(
            problems.PORT_IN_USE.finding(
                f"--master-port {spec.master_port} is already in use on this host (another job or a stale "
                f"process holds it); torchrun's store cannot listen there",
                [],
                port=spec.master_port,
            )
        )
    return found
