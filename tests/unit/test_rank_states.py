"""Rank states from rank files, heartbeats and the launcher's observations (crafted here: the
integration tests produce them for real with signals)."""

from __future__ import annotations

from types import SimpleNamespace

from ddpdoctor.job import rank_states
from ddpdoctor.report.model import RankState


def test_signal_names_from_torchrun_and_shell_codes() -> None:
    assert rank_states.signal_name(-9) == "SIGKILL"
    assert rank_states.signal_name(139) == "SIGSEGV"
    assert rank_states.signal_name(1) is None and rank_states.signal_name(None) is None


def test_states_from_files_and_launcher() -> None:
    docs = {
        0: {"finished": True, "host": "h", "pid": 10},
        2: {"terminated": {"signal": "SIGTERM", "t": 5.0, "check": "allreduce", "phase": "x"}},
    }
    beats = {
        0: {"finished": True},
        1: {
            "check": "allreduce",
            "phase": "all_reduce 1 MiB",
            "t_phase": 3.0,
            "t_alive": 4.0,
            "pid": 11,
        },
        2: {"check": "allreduce", "t_phase": 2.0},
    }
    outcome = SimpleNamespace(
        hung_ranks=[1],
        stopped_ranks=[1],
        killed_ranks=[1],
        exitcodes={},
        pids={},
        killed_at=16.0,
        dead_at={},
        started_at=0.0,
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
