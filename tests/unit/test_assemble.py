"""`collect.assemble` on crafted run folders, one ending each: all finished, a rank crashed, hung,
missing, rank 0 dead (no gathered file), a node without rank 0, and stale files left by another
run in the same folder. The integration tests make these for real with signals; here every
branch is reached in milliseconds and asserted exactly."""

from __future__ import annotations

import sys
from pathlib import Path

from ddpdoctor.job.collect import assemble, to_json
from ddpdoctor.job.launch import LaunchOutcome
from ddpdoctor.report import problems
from ddpdoctor.runfiles import (
    CheckEntry,
    Gathered,
    Heartbeat,
    Identity,
    JobSpec,
    RankDoc,
    RunFolder,
    Termination,
)

sys.path.insert(0, str(Path(__file__).parent.parent / "checks"))
from judge_data import env_rank  # noqa: E402  (the checks' crafted healthy data)

NONCE = "run-1"


def pg_data(rank: int) -> dict:
    return {
        "backend": "gloo",
        "world_size": 2,
        "rank": rank,
        "init_s": 0.5,
        "barrier_ms": 0.3,
        "device": "cpu",
    }


def healthy_entries(rank: int) -> dict[str, CheckEntry]:
    return {
        "env": CheckEntry("ok", env_rank(rank) | {"nonce": NONCE}),
        "process_group": CheckEntry("ok", pg_data(rank)),
    }


def spec(**kw: object) -> JobSpec:
    base = dict(
        checks=["env", "process_group"], timeout=5.0, backend="gloo", nonce=NONCE, world_size=2
    )
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def write_rank(
    folder: RunFolder,
    rank: int,
    entries: dict[str, CheckEntry],
    finished: bool = True,
    nonce: str = NONCE,
    host: str = "node-a",
    **doc: object,
) -> None:
    folder.write_rank(
        RankDoc(
            rank,
            local_rank=rank,
            host=host,
            pid=100 + rank,
            nonce=nonce,
            started_at=1.0,
            finished=finished,
            checks=entries,
            last_check=list(entries)[-1] if entries else None,
            **doc,  # type: ignore[arg-type]
        )
    )
    last = list(entries)[-1] if entries else None
    folder.write_beat(
        Heartbeat(
            rank,
            pid=100 + rank,
            host=host,
            nonce=nonce,
            check=last,
            phase="finished" if finished else "running",
            t_phase=2.0,
            t_alive=3.0,
            finished=finished,
        )
    )


def write_gathered(folder: RunFolder, ranks: list[int], checks: list[str] | None = None) -> None:
    entries = {r: healthy_entries(r) for r in ranks}
    g = Gathered(nonce=NONCE)
    for cid in checks or ["env", "process_group"]:
        g.checks[cid] = {r: entries[r][cid] for r in ranks}
    g.ranks = {r: Identity(host="node-a", pid=100 + r, device="cpu") for r in ranks}
    folder.write_gathered(g)


def outcome(**kw: object) -> LaunchOutcome:
    base = dict(returncode=0, verdict="finished", started_at=0.0, duration_s=4.0, command=[])
    base.update(kw)
    return LaunchOutcome(**base)  # type: ignore[arg-type]


def statuses(report) -> dict[str, str]:  # noqa: ANN001
    return {c.id: c.status for c in report.checks}


def test_all_finished(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    for r in (0, 1):
        write_rank(folder, r, healthy_entries(r))
    write_gathered(folder, [0, 1])
    report = assemble(tmp_path, spec(), outcome())
    assert report.status == "pass" and statuses(report) == {"env": "pass", "process_group": "pass"}
    assert [s.state for s in report.ranks] == ["ok", "ok"]
    assert report.root_cause is None
    assert report.hosts[0]["host"] == "node-a" and report.hosts[0]["ranks"] == [0, 1]
    assert report.hosts[0]["versions"]["torch"] == "2.13.0"  # from env's host_facts
    assert report.launch["verdict"] == "finished" and report.duration_s == 4.0
    assert to_json(report)["counts"] == {"fail": 0, "warn": 0, "info": 0}


def test_a_crashed_rank_is_the_root_cause_and_its_peer_keeps_its_results(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, healthy_entries(0))
    write_rank(folder, 1, {"env": healthy_entries(1)["env"]}, finished=False)
    write_gathered(folder, [0, 1], ["env"])
    report = assemble(tmp_path, spec(), outcome(returncode=1, exitcodes={1: -9}, dead_at={1: 2.5}))
    crashed = report.ranks[1]
    assert crashed.state == "crashed" and crashed.signal == "SIGKILL" and crashed.failed_at == 2.5
    assert report.root_cause["rank"] == 1 and report.root_cause["state"] == "crashed"
    row = next(c for c in report.checks if c.id == "env")
    assert row.findings[0].code == problems.RANK_CRASHED.code and row.findings[0].ranks == [1]
    assert report.checks[1].ranks[0]["status"] == "ok"  # rank 0's process_group result is kept
    assert "rank 1 did not report" in report.checks[1].summary


def test_a_hung_rank_is_named_with_what_it_was_doing(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, healthy_entries(0), finished=False)
    folder.write_rank(RankDoc(1, host="node-a", pid=101, nonce=NONCE, started_at=1.0))
    folder.write_beat(
        Heartbeat(1, pid=101, nonce=NONCE, check="process_group", phase="monitored barrier",
                  t_phase=2.0, t_alive=2.0)
    )  # fmt: skip
    report = assemble(
        tmp_path,
        spec(),
        outcome(verdict="hung", hung_ranks=[1], killed_ranks=[0, 1], stopped_ranks=[1],
                killed_at=12.0),
    )  # fmt: skip
    hung = report.ranks[1]
    assert hung.state == "hung" and hung.failed_at == 2.0
    assert "stopped responding in process_group (monitored barrier) 10.0 s" in hung.detail
    row = next(c for c in report.checks if c.id == "process_group")
    assert row.findings[0].code == problems.RANK_HUNG.code and row.status == "fail"
    assert report.ranks[0].state == "ok" and "alive, waiting" in report.ranks[0].detail


def test_a_missing_rank_goes_into_the_row_of_the_check_that_creates_the_group(
    tmp_path: Path,
) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, {"env": healthy_entries(0)["env"]}, finished=False)
    report = assemble(tmp_path, spec(), outcome(verdict="hung", hung_ranks=[1], started_at=0.5))
    assert report.ranks[1].state == "missing"
    row = next(c for c in report.checks if c.id == "process_group")
    assert [f.code for f in row.findings] == [problems.RANK_MISSING.code]
    assert report.root_cause["rank"] == 1  # never started: earlier than anything else


