"""What torchrun starts on every rank (`python -m ddpdoctor.worker [RUN_DIR]`).

Every rank runs the selected checks in registry order, writes its own rank file after each check
and a heartbeat while it works, and after each check all ranks exchange their results over a
separate gloo group. That exchange gives rank 0 everything (it writes gathered.json, the source
of the report on multi-node runs) and, through a tiny all-reduce, lets every rank take the same
skip decision after a failure, so collectives always pair up. Started by the user's own launcher (no spec file), rank 0
also prints the report itself (`ddpdoctor.rank.standalone`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

from ddpdoctor import registry
from ddpdoctor.rank import exchange, flight, standalone
from ddpdoctor.rank.context import RankContext, faults_from_env, is_timeout_error
from ddpdoctor.rank.recorder import Recorder
from ddpdoctor.registry import Check
from ddpdoctor.runfiles import (
    ENTRY_ERROR,
    ENTRY_OK,
    ENTRY_SKIP,
    ENTRY_TIMEOUT,
    CheckEntry,
    Gathered,
    Identity,
    JobSpec,
    Pulse,
    RunFolder,
    UnsafeRunDir,
)
from ddpdoctor.trace import stacks


def _short_error(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"[:500]


def _preload(modules: list[str]) -> None:
    """Import heavy modules a later check needs on a side thread, while the main thread waits on
    its peers in the earlier checks."""

    def load() -> None:
        for name in modules:  # a failure here shows again, with its reason, in the check
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    if modules:
        threading.Thread(target=load, name="ddpdoctor-preload", daemon=True).start()


def _run_one(mod: Check, ctx: RankContext, rec: Recorder) -> CheckEntry:
    """One check on this rank. A failing check is a result, not an abort (flutter doctor)."""
    t0 = time.perf_counter()
    try:
        entry = CheckEntry(status=ENTRY_OK, data=mod.run(ctx))
    except Exception as exc:  # noqa: BLE001 - any failure is data for the report
        entry = CheckEntry(
            status=ENTRY_TIMEOUT if is_timeout_error(exc) else ENTRY_ERROR,
            error=_short_error(exc),
            traceback=traceback.format_exc(limit=6)[-3000:],
            phase=rec.beat.phase,
            data=getattr(exc, "partial", {}) or {},
        )
    entry.duration_s = round(time.perf_counter() - t0, 4)
    return entry


class Session:
    """The check loop's shared state: whether results can still be exchanged, and why later
    collective checks are skipped. Both are identical on every rank after every exchange."""

    def __init__(
        self,
        ctx: RankContext,
        rec: Recorder,
        spec: JobSpec,
        checks: Mapping[str, Check],
        share: exchange.Exchange,
    ) -> None:
        self.ctx, self.rec, self.spec, self.checks, self.exchange = ctx, rec, spec, checks, share
        self.broken: str | None = None
        self.can_gather = False
        self.gathered = Gathered(nonce=spec.nonce)

    def share(self, cid: str, entry: CheckEntry) -> None:
        """Send this check's result toward rank 0 (it keeps them all) and learn, with every other
        rank, whether the check failed anywhere: what a rank receives does not grow with N."""
        ctx = self.ctx
        self.rec.phase(cid, "exchanging results")
        mine = {
            "check": cid,
            "rank": ctx.rank,
            "identity": {"host": ctx.host, "pid": ctx.pid, "device": self.rec.doc.device},
            "entry": entry.to_json(),
        }
        try:
            got = self.exchange(mine, entry.failed, ctx.rank, ctx.world_size, ctx.control)
        except Exception as exc:  # noqa: BLE001
            self.rec.exchange_failed(cid, _short_error(exc))
            self.can_gather = False
            self.broken = self.broken or f"ranks could not exchange results after {cid}"
            return
        self.rec.count_exchange(got.sent, got.received)
        if ctx.rank == 0 and got.docs is not None:
            self._keep(cid, got.docs)
        if got.first_failed is not None and not self.broken and self.checks[cid].COLLECTIVE:
            self.broken = f"{cid} failed on {_failed_txt(got.first_failed, got.last_failed)}"

    def _keep(self, cid: str, docs: list[object]) -> None:
        """Rank 0: every rank's entry and identity into gathered.json, rewritten after each check so
        a later failure loses nothing already exchanged."""
        per = self.gathered.checks.setdefault(cid, {})
        for e in docs:
            if not isinstance(e, dict) or not isinstance(e.get("entry"), dict):
                continue
            rank = int(e["rank"])
            per[rank] = CheckEntry.from_json(e["entry"])
            if isinstance(e.get("identity"), dict):
                self.gathered.ranks[rank] = Identity(**e["identity"])
        self.rec.folder.write_gathered(self.gathered)

    def sample_liveness(self) -> None:
        """Rank 0 after a failure on a multi-node run: who is still alive, and where each is. A
        pulse that could not start with the group (the store was slow to answer) is tried again
        here: without a sample, remote ranks are judged only from how rank 0's wait ended."""
        ctx = self.ctx
        if ctx.rank != 0 or ctx.world_size <= ctx.local_world_size:
            return
        if self.rec.pulse is None and ctx.control is not None:
            self.rec.pulse = _start_pulse(ctx, self.rec.folder.path)
        if self.rec.pulse is None:
            return
        self.rec.phase("liveness", "sampling every node's pulse in the store")
        view = self.rec.pulse.sample(ctx.world_size, ctx.local_world_size)
        self.gathered.liveness = {int(r): Pulse(**v) for r, v in view.items()}
        self.rec.folder.write_gathered(self.gathered)


