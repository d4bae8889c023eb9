"""Slurm: under `srun ddpdoctor check` every node's ddpdoctor learns the node count, its own node
id and the first host of the node list (the master) from srun's variables, so the command needs
no flags. One ddpdoctor per node: it starts that node's ranks itself."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ddpdoctor.errors import UsageError

BASE_PORT = 20000


@dataclass(frozen=True)
class SlurmPlacement:
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    job_id: str


def first_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist: 'gpu[07-09,12],cpu1' -> 'gpu07';
    'rack[1-2]-n[03-04]' -> 'rack1-n03'."""
    item = re.split(r",(?![^\[]*\])", nodelist.strip(), maxsplit=1)[0]

    def first(m: re.Match[str]) -> str:
        return re.split(r"[,-]", m.group(1), maxsplit=1)[0]

    return re.sub(r"\[([^\]]*)\]", first, item)


def placement(env: Mapping[str, str]) -> SlurmPlacement | None:
    """Where this node stands in a multi-node Slurm job; None outside Slurm or on one node."""
    if "SLURM_JOB_ID" not in env:
        return None
    try:
        nnodes = int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 1)
        node_rank = int(env.get("SLURM_NODEID", "0"))
    except ValueError:
        raise UsageError(
            "SLURM_NNODES/SLURM_NODEID are not numbers; is this really inside srun?"
        ) from None
    if nnodes <= 1:
        return None
    tasks = env.get("SLURM_NTASKS")
    if tasks and tasks.isdigit() and int(tasks) > nnodes:
        raise UsageError(
            f"srun started {tasks} tasks on {nnodes} nodes: run one ddpdoctor per node "
            f"(srun --ntasks-per-node=1 ddpdoctor check); it starts each node's ranks itself"
        )
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError(
            "SLURM_JOB_NODELIST is not set: cannot tell which node hosts rank 0 (use --master-addr)"
        )
    job_id = env["SLURM_JOB_ID"]
    port = BASE_PORT + int(job_id) % 20000 if job_id.isdigit() else BASE_PORT + 1
    return SlurmPlacement(nnodes, node_rank, first_host(nodelist), port, job_id)