def test_rank_0_dead_without_a_gathered_file_still_reports_rank_1(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, {"env": healthy_entries(0)["env"]}, finished=False)
    write_rank(folder, 1, healthy_entries(1))
    report = assemble(tmp_path, spec(), outcome(returncode=1, exitcodes={0: -11}))
    assert report.ranks[0].state == "crashed" and report.ranks[0].signal == "SIGSEGV"
    assert report.checks[1].ranks[1]["status"] == "ok"  # rank 1's own file carries its story
    assert report.root_cause["rank"] == 0


def test_a_node_without_rank_0_judges_only_its_own_ranks(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 2, healthy_entries(2), host="node-b")
    write_rank(folder, 3, healthy_entries(3), host="node-b")
    report = assemble(tmp_path, spec(nnodes=2, world_size=4), outcome())
    assert report.launch["view"] == "node"
    assert [s.rank for s in report.ranks] == [2, 3]
    assert "did not report" not in report.checks[0].summary


def test_files_of_another_run_in_the_same_folder_are_ignored(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, healthy_entries(0))
    write_rank(folder, 1, healthy_entries(1))
    stale = RunFolder(tmp_path)  # an earlier run with 3 ranks left rank-2 and a gathered file
    write_rank(stale, 2, healthy_entries(2), nonce="run-0")
    g = Gathered(nonce="run-0", checks={"env": {5: healthy_entries(1)["env"]}})
    stale.write_gathered(g)
    report = assemble(tmp_path, spec(), outcome())
    assert [s.rank for s in report.ranks] == [0, 1]
    assert set(report.checks[0].ranks) == {0, 1}
    assert report.status == "pass"


def test_remote_ranks_are_known_through_rank_0(tmp_path: Path) -> None:
    """Rank 1 lives on another node: only rank 0's gathered file knows it."""
    folder = RunFolder(tmp_path, NONCE)
    write_rank(folder, 0, healthy_entries(0))
    write_gathered(folder, [0, 1])
    report = assemble(tmp_path, spec(nnodes=2), outcome())
    remote = report.ranks[1]
    assert remote.state == "ok" and remote.host == "node-a" and remote.pid == 101
    assert remote.device == "cpu" and remote.detail == "reported every check through rank 0"


def test_a_terminated_rank_is_never_the_root_cause(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    write_rank(
        folder,
        0,
        healthy_entries(0),
        finished=False,
        terminated=Termination("SIGTERM", 3.0, "process_group", "barrier latency"),
    )
    write_rank(folder, 1, {"env": healthy_entries(1)["env"]}, finished=False)
    report = assemble(tmp_path, spec(), outcome(returncode=1, exitcodes={1: 1}, dead_at={1: 4.0}))
    assert report.ranks[0].signal == "SIGTERM"
    assert report.root_cause["rank"] == 1  # the rank that really failed, though later


def test_an_error_the_signature_table_knows_gets_its_probe_code(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, NONCE)
    for r in (0, 1):
        entries = healthy_entries(r)
        entries["process_group"] = CheckEntry(
            "error",
            error="RuntimeError: [enforce fail at ../gloo/transport/tcp/device.cc:83] ifa != nullptr. "
            "Unable to find address for: eth9",
            phase="init_process_group",
        )
        write_rank(folder, r, entries, finished=True)
    report = assemble(tmp_path, spec(), outcome())
    row = next(c for c in report.checks if c.id == "process_group")
    assert row.status == "error"
    (f,) = row.findings
    assert f.code == problems.SOCKET_IFNAME_MISSING.code and f.ranks == [0, 1]
    assert "; DDX151)" in f.message and "in init_process_group" in f.message