def run_checks(
    ctx: RankContext,
    rec: Recorder,
    spec: JobSpec,
    checks: Mapping[str, Check] | None = None,
    share: exchange.Exchange = exchange.share_json,
) -> None:
    """The check loop. `checks` and `share` are the registry's and the gloo exchange unless a
    test gives others; checks the spec did not select run unshown (the group's creator)."""
    selected = list(spec.checks)
    checks = registry.for_run(selected) if checks is None else checks
    order = registry.run_order(checks)
    s = Session(ctx, rec, spec, checks, share)
    _preload([m for c in order for m in getattr(checks[c], "PRELOAD", ())])
    pending: list[tuple[str, CheckEntry]] = []  # results from before the group existed
    for cid in order:
        mod, shown = checks[cid], cid in selected
        if mod.COLLECTIVE and s.broken:
            if shown:
                rec.record(cid, CheckEntry(status=ENTRY_SKIP, reason=s.broken))
            continue
        rec.phase(cid, "running")
        entry = _run_one(mod, ctx, rec)
        if shown:
            rec.record(cid, entry)
        if ctx.device is not None:
            rec.set_device(str(ctx.device))
        if mod.STAGE == registry.CREATES_GROUP:
            s.can_gather = ctx.control is not None
            flight.own_group(ctx.control)  # the results' group: not what the probes test
            if not entry.ok:
                s.broken = "the process group could not be initialised"
            elif ctx.world_size > ctx.local_world_size:
                rec.pulse = _start_pulse(ctx, rec.folder.path)
        if entry.status == ENTRY_TIMEOUT:
            # A peer is stuck or unreachable: an exchange would only wait for it again. Peers
            # that finished give up on the exchange after its own deadline and skip likewise.
            s.can_gather = False
            # this rank may be gone by the verdict: keep its recorder's view of the timeout now
            with contextlib.suppress(Exception):
                group = getattr(ctx.group, "group_name", None)
                flight.dump(rec.folder.flight_file(ctx.rank), ctx.rank, group)
        if not s.can_gather and ctx.control is None and shown:
            pending.append((cid, entry))
        if s.can_gather:
            for earlier, earlier_entry in pending:  # every rank has the same pending list
                if s.can_gather:
                    s.share(earlier, earlier_entry)
            pending.clear()
        if s.can_gather:
            s.share(cid, entry)
        elif not entry.ok and mod.COLLECTIVE:
            s.broken = s.broken or f"{cid} failed on rank {ctx.rank}"
    if s.broken or not s.can_gather:
        s.sample_liveness()
    if rec.pulse is not None:
        rec.pulse.stop(finished=True)


