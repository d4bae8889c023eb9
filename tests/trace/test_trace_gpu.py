"""GPU paths of the tracer (device facts at DDP construction, CUDA tensors in fingerprints,
NCCL): real runs under torchrun, skipped without CUDA. Not run on the machine this was written
on (no GPU lent); run them where one is."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_harness import FIXTURES, expected, run_traced

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
GPU = FIXTURES / "gpu"


def test_two_ranks_on_one_gpu_are_named(tmp_path: Path) -> None:
    run = run_traced(GPU / "shared_gpu.py", tmp_path / "run")
    assert run.codes_at(GPU / "shared_gpu.py") >= {("DDR201", 10)}, run.output[-3000:]
    ddp = [e for r in run.records.values() for e in r.events if e.kind == "ddp"]
    assert {e.data["device_ids"][0] for e in ddp} == {"cuda:0"}
    assert all(r.fingerprints for r in run.records.values())  # taken from CUDA tensors


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_one_gpu_per_rank_with_nccl_is_clean(tmp_path: Path) -> None:
    script = GPU / "clean_one_gpu_each.py"
    run = run_traced(script, tmp_path / "run")
    assert run.codes_at(script) == expected(script) == set()
    assert {r.backend for r in run.records.values()} == {"nccl"}
    assert all(len(r.fingerprints) >= 2 for r in run.records.values())
