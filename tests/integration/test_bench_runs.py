"""`ddpdoctor bench-allreduce` through real torchrun on gloo: the table and JSON for 2 and 4
ranks, a rank that really adds a bias to its result caught by the correctness pass, and the
--expect-busbw gate."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ddpdoctor.report import schema

pytestmark = pytest.mark.slow
SWEEP = ["--min-bytes", "1K", "--max-bytes", "2M", "--factor", "4", "--iters", "3", "--warmup", "1"]


def bench(
    tmp: Path, *args: str, fault: str | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if k != "DDPDOCTOR_FAULT"}
    if fault:
        env["DDPDOCTOR_FAULT"] = fault
    out = tmp / "bench.json"
    r = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "bench-allreduce", *SWEEP, "--json", str(out), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    return r, json.loads(out.read_text())


@pytest.mark.parametrize("n", [2, 4])
def test_sweep_table_and_json(tmp_path: Path, n: int) -> None:
    r, doc = bench(tmp_path, "--nproc", str(n), "--csv", str(tmp_path / "rows.csv"))
    assert r.returncode == 0, r.stdout + r.stderr
    jsonschema.validate(doc, schema.schema_for("bench"))
    assert (doc["backend"], doc["world_size"], doc["dtype"], doc["op"]) == (
        "gloo",
        n,
        "float32",
        "sum",
    )
    assert [row["bytes"] for row in doc["rows"]] == [1024, 4096, 16384, 65536, 262144, 1048576]
    for row in doc["rows"]:
        assert row["wrong"] == 0 and row["count"] == row["bytes"] // 4
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (n - 1) / n)
        assert row["time_us"] == row["slowest_us"] >= row["fastest_us"]
        assert 0 <= row["slowest_rank"] < n
    assert doc["avg_busbw_gbps"] == doc["rows"][-1]["busbw_gbps"]  # the only size >= 1 MiB
    assert "# Avg bus bandwidth" in r.stdout and "busbw by size" in r.stdout
    assert "     1048576      262144  float32   sum" in r.stdout
    with open(tmp_path / "rows.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(x["bytes"]) for x in rows] == [row["bytes"] for row in doc["rows"]]


def test_correctness_pass_names_the_biased_rank(tmp_path: Path) -> None:
    r, doc = bench(tmp_path, "--nproc", "2", fault="allreduce-bias@1")
    assert r.returncode == 1
    assert all(row["wrong"] == row["count"] and row["wrong_ranks"] == [1] for row in doc["rows"])
    finding = doc["findings"][0]
    assert finding["code"] == "DDP401" and finding["rank"] == 1
    assert "rank 1 got wrong all_reduce results at 6 of 6 sizes" in finding["message"]


def test_expect_busbw_gate(tmp_path: Path) -> None:
    r, doc = bench(tmp_path, "--nproc", "2", "--expect-busbw", "100000")
    assert r.returncode == 1
    assert doc["status"] == "fail"
    assert doc["findings"][0]["code"] == "DDP402"
    assert "below --expect-busbw 100000 GB/s" in doc["findings"][0]["message"]
    low = doc["avg_busbw_gbps"] / 100
    r2, doc2 = bench(tmp_path, "--nproc", "2", "--expect-busbw", f"{low:.6f}")
    assert r2.returncode == 0 and doc2["status"] == "pass"
