"""`ddpdoctor bench-allreduce`: nccl-tests' all_reduce_perf from Python, through the same launcher
as `check`, plus what nccl-tests lacks: per-rank correctness, the slowest rank named, a JSON
document and a pass/fail gate (--expect-busbw)."""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from ddpdoctor.bench import engine, sweep
from ddpdoctor.errors import UsageError
from ddpdoctor.job.plan import LaunchArgs, plan
from ddpdoctor.job.session import exit_code, kept_run_dir, launched, output_failed
from ddpdoctor.report import schema
from ddpdoctor.report.model import Report
from ddpdoctor.report.units import human_bytes

GLOO_OPS = ("sum", "max", "min")


@dataclass
class BenchArgs:
    launch: LaunchArgs = field(default_factory=LaunchArgs)
    min_bytes: str = "8"
    max_bytes: str | None = None
    factor: int = 2
    iters: int = 20
    warmup: int = 5
    dtype: str = "float32"
    op: str = "sum"
    csv_path: str | None = None
    expect_busbw: float | None = None
    pairs: bool = False
    slow_ratio: float = 0.7


def _size(text: str, opt: str) -> int:
    try:
        n = engine.parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{opt}: {exc}") from None
    if n <= 0:
        raise UsageError(f"{opt} must be at least 1 byte")
    return n


def options(args: BenchArgs, backend: str) -> dict[str, Any]:
    """Validate the sweep; every usage error is raised before anything is launched."""
    if args.dtype not in engine.DTYPE_BYTES:
        raise UsageError(
            f"--dtype must be one of {', '.join(engine.DTYPE_BYTES)}, not {args.dtype!r}"
        )
    if args.op not in engine.OPS:
        raise UsageError(f"--op must be one of {', '.join(engine.OPS)}, not {args.op!r}")
    if backend == "gloo" and args.op not in GLOO_OPS:
        raise UsageError(f"--op {args.op} is not supported by gloo (use {', '.join(GLOO_OPS)})")
    if args.iters < 1:
        raise UsageError(f"--iters must be at least 1, not {args.iters}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {args.warmup}")
    if args.factor < 2:
        raise UsageError(f"--factor must be at least 2, not {args.factor}")
    if args.expect_busbw is not None and not (
        args.expect_busbw > 0 and math.isfinite(args.expect_busbw)
    ):
        raise UsageError("--expect-busbw must be a positive number of GB/s")
    if not 0 < args.slow_ratio < 1:
        raise UsageError(f"--slow-ratio must be between 0 and 1, not {args.slow_ratio:g}")
    lo = _size(args.min_bytes, "--min-bytes")
    if args.pairs:  # one message size per pair: big enough to measure bandwidth, quick on CPU
        default_hi = 64 << 20 if backend == "nccl" else 4 << 20
    else:
        default_hi = 256 << 20 if backend == "nccl" else 64 << 20
    hi = _size(args.max_bytes, "--max-bytes") if args.max_bytes else default_hi
    if lo > hi:
        raise UsageError(
            f"--min-bytes ({human_bytes(lo)}) is larger than --max-bytes ({human_bytes(hi)})"
        )
    if hi > 16 << 30:
        raise UsageError("--max-bytes above 16G is not supported")
    if args.expect_busbw is not None and hi < engine.BANDWIDTH_MIN_BYTES:
        raise UsageError(
            f"--expect-busbw needs sizes of {human_bytes(engine.BANDWIDTH_MIN_BYTES)} or more "
            f"(--max-bytes is {human_bytes(hi)})"
        )
    schema.check_writable(args.csv_path)
    if args.csv_path == "-" and args.launch.json_path == "-":
        raise UsageError("--json - and --csv - cannot both have stdout; give one of them a file")
    return {
        "min_bytes": lo,
        "max_bytes": hi,
        "factor": args.factor,
        "iters": args.iters,
        "warmup": args.warmup,
        "dtype": args.dtype,
        "op": args.op,
        "expect_busbw": args.expect_busbw,
        "slow_ratio": args.slow_ratio,
    }


def document(report: Report, opts: dict[str, Any]) -> dict[str, Any]:
    """The `ddpdoctor.bench/1` JSON document."""
    row = next((c for c in report.checks if c.id == "bench"), None)
    rows = (row.metrics.get("rows") if row else None) or []
    pairs = next((c for c in report.checks if c.id == "pairs"), None)
    extra: dict[str, Any] = {}
    if pairs is not None:
        extra = {
            "pairs": pairs.metrics.get("pairs", []),
            "units": pairs.metrics.get("units", []),
            "median_busbw_gbps": pairs.metrics.get("median_busbw_gbps"),
            "slow_ratio": opts["slow_ratio"],
        }
    return extra | {
        "schema": schema.tag("bench"),
        "status": report.status,
        "backend": report.backend,
        "world_size": report.world_size,
        "nnodes": report.nnodes,
        "dtype": opts["dtype"],
        "op": opts["op"],
        "iters": opts["iters"],
        "warmup": opts["warmup"],
        "rows": rows,
        "avg_busbw_gbps": row.metrics.get("avg_busbw_gbps") if row else None,
        "expect_busbw_gbps": opts.get("expect_busbw"),
        "duration_s": report.duration_s,
        "findings": [f.to_json() for c in report.checks for f in c.findings],
        "ranks": [s.to_json() for s in report.ranks],
        "root_cause": report.root_cause,
    }


def write_csv(doc: dict[str, Any], path: str) -> None:
    """The rows as CSV, to a file or to stdout for '-' (as --json takes it)."""
    import io

    cols = [
        "bytes",
        "count",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "wrong",
        "slowest_rank",
        "slowest_us",
        "fastest_rank",
        "fastest_us",
    ]
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["dtype", "op", *cols])
    for r in doc["rows"]:
        w.writerow([doc["dtype"], doc["op"], *(r[c] for c in cols)])
    if path == "-":
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
    else:
        schema.write_text(path, buf.getvalue())


def run(args: BenchArgs) -> int:
    from ddpdoctor.node import gpus
    from ddpdoctor.report import render

    count, source = gpus.visible_gpus()
    backend, _why = gpus.resolve_backend(args.launch.backend, count, source)
    opts = options(args, backend)
    if args.pairs:
        job, steps = ["pairs"], 2 * args.launch.nnodes * (args.launch.nproc or 8) + 2  # ~ rounds
    else:
        sizes = sweep.sizes(opts["min_bytes"], opts["max_bytes"], opts["factor"], opts["dtype"])
        job, steps = ["bench"], len(sizes) + 2
    p = plan(args.launch, job, options={"bench": opts}, steps=steps)
    json_only = "-" in (args.launch.json_path, args.csv_path)  # stdout carries only that
    title = "ddpdoctor bench-allreduce"
    with launched(p, title, not json_only, args.launch.ascii_only) as report:
        doc = document(report, opts)
        failed = None
        if args.launch.json_path:
            path = args.launch.json_path
            failed = schema.try_write(lambda: schema.write(doc, path), path)
        if args.csv_path and not failed:
            csv_path = args.csv_path
            failed = schema.try_write(lambda: write_csv(doc, csv_path), csv_path)
        if failed:
            p.keep_run_dir = True
        if not json_only:
            render.bench(
                report,
                doc,
                verbose=args.launch.verbose,
                ascii_only=args.launch.ascii_only,
                run_dir=kept_run_dir(p, report),
            )
        return output_failed(failed) if failed else exit_code(report, "fail")
