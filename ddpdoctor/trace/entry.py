"""`python -m ddpdoctor.trace [OPTIONS] [--] (SCRIPT | -m MODULE) [ARGS...]`: what torchrun starts
on every rank. Installs the record-and-pass-through hooks, then runs the user's script as
`__main__` with sys.argv, sys.path[0] and the working directory exactly as plain torchrun gives
them (`python -u SCRIPT ARGS`, or `python -u -m MODULE ARGS`).

Options: --run-dir DIR (default $TMPDIR/ddpdoctor-trace-<TORCHELASTIC_RUN_ID | MASTER_PORT>),
--steps N (default 50; 0 = run to the end), --max-time SECONDS, --fingerprint-every K (default 10).

Exit codes: the script's own (0 when it returns, its sys.exit code, 1 for an uncaught exception,
130 for Ctrl-C); 0 when the tracer stopped it at --steps or --max-time (torchrun must not take a
clean stop for a failure and tear the other ranks down); 2 for bad tracer arguments. The record's
`exit.kind` tells these apart."""

from __future__ import annotations

import atexit
import contextlib
import os
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ddpdoctor.rank import flight
from ddpdoctor.rank.recorder import Recorder
from ddpdoctor.runfiles import RunFolder, UnsafeRunDir, private_dir
from ddpdoctor.trace import record as rec
from ddpdoctor.trace import stacks
from ddpdoctor.trace.sites import traceback_site
from ddpdoctor.trace.state import STOP_BARRIER_S, Config, StopRun, Tracer

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_VALUED = {"--run-dir", "--steps", "--max-time", "--fingerprint-every"}


class UsageError(Exception):
    """Bad tracer arguments: one line on stderr, exit 2."""


@dataclass
class Args:
    config: Config
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)


def default_run_dir() -> Path:
    """Ranks of one job must agree on the folder without talking: key it on the launcher's id,
    in a folder only this user can use (runfiles.private_dir)."""
    key = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("MASTER_PORT") or str(os.getpid())
    return private_dir(f"ddpdoctor-trace-{key}")


def parse_args(argv: list[str]) -> Args:
    """Tracer options first; the first other word (or what follows `--` / `-m MODULE`) is the
    user's, and everything after it is passed on untouched."""
    opts: dict[str, str] = {}
    i = 0
    module = script = None
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word == "-m":
            if i + 1 >= len(argv):
                raise UsageError("-m needs a module name")
            module, i = argv[i + 1], i + 2
            break
        name, eq, value = word.partition("=")
        if name in _VALUED:
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                value, i = argv[i + 1], i + 1
            opts[name] = value
            i += 1
            continue
        if word.startswith("-"):
            raise UsageError(f"unknown option {word} (tracer options go before the script)")
        break
    if module is None:
        if i >= len(argv):
            raise UsageError(
                "no script to run: python -m ddpdoctor.trace [OPTIONS] SCRIPT [ARGS...]"
            )
        script, i = argv[i], i + 1
    try:
        config = Config(
            run_dir=Path(opts["--run-dir"]) if "--run-dir" in opts else default_run_dir(),
            steps=int(opts.get("--steps", 50)),
            max_time=float(opts["--max-time"]) if "--max-time" in opts else None,
            fingerprint_every=int(opts.get("--fingerprint-every", 10)),
        )
    except ValueError as exc:
        raise UsageError(f"bad option value: {exc}") from None
    except UnsafeRunDir as exc:
        raise UsageError(f"{exc} (pass --run-dir)") from None
    if config.steps < 0 or config.fingerprint_every < 0 or (config.max_time or 0) < 0:
        raise UsageError("--steps, --max-time and --fingerprint-every must not be negative")
    return Args(config, module, script, argv[i:])


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _ended(tracer: Tracer, kind: str, code: int, exc: BaseException | None = None) -> None:
    import torch.distributed as dist

    with tracer.lock:
        exit_ = rec.Exit(kind=kind, code=code)
        if exc is not None:
            exit_.exception = type(exc).__name__
            exit_.message = str(exc).strip()[:2000]
            exit_.where = traceback_site(exc.__traceback__)
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            exit_.traceback_tail = "".join(lines).splitlines()[-16:]
        tracer.record.exit = exit_
    if kind in ("returned", "exit") and dist.is_available() and dist.is_initialized():
        tracer.event(rec.GROUP_ALIVE, None, backend=tracer.record.backend)
    tracer.flush_passes()
    tracer.write()


