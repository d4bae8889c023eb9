"""LaunchSpec → torchrun subprocess → LaunchOutcome.

torchrun runs as a child in its own session, so a deadline and a kill are always possible and
the user's terminal stays with us. Its workers start their own sessions (torch elastic does
that), so they are tracked by pid — from psutil and from their heartbeats — and killed one by one.
While they run, heartbeats decide whether the job still moves: a rank that makes no progress for
longer than a collective's deadline (plus a grace) is hung, a rank that never beats is missing."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpdoctor.runfiles import Heartbeat, RunFolder

# The live display's callback: this node's heartbeats and the seconds since the launch.
Tick = Callable[[dict[int, Heartbeat], float], None]

POLL_S = 0.1
FINISHED_GRACE_S = 0.5  # after every rank reported finished, how long torchrun may take to exit
# torchrun's own rendezvous timeout, beyond ours: its store must outlive our verdict, when it is
# read to name the nodes that never joined (a loaded node takes long to get there)
RDZV_MARGIN_S = 120


@dataclass
class LaunchSpec:
    """Everything needed to start one node's workers; validated before anything runs."""

    nproc: int
    run_dir: Path
    timeout: float
    checks_count: int = 6
    nnodes: int = 1
    node_rank: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_backend: str | None = None
    nonce: str = ""  # this run's files carry it; files of another run in the folder are ignored
    module: str = "ddpdoctor.worker"
    worker_argv: list[str] | None = None  # what follows `-m module`; None: the run folder alone
    deadline_override_s: float | None = None  # a run bounded otherwise (ddpdoctor run)
    env: dict[str, str] = field(default_factory=dict)
    startup_s: float = 60.0

    def local_ranks(self) -> set[int] | None:
        """This node's global ranks when the placement is static; None with a dynamic
        rendezvous (c10d assigns them: they are learnt from the workers as they start)."""
        if self.rdzv_endpoint and self.nnodes > 1:
            return None
        base = (self.node_rank or 0) * self.nproc
        return set(range(base, base + self.nproc))

    @property
    def grace_s(self) -> float:
        return 3.0 + 0.1 * self.timeout

    @property
    def deadline_s(self) -> float:
        """The whole run's bound: start-up, then every check at its deadline plus the exchange's."""
        if self.deadline_override_s is not None:
            return self.startup_s + self.deadline_override_s
        return self.startup_s + self.checks_count * (2 * self.timeout + 5)


@dataclass
class LaunchOutcome:
    returncode: int | None
    verdict: str  # finished | hung | deadline | interrupted | launch-failed
    started_at: float
    duration_s: float
    command: list[str]
    killed_at: float | None = None
    hung_ranks: list[int] = field(default_factory=list)
    killed_ranks: list[int] = field(
        default_factory=list
    )  # alive when the verdict came: we ended them
    stopped_ranks: list[int] = field(default_factory=list)
    exitcodes: dict[int, int] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    dead_at: dict[int, float] = field(default_factory=dict)  # when a rank was first seen gone
    signal: str | None = None  # what interrupted us (SIGINT, SIGTERM, SIGHUP)
    busy: dict[int, float] = field(default_factory=dict)  # hung ranks' CPU use while stuck (cores)

    @property
    def launcher_killed(self) -> str | None:
        """torchrun died by a signal that did not come from us (we kill it only at the end, and
        then record when)."""
        if self.verdict != "finished" or self.killed_at is not None:
            return None
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    launcher_tail: str = ""
    reason: str = ""


class Interrupted(Exception):
    """SIGTERM or SIGHUP to ddpdoctor (timeout, Slurm, Kubernetes, CI cancellation, a closed ssh
    session): handled like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def _interruptible() -> Any:
    """SIGTERM and SIGHUP raise Interrupted in the main thread while the launch runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _die_with_parent() -> None:
    """In torchrun's process, before it starts: the kernel kills it when ddpdoctor dies, even by
    SIGKILL; its workers then see their parent gone and end themselves (rank.recorder)."""
    with contextlib.suppress(Exception):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_busy(port: int, host: str = "") -> bool:
    """True when nothing could listen on the port (what torchrun's store is about to do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def torchrun_command(spec: LaunchSpec) -> list[str]:
    """torchrun's argv. A single-node run goes through `loopback_store`, so that its store
    listens on the master address only, not on every interface."""
    addr = spec.master_addr or "127.0.0.1"
    single = not spec.rdzv_endpoint and spec.nnodes == 1
    entry = (
        ["ddpdoctor.job.loopback_store", addr, str(spec.master_port), "--"]
        if single
        else ["torch.distributed.run"]
    )
    cmd = [
        sys.executable,
        "-m",
        *entry,
        "--nproc-per-node",
        str(spec.nproc),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.1",
    ]
    if spec.rdzv_endpoint:
        cmd += [
            "--nnodes",
            str(spec.nnodes),
            "--rdzv-backend",
            spec.rdzv_backend or "c10d",
            "--rdzv-endpoint",
            spec.rdzv_endpoint,
            "--rdzv-id",
            spec.rdzv_id or "ddpdoctor",
        ]
        if spec.node_rank is not None:
            cmd += ["--node-rank", str(spec.node_rank)]
    else:
        cmd += [
            "--nnodes",
            str(spec.nnodes),
            "--node-rank",
            str(spec.node_rank or 0),
            "--master-addr",
            addr,
            "--master-port",
            str(spec.master_port),
        ]
    if spec.nnodes > 1:  # torchrun waits longer than we do, so its store can still be read
        key = "join_timeout" if spec.rdzv_endpoint and spec.rdzv_backend != "static" else "timeout"
        cmd += ["--rdzv-conf", f"{key}={int(spec.startup_s + RDZV_MARGIN_S)}"]
    argv = [str(spec.run_dir)] if spec.worker_argv is None else spec.worker_argv
    return [*cmd, "-m", spec.module, *argv]


_FAILURE = re.compile(
    r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)"
)


def parse_exitcodes(log: str) -> dict[int, int]:
    """torchrun's failure summary: 'rank : 1 (local_rank: 1)' then 'exitcode : -9 (pid: 123)'."""
    return {int(m.group(1)): int(m.group(2)) for m in _FAILURE.finditer(log)}


