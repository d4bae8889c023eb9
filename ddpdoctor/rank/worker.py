"""What torchrun starts on every rank: `python -m ddpdoctor.worker [RUN_DIR]`.

Every rank runs the selected checks in registry order, writes its own result file after each
check and a heartbeat while it works, and after each check all ranks exchange their results over
a separate gloo group. That exchange both gives rank 0 everything (it writes gathered.json, the
source of the report on multi-node runs) and lets every rank take the same skip decision after a
failure, so collectives always pair up. Started by the user's own launcher (no spec file), rank 0
also prints the report itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ddpdoctor import registry
from ddpdoctor import runfiles as rundir
from ddpdoctor.rank import exchange as wire
from ddpdoctor.rank.context import RankContext, faults_from_env, is_timeout_error

ALIVE_EVERY_S = 0.5


class Recorder:
    """This rank's rank file and heartbeat. Written atomically; the alive thread keeps `t_alive`
    fresh so the launcher can tell a rank that waits (alive) from one that is stopped (stale)."""

    def __init__(self, run_dir: Path, rank: int, local_rank: int) -> None:
        now = time.time()
        self.run_dir = run_dir
        self.rank = rank
        self.lock = threading.Lock()
        self.doc: dict[str, Any] = {
            "rank": rank,
            "local_rank": local_rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": None,
            "started_at": now,
            "finished": False,
            "finished_at": None,
            "terminated": None,
            "last_check": None,
            "checks": {},
        }
        self.beat: dict[str, Any] = {
            "rank": rank,
            "pid": os.getpid(),
            "host": self.doc["host"],
            "check": None,
            "phase": "starting",
            "t_phase": now,
            "t_alive": now,
            "finished": False,
        }
        self._stop = threading.Event()
        self.pulse: Any = None  # liveness.StorePulse on multi-node runs
        self._write_beat()
        threading.Thread(target=self._alive, name="ddpdoctor-alive", daemon=True).start()

    def _write_beat(self) -> None:
        with self.lock:
            self.beat["t_alive"] = time.time()
            rundir.write_json(rundir.beat_file(self.run_dir, self.rank), self.beat)

    def _alive(self) -> None:
        while not self._stop.wait(ALIVE_EVERY_S):
            try:
                self._write_beat()
            except OSError:
                return

    def phase(self, check: str | None, phase: str) -> None:
        with self.lock:
            self.beat.update(check=check, phase=phase, t_phase=time.time())
        self._write_beat()
        if self.pulse is not None:
            self.pulse.set_phase(f"{check} ({phase})")

    def record(self, check_id: str, entry: dict[str, Any]) -> None:
        with self.lock:
            self.doc["checks"][check_id] = entry
            self.doc["last_check"] = check_id
            rundir.write_json(rundir.rank_file(self.run_dir, self.rank), self.doc)

    def set(self, **fields: Any) -> None:
        with self.lock:
            self.doc.update(fields)
            rundir.write_json(rundir.rank_file(self.run_dir, self.rank), self.doc)

    def finish(self) -> None:
        self._stop.set()
        now = time.time()
        self.set(finished=True, finished_at=now)
        with self.lock:
            self.beat.update(finished=True, phase="finished", t_phase=now)
        self._write_beat()

    def terminated(self, signame: str) -> None:
        """The launcher is tearing us down (another rank failed): say so, keep what we have."""
        self._stop.set()
        self.set(
            terminated={
                "signal": signame,
                "t": time.time(),
                "check": self.beat.get("check"),
                "phase": self.beat.get("phase"),
            }
        )


def _identity() -> dict[str, Any]:
    env = os.environ

    def num(name: str, default: int) -> int:
        try:
            return int(env.get(name, default))
        except ValueError:
            return default

    world = num("WORLD_SIZE", 1)
    return {
        "rank": num("RANK", 0),
        "world_size": world,
        "local_rank": num("LOCAL_RANK", 0),
        "local_world_size": num("LOCAL_WORLD_SIZE", world),
        "launched": "RANK" in env and "WORLD_SIZE" in env,
    }


def _guard_debug_detail(run_dir: str | None) -> dict[str, str]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL makes DDP's construction segfault on CPU with torch 2.13
    (it is read when torch is imported). On a CPU-only run the probes go without it; the env
    check still reports the user's value (DDP110). Returns what was overridden."""
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() != "DETAIL":
        return {}
    spec = rundir.read_json(Path(run_dir) / rundir.SPEC) if run_dir else None
    if isinstance(spec, dict):
        cpu_only = spec.get("backend") == "gloo"
    else:
        from ddpdoctor.node.gpus import visible_gpus

        cpu_only = visible_gpus()[0] == 0
    if not cpu_only:
        return {}
    original = os.environ["TORCH_DISTRIBUTED_DEBUG"]
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
    return {"TORCH_DISTRIBUTED_DEBUG": original}


def _default_run_dir() -> Path:
    """Ranks of one job on one node must agree on the folder without talking: key it on what
    the launcher gave them all."""
    key = (
        os.environ.get("TORCHELASTIC_RUN_ID")
        or os.environ.get("SLURM_JOB_ID")
        or os.environ.get("MASTER_PORT", "local")
    )
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"ddpdoctor-{key}"


