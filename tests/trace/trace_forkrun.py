"""A test-only launcher that imports torch once and forks the ranks of each run, so the many
fixture runs do not each pay for torchrun's and every rank's torch import (on 2 shared cores a
plain torchrun launch of a 3-step script takes 6-25 s). Each rank is a real process that runs
the real tracer entry point (`ddpdoctor.trace.entry.main`, exactly what `python -m
ddpdoctor.trace` calls) with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID), on real gloo. What torchrun
itself adds (its agent store, its restarts, its signal forwarding) is covered by the few
launches in test_torchrun.py."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from trace_harness import ROOT, TracedRun, dump_unfinished, free_port, watch

from ddpdoctor.trace.judges import judge
from ddpdoctor.trace.record import read_records


def warm_up() -> None:
    """Import in the parent what every rank would import (torch, DDP's dynamo, the tracer).
    One intra-op thread, as torchrun's OMP_NUM_THREADS=1 gives every rank: an OpenMP pool made
    in the parent does not survive fork (a rank then hangs in its first parallel op)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401
    import torch.distributed  # noqa: F401
    import torch.nn.parallel  # noqa: F401
    import torch.utils.data  # noqa: F401

    import ddpdoctor.trace.install  # noqa: F401


def _child(rank: int, nproc: int, port: int, run_dir: Path, script: Path, argv: list[str]) -> None:
    from ddpdoctor.trace.entry import main

    os.setsid()
    fd = os.open(run_dir / f"rank-{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # the parent's sys.stdout/err may be pytest's capture objects: write to the new fds
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
        TORCHELASTIC_RUN_ID=f"forkrun-{port}", OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )  # fmt: skip
    os.chdir(script.parent)
    sys.argv = ["ddpdoctor.trace", *argv]
    sys.path[:1] = [os.getcwd(), str(ROOT)]  # as `python -m` with PYTHONPATH=ROOT has it
    code = 1
    try:
        code = main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def fork_run(
    script: Path, run_dir: Path, *, nproc: int = 2, args: tuple[str, ...] = (),
    tracer_args: tuple[str, ...] = (), deadline: float = 30.0,
    during: Callable[[Path, list[int]], None] | None = None,
) -> TracedRun:  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["--run-dir", str(run_dir), *tracer_args, "--", str(script), *args]
    t0 = time.monotonic()
    pids = []
    for rank in range(nproc):
        pid = os.fork()
        if pid == 0:
            _child(rank, nproc, port, run_dir, script, argv)
        pids.append(pid)
    codes: dict[int, int] = {}

    def running() -> bool:
        for rank, pid in enumerate(pids):
            if rank not in codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[rank] = os.waitstatus_to_exitcode(status)
        return len(codes) < nproc

    ready = None if during is None else (lambda: during(run_dir, pids))
    timed_out = watch(running, run_dir, nproc, t0 + deadline, ready)
    stacks: dict[int, str] = {}
    if timed_out:
        stacks = dump_unfinished(run_dir, set(codes))
        for rank, pid in enumerate(pids):
            if rank not in codes:
                os.kill(pid, signal.SIGKILL)
                codes[rank] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    records = read_records(run_dir)
    output = "\n".join(
        (run_dir / f"rank-{r}.log").read_text(errors="replace") for r in range(nproc)
    )
    findings = judge(records, nproc, exit_codes=codes, stacks=stacks)
    rc = max(codes.values(), key=abs) if codes else None
    return TracedRun(rc, output, run_dir, records, stacks, findings, time.monotonic() - t0,
                     timed_out, pids, codes)  # fmt: skip
