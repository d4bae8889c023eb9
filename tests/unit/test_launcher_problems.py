"""Faults only torchrun's own output shows (no rank ever started): its log text, as torch 2.13
prints it, is turned into the same diagnoses a rank's error would get."""

from __future__ import annotations

from ddpdoctor.check_command import launcher_problems
from ddpdoctor.launch import LaunchOutcome, parse_exitcodes


def outcome(tail: str, verdict: str = "finished") -> LaunchOutcome:
    return LaunchOutcome(1, verdict, 0.0, 61.0, [], launcher_tail=tail)


def test_port_taken_under_the_launcher() -> None:
    tail = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    (f,) = launcher_problems(outcome(tail), any_rank_started=False)
    assert f.code == "DDP905" and f.data["evidence"] == [tail]


def test_unknown_launcher_failure_names_its_last_telling_line() -> None:
    tail = "INFO starting\nRendezvousTimeoutError: timed out waiting for nodes\nINFO bye\n"
    (f,) = launcher_problems(outcome(tail, verdict="hung"), any_rank_started=False)
    assert f.code == "DDP906"
    assert f.message == "torchrun started no worker within 61 s: RendezvousTimeoutError: timed out waiting for nodes"
    assert launcher_problems(outcome(tail), any_rank_started=True) == []


def test_exit_codes_from_torchrun_failure_summary() -> None:
    log = """[1]:
  time      : 2026-11-29_20:10:04
  host      : localhost
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 21160)  (SIGKILL)
"""
    assert parse_exitcodes(log) == {3: -9}