def _load_spec(run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    spec = rundir.read_json(run_dir / rundir.SPEC)
    if isinstance(spec, dict):
        return spec
    # Started by the user's own launcher: decide everything locally, identically on every rank.
    only = args.only
    checks = registry.select(only, args.skip)
    backend = args.backend
    reason = f"asked for {backend}"
    if backend == "auto":
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = "nccl" if gpus else "gloo"
        reason = (
            f"auto: {gpus} GPU(s) visible to torch" if gpus else "auto: no GPU visible to torch"
        )
    return {
        "checks": checks,
        "timeout": args.timeout,
        "backend": backend,
        "backend_reason": reason,
        "nonce": os.environ.get("TORCHELASTIC_RUN_ID", ""),
        "managed": False,
        "nnodes": int(os.environ.get("GROUP_WORLD_SIZE") or 0) or None,
        "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
    }


def _redirect_output(run_dir: Path, rank: int) -> None:
    """Under the ddpdoctor launcher, a rank's prints go to its log file, not the user's terminal."""
    fd = os.open(rundir.log_file(run_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _short_error(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"[:500]


def _warm_up_dynamo() -> None:
    """DDP's constructor imports torch._dynamo (about a second of CPU). Import it on a side
    thread while the main thread waits on its peers in the earlier checks."""

    def load() -> None:
        try:
            import torch  # noqa: F401  (the main thread has imported it or is about to)
            import torch._dynamo  # noqa: F401
        except Exception:  # noqa: BLE001 - the gradscaler check will import it for real
            pass

    threading.Thread(target=load, name="ddpdoctor-warmup", daemon=True).start()


def run_checks(ctx: RankContext, rec: Recorder, spec: dict[str, Any]) -> None:
    """The check loop. A failing check is a result, not an abort (flutter doctor)."""
    selected: list[str] = list(spec["checks"])
    if "gradscaler" in selected:
        _warm_up_dynamo()
    order = registry.run_order(selected)
    broken: str | None = None  # why later collective checks are skipped, agreed on every rank
    can_gather = False
    pending: list[tuple[str, dict[str, Any]]] = []  # results from before the group existed (env)
    for cid in order:
        mod = registry.load(cid)
        shown = cid in selected
        if getattr(mod, "COLLECTIVE", False) and broken:
            rec.record(cid, {"status": "skip", "reason": broken, "data": {}}) if shown else None
            continue
        rec.phase(cid, "running")
        t0 = time.perf_counter()
        try:
            data = mod.run(ctx)
            entry = {"status": "ok", "data": data}
        except Exception as exc:  # noqa: BLE001 - any failure is data for the report
            status = "timeout" if is_timeout_error(exc) else "error"
            entry = {
                "status": status,
                "error": _short_error(exc),
                "traceback": traceback.format_exc(limit=6)[-3000:],
                "phase": rec.beat.get("phase"),
                "data": getattr(exc, "partial", {}) or {},
            }
        entry["duration_s"] = round(time.perf_counter() - t0, 4)
        if shown:
            rec.record(cid, entry)
        if ctx.device is not None and rec.doc["device"] != str(ctx.device):
            rec.set(device=str(ctx.device))
        if cid == "process_group":
            can_gather = ctx.control is not None
            if entry["status"] != "ok":
                broken = "the process group could not be initialised"
            elif ctx.world_size > ctx.local_world_size:
                rec.pulse = _start_pulse(ctx)
        if entry["status"] == "timeout":
            # A peer is stuck or unreachable: an exchange would only wait for it again. Peers
            # that finished give up on the exchange after its own deadline and skip likewise.
            can_gather = False
        if not can_gather and ctx.control is None and shown:
            pending.append((cid, entry))
        if can_gather:
            for earlier, earlier_entry in pending:  # every rank has the same pending list
                can_gather, broken = _exchange(ctx, rec, earlier, earlier_entry, broken)
            pending.clear()
        if can_gather:
            can_gather, broken = _exchange(ctx, rec, cid, entry, broken)
        elif entry["status"] != "ok" and getattr(mod, "COLLECTIVE", False):
            broken = broken or f"{cid} failed on rank {ctx.rank}"
    if broken or not can_gather:
        _sample_liveness(ctx, rec)
    if rec.pulse is not None:
        rec.pulse.stop(finished=True)


def _start_pulse(ctx: RankContext) -> Any:
    """Several nodes: publish liveness through the rendezvous store (see ddpdoctor.liveness)."""
    try:
        from ddpdoctor.rank.liveness import StorePulse

        return StorePulse(f"ddpdoctor/{ctx.options.get('nonce') or 'run'}", ctx.rank, ctx.timeout)
    except Exception:  # noqa: BLE001 - without it, remote ranks are judged from what they exchanged
        return None


def _sample_liveness(ctx: RankContext, rec: Recorder) -> None:
    """Rank 0 after a failure on a multi-node run: who is still alive, and where each rank is."""
    if ctx.rank != 0 or rec.pulse is None:
        return
    rec.phase("liveness", "sampling every rank's pulse in the store")
    view = rec.pulse.sample(ctx.world_size)
    gathered = rundir.read_json(rec.run_dir / rundir.GATHERED) or {}
    gathered["_liveness"] = {str(r): v for r, v in view.items()}
    rundir.write_json(rec.run_dir / rundir.GATHERED, gathered)


def _exchange(
    ctx: RankContext, rec: Recorder, cid: str, entry: dict[str, Any], broken: str | None
) -> tuple[bool, str | None]:
    """All ranks share this check's result over the control group. Returns (can still gather,
    reason to skip later collectives), identical on every rank."""

    rec.phase(cid, "exchanging results")
    try:
        everyone = wire.all_gather_json({"rank": ctx.rank, **entry}, ctx.world_size, ctx.control)
    except Exception as exc:  # noqa: BLE001
        rec.set(exchange_error={"check": cid, "error": _short_error(exc)})
        return False, broken or f"ranks could not exchange results after {cid}"
    if ctx.rank == 0:
        gathered = rundir.read_json(rec.run_dir / rundir.GATHERED) or {}
        gathered[cid] = {str(e["rank"]): e for e in everyone if isinstance(e, dict)}
        rundir.write_json(rec.run_dir / rundir.GATHERED, gathered)
    bad = sorted(
        e["rank"]
        for e in everyone
        if isinstance(e, dict) and e.get("status") in ("error", "timeout")
    )
    if bad and not broken and cid != "env":
        mod = registry.load(cid)
        if getattr(mod, "COLLECTIVE", False):
            broken = f"{cid} failed on rank {', '.join(map(str, bad))}"
    return True, broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpdoctor.worker", description=__doc__)
    parser.add_argument(
        "run_dir", nargs="?", help="folder for rank files (default: derived from the job id)"
    )
    parser.add_argument("--only", default=None)
    parser.add_argument("--skip", default=None)
    parser.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--json", dest="json_path", default=None, help="rank 0 writes the report here"
    )
    parser.add_argument("--ascii", action="store_true")
    args = parser.parse_args(argv)

    overrides = _guard_debug_detail(args.run_dir)
    ident = _identity()
    run_dir = Path(args.run_dir) if args.run_dir else _default_run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = _load_spec(run_dir, args)
    managed = bool(spec.get("managed"))
    if managed:
        _redirect_output(run_dir, ident["rank"])

    if not managed:  # a folder reused from an earlier run of the same job id: drop its files
        for stale in (
            rundir.rank_file(run_dir, ident["rank"]),
            rundir.beat_file(run_dir, ident["rank"]),
        ):
            stale.unlink(missing_ok=True)
        if ident["rank"] == 0:
            (run_dir / rundir.GATHERED).unlink(missing_ok=True)
    # Block SIGTERM before any thread exists (gloo's too), and take it on a thread of our own:
    # a Python handler would wait until the main thread leaves a blocked collective.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    rec = Recorder(run_dir, ident["rank"], ident["local_rank"])

    def on_term() -> None:
        signum = signal.sigwait({signal.SIGTERM})
        rec.terminated(signal.Signals(signum).name)
        os._exit(128 + signum)

    threading.Thread(target=on_term, name="ddpdoctor-sigterm", daemon=True).start()

    ctx = RankContext(
        rank=ident["rank"],
        world_size=ident["world_size"],
        local_rank=ident["local_rank"],
        local_world_size=ident["local_world_size"],
        backend=spec["backend"],
        timeout=float(spec["timeout"]),
        options={
            **spec.get("options", {}),
            "nonce": spec.get("nonce", ""),
            "launched": ident["launched"],
            "env_overrides": overrides,
        },
        faults=faults_from_env(),
        phase=lambda p: rec.phase(rec.beat.get("check"), p),
    )
    run_checks(ctx, rec, spec)
    rec.finish()
    if managed:
        # Everything is on disk and exchanged: skip the slow interpreter and torch teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    _shutdown(ctx)
    if ctx.rank == 0:
        return _report_standalone(run_dir, spec, args)
    return 0


def _shutdown(ctx: RankContext) -> None:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - leaving is best effort
        pass


def _report_standalone(run_dir: Path, spec: dict[str, Any], args: argparse.Namespace) -> int:
    """Rank 0 under the user's own launcher: wait briefly for local peers, then print the report."""
    from ddpdoctor.job import collect
    from ddpdoctor.report import render, schema

    deadline = time.monotonic() + 5.0  # local peers write their last beat right after the exchange
    while time.monotonic() < deadline:
        beats = rundir.read_beats(run_dir)
        if all(b.get("finished") for b in beats.values()):
            break
        time.sleep(0.05)
    report = collect.assemble(run_dir, spec, outcome=None)
    if args.json_path:
        schema.write(collect.to_json(report), args.json_path)
    if args.json_path != "-":
        render.report(report, ascii_only=args.ascii)
    return 0 if report.status == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
