"""Faults only torchrun's own output shows (no rank ever started): its log text, as torch 2.13
prints it, is turned into the same diagnoses a rank's error would get."""

from __future__ import annotations

from ddpdoctor.job.launch import LaunchOutcome, parse_exitcodes
from ddpdoctor.job.session import launcher_problems


def outcome(tail: str, verdict: str = "finished") -> LaunchOutcome:
    return LaunchOutcome(1, verdict, 0.0, 61.0, [], launcher_tail=tail)


def test_port_taken_under_the_launcher() -> None:
    tail = (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
    )
    (f,) = launcher_problems(outcome(tail), any_rank_started=False)
    assert f.code == "DDP905" and f.data["evidence"] == [tail]


def test_launcher_failure_names_its_last_telling_line_and_what_explain_knows_of_it() -> None:
    tail = "INFO starting\nRendezvousTimeoutError: timed out waiting for nodes\nINFO bye\n"
    (f,) = launcher_problems(outcome(tail, verdict="hung"), any_rank_started=False)
    assert f.code == "DDP906"
    assert (
        f.message
        == "torchrun started no worker within 61 s: RendezvousTimeoutError: timed out waiting for nodes"
        " — Rendezvous timed out: not every node joined (DDX191)"
    )


def test_unknown_launcher_failure_names_its_last_telling_line() -> None:
    tail = "INFO starting\nfrobnicator failed to warble\nINFO bye\n"
    (f,) = launcher_problems(outcome(tail), any_rank_started=False)
    assert f.code == "DDP906"
    assert f.message == "torchrun exited with code 1: frobnicator failed to warble"
    assert launcher_problems(outcome(tail), any_rank_started=True) == []


def test_exit_codes_from_torchrun_failure_summary() -> None:
    log = """[1]:
  time      : 2026-11-29_20:10:04
  host      : localhost
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 21160)  (SIGKILL)
"""
    assert parse_exitcodes(log) == {3: -9}


def test_a_busy_master_port_is_named_before_anything_starts(tmp_path) -> None:  # noqa: ANN001
    import socket

    from ddpdoctor.job.plan import LaunchArgs, plan, preflight

    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        p = plan(LaunchArgs(nproc=2, master_port=port, run_dir=str(tmp_path)), ["env"])
        (f,) = preflight(p)
    assert f.code == "DDP905" and f.data["port"] == port
    assert preflight(p) == []  # free again once the holder is gone
