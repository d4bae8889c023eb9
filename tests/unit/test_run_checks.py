"""The rank-side check loop (`worker.run_checks`) with fake check modules and a fake exchange that
plays a second rank: stage order, the hidden group creator, errors as results, skip decisions
taken from what the exchange delivered, timeouts that stop exchanging, and a failed exchange.
The real loop over gloo runs in tests/integration."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ddpdoctor import registry
from ddpdoctor.rank.context import CollectiveTimeout, RankContext
from ddpdoctor.rank.exchange import Shared
from ddpdoctor.rank.recorder import Recorder
from ddpdoctor.rank.worker import run_checks
from ddpdoctor.runfiles import CheckEntry, JobSpec, RunFolder

ran: list[str] = []


def fake(cid: str, stage: str = registry.NEEDS_GROUP, collective: bool = True, run: Any = None):  # noqa: ANN201
    def default_run(ctx: RankContext) -> dict[str, Any]:
        ran.append(cid)
        if stage == registry.CREATES_GROUP:
            ctx.control = object()
        return {"who": cid}

    return SimpleNamespace(
        ID=cid,
        TITLE=cid.title(),
        STAGE=stage,
        COLLECTIVE=collective,
        run=run or default_run,
        judge=lambda per_rank, world: None,
    )


class FakePeer:
    """Rank 1 of a 2-rank job: echoes our document as its own, except where told otherwise, and
    takes the shared decision from both entries as the real all-reduce would."""

    def __init__(self, overrides: dict[str, dict[str, Any]] | None = None, fail_at: str = ""):
        self.overrides, self.fail_at, self.calls = overrides or {}, fail_at, []

    def __call__(
        self, mine: dict[str, Any], failed: bool, rank: int, world_size: int, group: Any
    ) -> Shared:
        assert world_size == 2 and group is not None  # only ever called once a group exists
        assert rank == 0 and failed == CheckEntry.from_json(mine["entry"]).failed
        cid = mine["check"]
        self.calls.append(cid)
        if cid == self.fail_at:
            raise RuntimeError("Connection closed by peer")
        entry = {**mine["entry"], **self.overrides.get(cid, {})}
        docs = [mine, {"rank": 1, "identity": mine["identity"], "entry": entry}]
        bad = [d["rank"] for d in docs if CheckEntry.from_json(d["entry"]).failed]
        return Shared(docs, min(bad, default=None), max(bad, default=None), sent=24, received=48)


def loop(tmp_path: Path, checks: dict, peer: FakePeer, selected: list[str] | None = None):  # noqa: ANN201
    ran.clear()
    folder = RunFolder(tmp_path, "n")
    rec = Recorder(folder, 0, 0, "n")
    ctx = RankContext(rank=0, world_size=2, local_rank=0, local_world_size=2, backend="gloo")
    spec = JobSpec(checks=selected or list(checks), timeout=5, backend="gloo", nonce="n")
    run_checks(ctx, rec, spec, checks=checks, share=peer)
    rec.finish()
    return folder.read_ranks()[0], folder.read_gathered()


def test_stages_order_the_run_and_the_hidden_creator_still_runs(tmp_path: Path) -> None:
    checks = {
        "late": fake("late"),
        "early": fake("early", registry.BEFORE_GROUP, collective=False),
        "group": fake("group", registry.CREATES_GROUP),
    }
    peer = FakePeer()
    doc, gathered = loop(tmp_path, checks, peer, selected=["late", "early"])
    assert ran == ["early", "group", "late"]
    assert list(doc.checks) == ["early", "late"]  # the creator's row is hidden, not selected
    # early's result waited for the group, then went out first; every rank learns the group's
    # outcome even when its row is hidden
    assert peer.calls == ["early", "group", "late"]
    assert set(gathered.checks["late"]) == {0, 1}
    assert doc.finished
    assert doc.exchange_bytes == {"sent": 72, "received": 144, "exchanges": 3}


def test_a_raising_check_is_a_result_and_the_peer_failure_skips_later_collectives(
    tmp_path: Path,
) -> None:
    def boom(ctx: RankContext) -> dict[str, Any]:
        ctx.phase("halfway")
        raise ValueError("bad value\nsecond line")

    checks = {
        "group": fake("group", registry.CREATES_GROUP),
        "a": fake("a"),
        "b": fake("b", run=boom, collective=False),
        "c": fake("c"),
        "d": fake("d", collective=False),
    }
    peer = FakePeer(overrides={"a": {"status": "error", "error": "RuntimeError: peer broke"}})
    doc, gathered = loop(tmp_path, checks, peer)
    assert doc.checks["b"].status == "error" and doc.checks["b"].error == "ValueError: bad value"
    assert "ValueError" in doc.checks["b"].traceback
    assert doc.checks["c"].status == "skip" and doc.checks["c"].reason == "a failed on rank 1"
    assert doc.checks["d"].status == "ok"  # not collective: still runs
    assert gathered.checks["a"][1].status == "error"
    assert ran == ["group", "a", "d"]


def test_a_timeout_stops_exchanging_and_skips_the_rest(tmp_path: Path) -> None:
    def stuck(ctx: RankContext) -> dict[str, Any]:
        raise CollectiveTimeout("all_reduce did not complete within 5 s")

    checks = {
        "group": fake("group", registry.CREATES_GROUP),
        "t": fake("t", run=stuck),
        "after": fake("after"),
    }
    peer = FakePeer()
    doc, _ = loop(tmp_path, checks, peer)
    assert doc.checks["t"].status == "timeout"
    assert (
        doc.checks["after"].status == "skip" and doc.checks["after"].reason == "t failed on rank 0"
    )
    assert peer.calls == ["group"]  # nothing exchanged after the timeout: the peer may be stuck


def test_a_failed_exchange_is_recorded_and_later_collectives_skip(tmp_path: Path) -> None:
    checks = {
        "group": fake("group", registry.CREATES_GROUP),
        "a": fake("a"),
        "b": fake("b"),
    }
    doc, _ = loop(tmp_path, checks, FakePeer(fail_at="a"))
    assert doc.exchange_error is not None and doc.exchange_error.check == "a"
    assert "Connection closed by peer" in doc.exchange_error.error
    assert doc.checks["b"].status == "skip"
    assert doc.checks["b"].reason == "ranks could not exchange results after a"


def test_no_group_means_every_collective_check_skips(tmp_path: Path) -> None:
    def no_init(ctx: RankContext) -> dict[str, Any]:
        raise RuntimeError("Default process group has not been initialized")

    checks = {
        "env": fake("env", registry.BEFORE_GROUP, collective=False),
        "group": fake("group", registry.CREATES_GROUP, run=no_init),
        "a": fake("a"),
    }
    peer = FakePeer()
    doc, gathered = loop(tmp_path, checks, peer)
    assert doc.checks["group"].status == "error"
    assert doc.checks["a"].reason == "the process group could not be initialised"
    assert peer.calls == [] and gathered is None  # nothing could be exchanged


@pytest.mark.parametrize("stage", ["sometime", ""])
def test_a_module_with_an_unknown_stage_is_refused(
    stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    mod = fake("x", stage)
    monkeypatch.setattr(importlib, "import_module", lambda name: mod)
    monkeypatch.setattr(registry, "_plugins", lambda: {"x": "somewhere.x"})
    with pytest.raises(TypeError, match="unknown STAGE"):
        registry.load("x")


def test_a_pulse_that_could_not_start_with_the_group_is_started_for_the_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 of a two-node run whose store did not answer when the group was made (a real
    TCPStore, started only later, in the check that then times out): the liveness sample after the
    timeout still happens, so the report can tell a cut-off node from a crashed one."""
    import socket
    from datetime import timedelta

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    stores: list[Any] = []

    def store_then_stuck(ctx: RankContext) -> dict[str, Any]:
        stores.append(
            dist.TCPStore(
                "127.0.0.1",
                port,
                is_master=True,
                timeout=timedelta(seconds=5),
                wait_for_workers=False,
            )
        )
        raise CollectiveTimeout("all_reduce did not complete within 2 s")

    checks = {"group": fake("group", registry.CREATES_GROUP), "t": fake("t", run=store_then_stuck)}
    folder = RunFolder(tmp_path, "n")
    rec = Recorder(folder, 0, 0, "n")
    ctx = RankContext(rank=0, world_size=2, local_rank=0, local_world_size=1, backend="gloo")
    ctx.timeout = 2.0
    spec = JobSpec(checks=list(checks), timeout=2, backend="gloo", nonce="n")
    run_checks(ctx, rec, spec, checks=checks, share=FakePeer())
    rec.finish()
    live = folder.read_gathered().liveness
    assert stores and sorted(live) == [0, 1] and live[0].alive
    assert not live[1].alive and live[1].pulses == 0  # node 1 never pulsed: not alive