class _Workers:
    """The worker processes of this node, found through psutil and the heartbeats."""

    def __init__(self, launcher_pid: int) -> None:
        self.launcher_pid = launcher_pid
        self.rank_of: dict[int, int] = {}

    def scan(self, beats: dict[int, Heartbeat]) -> dict[int, Any]:
        import psutil

        found: dict[int, Any] = {}
        try:
            children = psutil.Process(self.launcher_pid).children(recursive=True)
        except psutil.Error:
            children = []
        for proc in children:
            if proc.pid not in self.rank_of:
                try:
                    env = proc.environ()
                    if "RANK" in env and "TORCHELASTIC_RUN_ID" in env:
                        self.rank_of[proc.pid] = int(env["RANK"])
                except (psutil.Error, ValueError):
                    continue
            if proc.pid in self.rank_of:
                found[self.rank_of[proc.pid]] = proc
        for rank, beat in beats.items():
            pid = beat.pid
            if rank not in found and pid:
                with contextlib.suppress(psutil.Error):
                    found[rank] = psutil.Process(pid)
                    self.rank_of[pid] = rank
        return found

    def dead(self, procs: dict[int, Any], beats: dict[int, Heartbeat]) -> list[int]:
        """Ranks whose process has ended (or is a zombie) without saying it finished."""
        import psutil

        out = []
        for rank, beat in beats.items():
            if beat.finished:
                continue
            proc = procs.get(rank)
            try:
                gone = proc is None or proc.status() == psutil.STATUS_ZOMBIE
            except psutil.Error:
                gone = True
            if gone:
                out.append(rank)
        return out

    @staticmethod
    def stopped(procs: dict[int, Any]) -> list[int]:
        import psutil

        out = []
        for rank, proc in procs.items():
            with contextlib.suppress(psutil.Error):
                if proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                    out.append(rank)
        return sorted(out)


def _kill_all(proc: subprocess.Popen, procs: dict[int, Any]) -> None:
    """SIGKILL works on stopped processes too; workers live in their own sessions."""
    import psutil

    victims = list(procs.values())
    with contextlib.suppress(psutil.Error):
        victims += psutil.Process(proc.pid).children(recursive=True)
    for p in victims:
        with contextlib.suppress(psutil.Error):
            p.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)
    psutil.wait_procs([p for p in victims if p.is_running()], timeout=5)


def _finished(beats: dict[int, Heartbeat], rank: int) -> bool:
    beat = beats.get(rank)
    return beat is not None and beat.finished


