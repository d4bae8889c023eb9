"""Shared real runs: one healthy 2-rank and one healthy 4-rank `ddpdoctor check`, and one run
with injected wrong behaviour on rank 1, each launched once per session and asserted on by many
tests. Faults that need their own launch live in test_faults.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Run, run_check

SECRET_FORMS = Path(__file__).parent.parent / "fixtures" / "triage" / "secret_forms.tsv"


def planted_secrets() -> dict[str, str]:
    """The `env` forms of the secret-forms corpus, as variables: {NAME: value}; with the
    needles that must never appear in any output."""
    out = {}
    for line in SECRET_FORMS.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        kind, form, _needle = line.split("\t")
        if kind == "env":
            name, value = form.replace("\\n", "\n").split("=", 1)
            out[name] = value
    return out


def secret_needles() -> list[str]:
    return [
        line.split("\t")[2]
        for line in SECRET_FORMS.read_text().splitlines()
        if line.strip() and not line.startswith("#") and line.startswith("env\t")
    ]


@pytest.fixture(scope="session")
def healthy2(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """With every secret form of the corpus planted in its environment (they must not leak), and
    what torchrun's process listens on watched."""
    run_dir = tmp_path_factory.mktemp("h2") / "run"
    return run_check(run_dir, "--nproc", "2", "-v", env=planted_secrets(), watch_listeners=True)


@pytest.fixture(scope="session")
def healthy4(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """JSON only on stdout (--json -), and --fail-on warn."""
    return run_check(
        tmp_path_factory.mktemp("h4") / "run", "--nproc", "4", "--json", "-", "--fail-on", "warn"
    )


@pytest.fixture(scope="session")
def broken2(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Rank 1 really misbehaves: adds a bias to its all_reduce result, builds its sampler with
    rank 0's rank, applies an inf gradient after sync; every rank runs 2 threads on 2 cores and
    has NCCL_P2P_DISABLE=1 and TORCH_DISTRIBUTED_DEBUG=DETAIL exported (DETAIL segfaults DDP on CPU
    with torch 2.13: the probes must guard against it and still report it)."""
    faults = "allreduce-bias@1;sampler-rank@1;gradscaler-local-inf@1"
    return run_check(
        tmp_path_factory.mktemp("b2") / "run",
        "--nproc",
        "2",
        env={
            "DDPDOCTOR_FAULT": faults,
            "OMP_NUM_THREADS": "2",
            "NCCL_P2P_DISABLE": "1",
            "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
        },
    )