def _beat(tracer: Tracer) -> Recorder:
    """The run-folder heartbeat and rank document that the launcher judges every rank by
    (ddpdoctor.runfiles): its phase is the training step, polled by a side thread, so a step
    costs no write. Under `ddpdoctor run` (a managed spec) the rank's output goes to its log."""
    folder = RunFolder(tracer.config.run_dir)
    spec = folder.read_spec()
    nonce = spec.nonce if spec is not None else ""
    folder.nonce = nonce or None
    r = tracer.record
    if spec is not None and spec.managed:
        _redirect_output(folder, r.rank)

    def progress() -> tuple[str | None, str]:
        """Any step, event, collective or data pass moves the phase; before the script's first
        event the rank is still starting (the launcher allows it the start-up time). A process
        that only spawned its workers (mp.spawn) moves with them."""
        if r.role == "spawner":
            return _spawned_progress(tracer.config.run_dir)
        if not (r.steps or r.events or r.collective_count or r.passes):
            return (None, "starting")
        if r.steps:
            return ("train", f"step {r.steps}")
        return ("train", f"setup: {len(r.events)} events, {len(r.passes)} data passes")

    return Recorder(folder, r.rank, r.local_rank, nonce, progress=progress)


def _spawned_progress(run_dir: Path) -> tuple[str | None, str]:
    """The spawned workers' progress, from the records their tracers keep writing."""
    workers = [x for x in rec.read_records(run_dir).values() if x.spawned]
    steps = sum(x.steps for x in workers)
    moves = steps + sum(len(x.events) + x.collective_count + len(x.passes) for x in workers)
    if not moves:
        return (None, "starting")
    return ("train", f"{len(workers)} spawned workers: {steps} steps, {moves} events in all")


def _redirect_output(folder: RunFolder, rank: int) -> None:
    fd = os.open(folder.log_file(rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def run(args: Args) -> int:
    """Run the user's code under the tracer; returns the process exit code."""
    config = args.config
    config.run_dir.mkdir(parents=True, exist_ok=True)
    target = args.module or args.script or ""
    tracer = Tracer(config, target, [target, *args.args])
    beat = _beat(tracer)
    stacks.install(rec.stack_file(config.run_dir, tracer.record.rank))
    flight.enable()  # before the user's init_process_group
    flight.watch(beat.folder, tracer.record.rank)
    from ddpdoctor.trace.install import install

    install(tracer)
    tracer.start()
    atexit.register(tracer.write)  # the last figures on any exit the interpreter sees
    if args.module is not None:
        sys.argv = [args.module, *args.args]
        sys.path[0] = os.getcwd()
    else:
        sys.argv = [args.script or "", *args.args]
        sys.path[0] = os.path.dirname(os.path.realpath(args.script or "."))

    def call() -> None:
        if args.module is not None:
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(args.script or "", run_name="__main__")

    code = finish_run(tracer, call)
    # the recorder at the end too: a job that ended (or stopped at --steps) is read for
    # collectives that differ across ranks, as a hung one is at the verdict
    with contextlib.suppress(Exception):
        flight.dump(beat.folder.flight_file(tracer.record.rank), tracer.record.rank)
    if code == 0:
        beat.finish()  # a clean end (returned, exit 0, a stop at --steps); a failure is not
    return code


def finish_run(tracer: Tracer, call: Callable[[], object]) -> int:
    """Run the user's code; record how it ended; return the exit code (see the module doc)."""
    try:
        call()
    except StopRun as stop:
        _ended(tracer, stop.reason, 0)
        from ddpdoctor.trace.stopping import leave_group

        problem = leave_group(tracer.record.backend, tracer.record.world_size, STOP_BARRIER_S)
        if problem:
            tracer.event("stop-barrier-failed", None, problem=problem)
            tracer.write()
        return 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
        _ended(tracer, "exit", code)
        return code
    except KeyboardInterrupt as exc:
        _ended(tracer, "exception", EXIT_INTERRUPTED, exc)
        traceback.print_exc()
        return EXIT_INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - the user's crash: record it, show it as python does
        _ended(tracer, "exception", 1, exc)
        traceback.print_exc()
        return 1
    _ended(tracer, "returned", 0)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.script is not None and not os.path.isfile(args.script):
            raise UsageError(f"no such script: {args.script}")
    except UsageError as exc:
        print(f"python -m ddpdoctor.trace: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run(args)
