"""The worker under the user's own launcher (`torchrun … -m ddpdoctor.worker`, `srun python -m
ddpdoctor.worker`): no parent wrote a spec, so every rank builds the same one from its arguments
and environment, and rank 0 has the report printed at the end by `ddpdoctor report`, run as a
child process (the rank side never imports the parent side or rich)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ddpdoctor import registry
from ddpdoctor.runfiles import JobSpec, RunFolder, private_dir

FINISH_WAIT_S = 5.0  # local peers write their last beat right after the last exchange


@dataclass(frozen=True)
class Identity:
    """This process's place in the job, from the launcher's variables (defaults without one)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    launched: bool


def identity() -> Identity:
    env = os.environ

    def num(name: str, default: int) -> int:
        try:
            return int(env.get(name, default))
        except ValueError:
            return default

    world = num("WORLD_SIZE", 1)
    return Identity(
        rank=num("RANK", 0),
        world_size=world,
        local_rank=num("LOCAL_RANK", 0),
        local_world_size=num("LOCAL_WORLD_SIZE", world),
        launched="RANK" in env and "WORLD_SIZE" in env,
    )


def guard_debug_detail(run_dir: str | None) -> dict[str, str]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL makes DDP's construction segfault on CPU with torch 2.13
    (it is read when torch is imported). On a CPU-only run the probes go without it; the env
    check still reports the user's value (DDP110). Returns what was overridden."""
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() != "DETAIL":
        return {}
    spec = RunFolder(run_dir).read_spec() if run_dir else None
    if spec is not None:
        cpu_only = spec.backend == "gloo"
    else:
        from ddpdoctor.node.gpus import visible_gpus

        cpu_only = visible_gpus()[0] == 0
    if not cpu_only:
        return {}
    original = os.environ["TORCH_DISTRIBUTED_DEBUG"]
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
    return {"TORCH_DISTRIBUTED_DEBUG": original}


def default_run_dir() -> Path:
    """Ranks of one job on one node must agree on the folder without talking: key it on what
    the launcher gave them all, in a folder only this user can use (runfiles.private_dir)."""
    key = (
        os.environ.get("TORCHELASTIC_RUN_ID")
        or os.environ.get("SLURM_JOB_ID")
        or os.environ.get("MASTER_PORT", "local")
    )
    return private_dir(f"ddpdoctor-{key}")


def local_spec(args: argparse.Namespace, ident: Identity) -> JobSpec:
    """Decide everything locally, identically on every rank."""
    checks = registry.select(args.only, args.skip)
    backend = args.backend
    reason = f"asked for {backend}"
    if backend == "auto":
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = "nccl" if gpus else "gloo"
        reason = (
            f"auto: {gpus} GPU(s) visible to torch" if gpus else "auto: no GPU visible to torch"
        )
    return JobSpec(
        checks=checks,
        timeout=args.timeout,
        backend=backend,
        backend_reason=reason,
        nonce=os.environ.get("TORCHELASTIC_RUN_ID", ""),
        managed=False,
        nnodes=int(os.environ.get("GROUP_WORLD_SIZE") or 0) or 1,
        world_size=ident.world_size,
    )


def shutdown() -> None:
    """Leave the process group (best effort) so the user's launcher sees a clean exit."""
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - leaving is best effort
        pass


def report(folder: RunFolder, spec: JobSpec, json_path: str | None, ascii_only: bool) -> int:
    """Rank 0: wait briefly for local peers to finish, then print the report through the parent
    side's `ddpdoctor report`, whose exit code is ours."""
    deadline = time.monotonic() + FINISH_WAIT_S
    while time.monotonic() < deadline:
        if all(b.finished for b in folder.read_beats().values()):
            break
        time.sleep(0.05)
    folder.write_spec(spec)
    cmd = [sys.executable, "-m", "ddpdoctor", "report", str(folder.path), "--fail-on", "warn"]
    if json_path:
        cmd += ["--json", json_path]
    if ascii_only:
        cmd.append("--ascii")
    return subprocess.run(cmd, check=False).returncode
