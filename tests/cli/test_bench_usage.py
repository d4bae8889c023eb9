"""bench-allreduce's bad values are usage errors (one line, exit 2) before anything launches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddpdoctor.bench import engine, sweep

BAD = [
    (
        ["--min-bytes", "2M", "--max-bytes", "1M"],
        "--min-bytes (2 MiB) is larger than --max-bytes (1 MiB)",
    ),
    (["--min-bytes", "4Q"], "--min-bytes: not a size: '4Q'"),
    (["--max-bytes", "0"], "--max-bytes must be at least 1 byte"),
    (["--iters", "0"], "--iters must be at least 1"),
    (["--warmup", "-1"], "--warmup must be 0 or more"),
    (["--factor", "1"], "--factor must be at least 2"),
    (["--dtype", "int8"], "--dtype must be one of"),
    (["--op", "prod"], "--op must be one of"),
    (["--op", "avg"], "--op avg is not supported by gloo"),
    (["--expect-busbw", "-1"], "--expect-busbw must be a positive number"),
    (["--csv", "/nonexistent/x.csv"], "folder /nonexistent does not exist"),
    (["--nproc", "0"], "--nproc must be between 1 and 1024"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values(args: list[str], message: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "bench-allreduce", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr


def test_sizes_and_units() -> None:
    assert [engine.parse_size(s) for s in ("8", "1K", "4M", "1G", "2kb", "3MiB")] == [
        8,
        1024,
        4 << 20,
        1 << 30,
        2048,
        3 << 20,
    ]
    assert sweep.sizes(8, 64, 2, "float32") == [8, 16, 32, 64]
    assert sweep.sizes(1, 8, 2, "float64") == [8]  # whole elements only
    assert sweep.sizes(1 << 20, 4 << 20, 4, "float16") == [1 << 20, 4 << 20]


def test_bus_bandwidth_math() -> None:
    rows = engine.summarize(
        {
            0: [{"bytes": 1 << 20, "count": 1 << 18, "time_s": 0.001, "wrong": 0}],
            1: [{"bytes": 1 << 20, "count": 1 << 18, "time_s": 0.002, "wrong": 3}],
        },
        2,
    )
    (row,) = rows
    assert row.time_us == 2000 and row.slowest_rank == 1 and row.fastest_rank == 0
    assert (
        row.algbw_gbps == (1 << 20) / 0.002 / 1e9 and row.busbw_gbps == row.algbw_gbps
    )  # 2(n-1)/n = 1
    assert row.wrong_ranks == [1]
    assert engine.bus_factor(8) == 1.75
    assert engine.expected_values(3, "sum") == [6, 9, 8, 7] and engine.expected_values(
        2, "max"
    ) == [
        2,
        3,
        4,
        4,
    ]
