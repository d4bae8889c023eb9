"""Following mp.spawn: a script that starts its own workers with torch.multiprocessing.spawn
(the ImageNet-example style) runs them in fresh interpreters that the tracer would not see. The
tracer wraps the worker function, so every spawned worker installs the hooks first and writes
its own `trace-R.json` (R: the spawn index, renamed to the rank it passes to
init_process_group). The spawning process only launches: its record is `spawner-PID.json`, not
a rank. Run such scripts with one launcher process (`--nproc 1`).

The spawned workers get the environment the script would have under plain `python`, not
torchrun's: torchrun's identity of the spawner (RANK=0, WORLD_SIZE=1, ...) would be every
worker's, and TORCHELASTIC_USE_AGENT_STORE makes every `tcp://` or `env://` init a client of a
store nobody serves (each worker waits forever). MASTER_PORT is a fresh free port, so a script
that relies on an inherited one does not collide with torchrun's store."""

from __future__ import annotations

import functools
import os
import socket
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ddpdoctor.trace.patching import wrap
from ddpdoctor.trace.state import Config, Tracer

TORCHRUN_IDENTITY = (
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "ROLE_NAME",
)  # fmt: skip


def plain_python_env(environ: dict[str, str], port: int) -> dict[str, str]:
    """What a spawned worker would see had the script been started with `python`."""
    env = {
        k: v
        for k, v in environ.items()
        if k not in TORCHRUN_IDENTITY and not k.startswith("TORCHELASTIC_")
    }
    if "MASTER_PORT" in env:
        env["MASTER_PORT"] = str(port)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def traced_worker(
    cfg: dict[str, Any], nprocs: int, port: int, fn: Any, index: int, *args: Any
) -> Any:
    """Runs in the spawned child: plain python's environment and the hooks first, then the
    user's worker function."""
    env = plain_python_env(dict(os.environ), port)
    os.environ.clear()
    os.environ.update(env)
    from ddpdoctor.trace import record as rec
    from ddpdoctor.trace import stacks
    from ddpdoctor.trace.entry import finish_run
    from ddpdoctor.trace.install import install

    config = Config(**{**cfg, "run_dir": Path(cfg["run_dir"])})
    tracer = Tracer(config, getattr(fn, "__qualname__", "worker"), list(sys.argv))
    with tracer.lock:
        r = tracer.record
        r.rank, r.local_rank, r.world_size, r.spawned = index, index, nprocs, True
    stacks.install(rec.stack_file(config.run_dir, index))
    install(tracer)
    tracer.start()
    code = finish_run(tracer, lambda: fn(index, *args))
    if code:
        raise SystemExit(code)


def install(tracer: Tracer) -> None:
    import torch.multiprocessing as tmp

    def spawn_wrapper(original: Any) -> Any:
        def spawn(fn: Any, args: tuple = (), nprocs: int = 1, *a: Any, **k: Any) -> Any:
            with tracer.lock:
                tracer.record.role = "spawner"
            tracer.write()
            cfg = {**asdict(tracer.config), "run_dir": str(tracer.config.run_dir)}
            wrapped = functools.partial(traced_worker, cfg, nprocs, _free_port(), fn)
            return original(wrapped, args, nprocs, *a, **k)

        return spawn

    wrap(tmp, "spawn", spawn_wrapper)
