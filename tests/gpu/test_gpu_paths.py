"""The NCCL/CUDA/NVML paths, for real, on a machine with GPUs (skipped without CUDA: CI has
none; run them on a lent GPU machine with `bash benchmarks/device_check.sh`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA GPUs"),
]


def ddpdoctor(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp / "out.json"
    r = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return r, json.loads(out.read_text())


def test_check_on_every_gpu_uses_nccl_and_passes(tmp_path: Path) -> None:
    n = torch.cuda.device_count()
    r, rep = ddpdoctor(tmp_path, "check", "--timeout", "60")
    assert rep["backend"] == "nccl" and rep["world_size"] == n
    statuses = {c["id"]: c["status"] for c in rep["checks"]}
    assert statuses["process_group"] == "pass" and statuses["gradscaler"] == "pass", r.stdout
    uuids = {d["uuid"] for d in rep["checks"][2]["ranks"].values()}
    assert len(uuids) == n  # one GPU per rank, found through torch/NVML
    assert rep["checks"][0]["ranks"]["0"]["versions"]["nccl"]


def test_two_ranks_on_one_gpu_are_caught(tmp_path: Path) -> None:
    env_cmd = [
        "check",
        "--nproc",
        "2",
        "--backend",
        "nccl",
        "--timeout",
        "30",
        "--only",
        "env,rank_device",
    ]
    r = subprocess.run(
        [sys.executable, "-m", "ddpdoctor", *env_cmd, "--json", str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"},
    )
    rep = json.loads((tmp_path / "o.json").read_text())
    codes = [f["code"] for c in rep["checks"] for f in c["findings"]]
    assert "DDP301" in codes and "DDP303" in codes, r.stdout
    assert r.returncode == 1


def test_bench_allreduce_on_nccl(tmp_path: Path) -> None:
    r, doc = ddpdoctor(
        tmp_path,
        "bench-allreduce",
        "--min-bytes",
        "1M",
        "--max-bytes",
        "256M",
        "--iters",
        "10",
        "--warmup",
        "3",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc["backend"] == "nccl" and all(row["wrong"] == 0 for row in doc["rows"])
    assert doc["rows"][-1]["algbw_gbps"] > 0