def tail_text(path: Path, limit: int = 4000) -> str:
    """The last `limit` bytes of a log, as text; empty when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# Called at a verdict with this node's unfinished ranks still alive ({rank: psutil.Process}),
# before anything is killed: the moment to take their stacks.
BeforeKill = Callable[[dict[int, Any]], None]


def run(
    spec: LaunchSpec, on_tick: Tick | None = None, before_kill: BeforeKill | None = None
) -> LaunchOutcome:
    """Start torchrun, watch the heartbeats, end it at the verdict. Never leaves a process behind."""
    cmd = torchrun_command(spec)
    env = {**os.environ, **spec.env}
    started = time.time()
    folder = RunFolder(spec.run_dir, spec.nonce)
    log_path = folder.launcher_log
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            return LaunchOutcome(None, "launch-failed", started, 0.0, cmd, reason=str(exc))
    workers = _Workers(proc.pid)
    verdict, reason, hung, stopped, killed, procs = "finished", "", [], [], [], {}
    killed_at = None
    done_at: float | None = None
    dead_at: dict[int, float] = {}
    expected = spec.local_ranks()
    interrupted_by: str | None = None
    busy: dict[int, float] = {}
    try:
        with _interruptible():
            while proc.poll() is None:
                time.sleep(POLL_S)
                now = time.time()
                beats = folder.read_beats()
                procs = workers.scan(beats)
                for r in workers.dead(procs, beats):
                    dead_at.setdefault(r, now)
                if on_tick:
                    on_tick(beats, now - started)
                local = expected if expected is not None else set(procs) | set(beats)
                unfinished = {r for r in local if not _finished(beats, r) and r not in dead_at}
                finished = [r for r in local if _finished(beats, r)]
                if not unfinished and len(finished) >= spec.nproc:
                    # every rank is done and has said so: torchrun's own teardown adds nothing
                    done_at = done_at or now
                    if now - done_at > FINISHED_GRACE_S:
                        break
                    continue
                finished_any = any(b.finished for b in beats.values())

                def idle(r: int, beats: dict[int, Heartbeat] = beats, now: float = now) -> float:
                    b = beats.get(r)
                    return now - (b.t_phase if b else started)

                def allowed(r: int, beats: dict[int, Heartbeat] = beats) -> float:
                    """A rank still starting (no beat, or not at work yet) has the start-up time."""
                    step = spec.timeout + spec.grace_s
                    if r not in beats and spec.nnodes > 1:
                        return spec.startup_s  # not even started: the rendezvous deadline
                    working = r in beats and beats[r].phase != "starting"
                    return step if working else max(spec.startup_s, step)

                stuck = [r for r in unfinished if idle(r) > allowed(r)]
                if finished_any:  # the others are done: whoever is still not moving is stuck
                    stuck += [r for r in unfinished if r not in stuck and idle(r) > spec.grace_s]
                if expected is None and len(local) < spec.nproc and now - started > spec.startup_s:
                    stuck += sorted(unfinished) or [-1]  # some of this node's ranks never started
                if stuck:
                    verdict, hung = "hung", sorted(set(stuck))
                    reason = f"rank {','.join(map(str, hung))} made no progress"
                    # a rank that computes without progress is stuck too, even if its heartbeat
                    # crossed the line a tick after the first: it is the likelier culprit
                    busy = _cpu_use({r: procs[r] for r in unfinished if r in procs})
                    late = {r for r in busy if idle(r) > spec.timeout}
                    hung = sorted(set(hung) | late)
                    break
                if now - started > spec.deadline_s:
                    verdict, hung, reason = (
                        "deadline",
                        sorted(unfinished),
                        f"the run passed its {spec.deadline_s:.0f} s bound",
                    )
                    break
    except (KeyboardInterrupt, Interrupted) as exc:
        # the ranks did nothing wrong: those still running are ended, not called hung
        interrupted_by = exc.args[0] if isinstance(exc, Interrupted) else "SIGINT"
        verdict, reason, hung = "interrupted", f"interrupted by {interrupted_by}", []
    finally:
        if proc.poll() is None:
            beats = folder.read_beats()
            procs = workers.scan(beats)
            stopped = _Workers.stopped(procs)
            if before_kill is not None and verdict != "finished":
                alive = {r: p for r, p in procs.items() if not _finished(beats, r)}
                with contextlib.suppress(Exception):  # a failed dump never blocks the kill
                    before_kill(alive)
            killed = sorted(r for r, p in procs.items() if p.is_running())
            killed_at = time.time()
            _kill_all(proc, procs)
        else:
            _kill_all(proc, workers.scan(folder.read_beats()))
    tail = tail_text(log_path)
    return LaunchOutcome(
        returncode=proc.returncode,
        verdict=verdict,
        started_at=started,
        duration_s=time.time() - started,
        command=cmd,
        killed_at=killed_at,
        hung_ranks=hung if verdict != "finished" else [],
        stopped_ranks=stopped,
        killed_ranks=killed,
        exitcodes=parse_exitcodes(tail_text(log_path, 200_000)),
        pids={r: p.pid for r, p in procs.items()},
        dead_at=dead_at,
        launcher_tail=tail,
        reason=reason,
        signal=interrupted_by,
        busy=busy,
    )


BUSY_SAMPLE_S = 0.5
BUSY_CORES = 0.1  # a rank blocked in a collective sleeps (~0); a starved one still computes


def _cpu_use(procs: dict[int, Any]) -> dict[int, float]:
    """Cores each stuck rank used over a short window: a busy rank is slow, not blocked."""
    import psutil

    def cpu(p: Any) -> float | None:
        try:
            t = p.cpu_times()
            return float(t.user + t.system)
        except psutil.Error:
            return None

    before = {r: cpu(p) for r, p in procs.items()}
    time.sleep(BUSY_SAMPLE_S)
    out = {}
    for r, p in procs.items():
        a, b = before[r], cpu(p)
        if a is not None and b is not None and (b - a) / BUSY_SAMPLE_S >= BUSY_CORES:
            out[r] = round((b - a) / BUSY_SAMPLE_S, 2)
    return out
