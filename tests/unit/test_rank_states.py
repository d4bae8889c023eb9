"""Rank states from rank files, heartbeats and the launcher's observations (crafted here: the
integration tests produce them for real with signals)."""

from __future__ import annotations

from ddpdoctor.job import rank_states
from ddpdoctor.job.launch import LaunchOutcome
from ddpdoctor.report.model import RankState
from ddpdoctor.runfiles import Heartbeat, RankDoc, Termination


def test_signal_names_from_torchrun_and_shell_codes() -> None:
    assert rank_states.signal_name(-9) == "SIGKILL"
    assert rank_states.signal_name(139) == "SIGSEGV"
    assert rank_states.signal_name(1) is None and rank_states.signal_name(None) is None


def test_states_from_files_and_launcher() -> None:
    docs = {
        0: RankDoc(0, finished=True, host="h", pid=10),
        2: RankDoc(2, terminated=Termination("SIGTERM", 5.0, "allreduce", "x")),
    }
    beats = {
        0: Heartbeat(0, finished=True),
        1: Heartbeat(
            1, check="allreduce", phase="all_reduce 1 MiB", t_phase=3.0, t_alive=4.0, pid=11
        ),
        2: Heartbeat(2, check="allreduce", t_phase=2.0),
    }
    outcome = LaunchOutcome(
        returncode=None,
        verdict="hung",
        started_at=0.0,
        duration_s=16.0,
        command=[],
        hung_ranks=[1],
        stopped_ranks=[1],
        killed_ranks=[1],
        killed_at=16.0,
    )
    states = rank_states.assess(4, docs, beats, outcome)
    assert [s.state for s in states] == ["ok", "hung", "crashed", "missing"]
    assert states[1].failed_at == 4.0  # stopped: its alive ticks stopped then
    assert "12.0 s before the verdict; the process was stopped" in states[1].detail
    assert states[2].signal == "SIGTERM" and "terminated by the launcher" in states[2].detail
    # rank 3 never started: the earliest failure (the torn-down rank 2 is never blamed)
    assert rank_states.root_cause(states).rank == 3


def test_root_cause_is_the_earliest_failure() -> None:
    a = RankState(rank=0, state="crashed", failed_at=9.0)
    b = RankState(rank=3, state="crashed", failed_at=2.0, signal="SIGKILL")
    c = RankState(rank=1, state="crashed", failed_at=1.0, signal="SIGTERM")
    assert rank_states.root_cause([a, b, c]) is b
    assert rank_states.root_cause([RankState(rank=0, state="ok")]) is None


def test_a_crashed_rank_fails_when_the_launcher_first_saw_it_gone() -> None:
    """dead_at is what launch.run records; it decides the root cause between two crashes."""
    beats = {
        0: Heartbeat(0, check="allreduce", t_phase=1.0, t_alive=9.0),
        1: Heartbeat(1, check="allreduce", t_phase=1.0, t_alive=9.5),
    }
    outcome = LaunchOutcome(1, "finished", 0.0, 12.0, [], dead_at={0: 7.0, 1: 3.0})
    states = rank_states.assess(2, {}, beats, outcome)
    assert [s.state for s in states] == ["crashed", "crashed"]
    assert [s.failed_at for s in states] == [7.0, 3.0]
    assert rank_states.root_cause(states).rank == 1


def test_a_remote_rank_without_a_pulse_sample_is_judged_by_how_rank_0_waited() -> None:
    """Rank 2 on another node stopped reporting after `env`. With no liveness sample, rank 0
    running into its deadline says the peer was cut off or stuck; a quick failure says it died."""
    seen = rank_states.Seen(host="node-c", pid=7, last_check="env")
    hung = rank_states.remote_state(2, seen, "allreduce", None, waited_in="allreduce")
    assert hung.state == "hung" and "cut off or stuck" in hung.detail
    assert "rank 0 timed out waiting in allreduce" in hung.detail
    crashed = rank_states.remote_state(2, seen, "allreduce", None)
    assert crashed.state == "crashed" and "stopped reporting after env" in crashed.detail