def _failed_txt(first: int, last: int | None) -> str:
    """The skip reason every rank can write from the shared decision alone (the lowest and the
    highest failed rank; rank 0 alone knows the ranks between)."""
    if last is None or last == first:
        return f"rank {first}"
    return f"rank {first} and others up to rank {last}"


def _start_pulse(ctx: RankContext, run_dir: Path) -> object | None:
    """Several nodes: the node's first rank publishes the node's liveness through the rendezvous
    store (see rank.liveness); the other ranks do not touch the store."""
    if ctx.local_rank != 0:
        return None
    try:
        from ddpdoctor.rank.liveness import StorePulse

        return StorePulse(
            f"ddpdoctor/{ctx.options.get('nonce') or 'run'}",
            ctx.rank,
            ctx.timeout,
            first=ctx.rank,
            count=ctx.local_world_size,
            run_dir=run_dir,
        )
    except Exception:  # noqa: BLE001 - without it, remote ranks are judged from what they exchanged
        return None


def _redirect_output(folder: RunFolder, rank: int) -> None:
    """Under the ddpdoctor launcher, a rank's prints go to its log file, not the user's terminal."""
    fd = os.open(
        folder.log_file(rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _take_sigterm(rec: Recorder) -> None:
    """SIGTERM on a thread of our own (blocked in main() before any thread exists, gloo's too):
    a Python handler would wait until the main thread leaves a blocked collective."""

    def on_term() -> None:
        signum = signal.sigwait({signal.SIGTERM})
        rec.terminated(signal.Signals(signum).name)
        os._exit(128 + signum)

    threading.Thread(target=on_term, name="ddpdoctor-sigterm", daemon=True).start()


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

    overrides = standalone.guard_debug_detail(args.run_dir)
    ident = standalone.identity()
    try:
        path = Path(args.run_dir) if args.run_dir else standalone.default_run_dir()
        path.mkdir(parents=True, exist_ok=True)
    except (UnsafeRunDir, OSError) as exc:
        print(f"python -m ddpdoctor.worker: error: {exc} (pass a RUN_DIR)", file=sys.stderr)
        return 2
    folder = RunFolder(path)
    spec = folder.read_spec() or standalone.local_spec(args, ident)
    folder.nonce = spec.nonce
    if spec.managed:
        _redirect_output(folder, ident.rank)
    else:
        owner = folder.claim(ident.rank)
        if owner is not None:
            print(
                f"python -m ddpdoctor.worker: error: rank {ident.rank} is already run by pid "
                f"{owner} on this host: RANK={ident.rank} was given to two processes; let the "
                "launcher set RANK per process (torchrun does)",
                file=sys.stderr,
            )
            return 2
        # a folder reused from an earlier run of the same job id: drop its files
        folder.remove_rank_files(ident.rank)
        if ident.rank == 0:
            folder.gathered_file.unlink(missing_ok=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    rec = Recorder(folder, ident.rank, ident.local_rank, spec.nonce)
    _take_sigterm(rec)
    stacks.install(folder.stack_file(ident.rank))  # the launcher asks for them at a verdict
    flight.enable()  # before any process group exists
    flight.watch(folder, ident.rank)  # and its dump, at the same moment

    ctx = RankContext(
        rank=ident.rank,
        world_size=ident.world_size,
        local_rank=ident.local_rank,
        local_world_size=ident.local_world_size,
        backend=spec.backend,
        timeout=float(spec.timeout),
        options={
            **spec.options,
            "nonce": spec.nonce,
            "launched": ident.launched,
            "env_overrides": overrides,
        },
        faults=faults_from_env(),
        phase=lambda p: rec.phase(rec.beat.check, p),
    )
    import torch  # noqa: F401  (seconds on a loaded node: still "starting", not a check's time)

    run_checks(ctx, rec, spec)
    rec.finish()
    if spec.managed:
        # Everything is on disk and exchanged: skip the slow interpreter and torch teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    standalone.shutdown()
    if ctx.rank == 0:
        return standalone.report(folder, spec, args.json_path, args.ascii)
    return 0


if __name__ == "__main__":
    sys.exit(main())
