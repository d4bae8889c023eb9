"""Crafted per-rank data for the checks' `judge` functions: what healthy ranks report, so each
test changes one fact and expects one finding."""

from __future__ import annotations

import copy
from typing import Any

from ddpdoctor.report.model import World


def env_rank(rank: int, world: int = 2, host: str = "node-a") -> dict[str, Any]:
    return {
        "host": host,
        "pid": 1000 + rank,
        "launched": True,
        "nonce": "abc",
        "vars": {
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500",
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "OMP_NUM_THREADS": "1",
        },
        "versions": {
            "torch": "2.13.0",
            "python": "3.11.7",
            "cuda": None,
            "nccl": None,
            "ddpdoctor": "0.1.0",
        },
        "interfaces": ["lo", "eth0"],
    }


def world(n: int = 2, backend: str = "gloo", nnodes: int = 1) -> World:
    return World(world_size=n, backend=backend, nnodes=nnodes)


def codes(judgement: Any) -> list[str]:
    return [f.code for f in judgement.findings]


def ranks(make: Any, n: int = 2, **kw: Any) -> dict[int, dict[str, Any]]:
    return {r: copy.deepcopy(make(r, n, **kw)) for r in range(n)}
